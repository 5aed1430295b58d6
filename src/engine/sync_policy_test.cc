#include "src/engine/sync_policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

SourceLoc At(int line, int column) { return SourceLoc{"fleet.yaml", line, column}; }

// The lab as applied: two nodes under one top-level ssh block, a switch.
Manifest Applied() {
  Manifest m;
  m.root_dir = "/lab/manifests";
  m.ssh.user = "kilork";
  m.ssh.identity = "/home/op/.ssh/id_ed25519";
  m.ssh.known_hosts = "/lab/manifests/known_hosts";
  m.ssh.loc = At(4, 1);
  m.power.present = true;
  m.power.kind = "home-assistant";
  m.power.url = "https://ha.lab:8123";
  m.power.token_env = "HA_TOKEN";
  m.power.loc = At(5, 1);
  for (const auto& [name, line] : {std::pair{"dgx1", 8}, std::pair{"dgx2", 12}}) {
    NodeSpec n;
    n.name = name;
    n.address = std::string(name) + ".lab";
    n.ssh = m.ssh;  // no block of its own
    n.loc = At(line, 3);
    m.nodes[name] = n;
  }
  return m;
}

std::string All(const std::vector<std::string>& lines) {
  std::string s;
  for (const std::string& l : lines) s += l + "\n";
  return s;
}

TEST(SyncPolicy, TheSameManifestsNeedNoPerson) {
  EXPECT_TRUE(ChangesForAPerson(Applied(), Applied()).empty());
}

TEST(SyncPolicy, ACommitThatChangesSyncWaitsWhateverItSays) {
  Manifest next = Applied();
  next.sync.destroy = true;
  next.sync.loc = At(30, 1);
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:30:1: the commit changes sync:", 0), 0u) << lines[0];

  // Narrowing it is a change of policy too: a person applies it.
  next = Applied();
  next.sync.allow = {"add"};
  EXPECT_EQ(ChangesForAPerson(Applied(), next).size(), 1u);
  // The same lists in another order are the same policy.
  Manifest a = Applied(), b = Applied();
  a.sync.allow = {"add", "change"};
  b.sync.allow = {"change", "add"};
  EXPECT_TRUE(ChangesForAPerson(a, b).empty());
}

TEST(SyncPolicy, WhereTheSwitchTokenGoesWaits) {
  Manifest next = Applied();
  next.power.url = "http://10.9.9.9:8123";
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0],
            "fleet.yaml:5:1: power url changes from 'https://ha.lab:8123' to "
            "'http://10.9.9.9:8123' (where the switch's token is sent: a person approves it)");

  next = Applied();
  next.power.token_env = "HF_TOKEN";
  lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_NE(lines[0].find("power token_env changes from 'HA_TOKEN' to 'HF_TOKEN'"),
            std::string::npos);

  next = Applied();
  next.power.kind = "other";
  EXPECT_EQ(ChangesForAPerson(Applied(), next).size(), 1u);
  Manifest none = Applied();
  none.power = PowerController{};
  EXPECT_EQ(ChangesForAPerson(none, Applied()).size(), 1u);  // a controller added
}

// Which variable's token the nodes' downloads get, and which program gets
// it, waits like the switch's token; a hub block added with a token too.
TEST(SyncPolicy, TheHubTokenWaits) {
  Manifest applied = Applied();
  applied.hub.present = true;
  applied.hub.token_env = "HF_TOKEN";
  applied.hub.loc = At(6, 1);
  Manifest next = applied;
  next.hub.token_env = "OTHER_TOKEN";
  std::vector<std::string> lines = ChangesForAPerson(applied, next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0],
            "fleet.yaml:6:1: hub token_env changes from 'HF_TOKEN' to 'OTHER_TOKEN' (which "
            "token the nodes' downloads get: a person approves it)");

  next = applied;
  next.hub.cli = "/tmp/hf";
  lines = ChangesForAPerson(applied, next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_NE(lines[0].find("hub cli changes from (none) to '/tmp/hf'"), std::string::npos);

  EXPECT_EQ(ChangesForAPerson(Applied(), applied).size(), 1u);  // a token added
  EXPECT_TRUE(ChangesForAPerson(applied, applied).empty());
}

// Whom fleet trusts to be the controller (the CA it checks the
// certificate against, or no check at all) waits for a person too.
TEST(SyncPolicy, HowTheControllerIsTrustedWaits) {
  Manifest next = Applied();
  next.power.ca_file = "/lab/manifests/certs/ha-ca.pem";
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0],
            "fleet.yaml:5:1: power ca_file changes from (none) to '/lab/manifests/certs/ha-ca.pem' "
            "(where the switch's token is sent: a person approves it)");

  next = Applied();
  next.power.insecure = true;
  lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_NE(lines[0].find("power insecure changes from 'false' to 'true'"), std::string::npos);

  // The same CA file under another checkout is the same trust once rebased.
  Manifest copy = Applied();
  copy.power.ca_file = "/tmp/sync-copy/certs/ha-ca.pem";
  Manifest here = Applied();
  here.power.ca_file = "/lab/manifests/certs/ha-ca.pem";
  RebaseControllerPaths("/tmp/sync-copy", "/lab/manifests", &copy);
  EXPECT_TRUE(ChangesForAPerson(here, copy).empty()) << All(ChangesForAPerson(here, copy));
}

// A gateway's keys say whom it lets in: moving them, or dropping them (an
// open gateway), waits; a gateway added without keys does not.
TEST(SyncPolicy, WhomTheGatewayLetsInWaits) {
  Manifest applied = Applied();
  GatewaySpec lab;
  lab.name = "lab";
  lab.keys_path = "/home/op/.config/fleet/lab-keys";
  lab.loc = At(20, 3);
  applied.gateways["lab"] = lab;
  Manifest next = applied;
  EXPECT_TRUE(ChangesForAPerson(applied, next).empty());
  next.gateways["lab"].keys_path = "";
  std::vector<std::string> lines = ChangesForAPerson(applied, next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_NE(lines[0].find("fleet.yaml:20:3: gateway lab's keys change"), std::string::npos)
      << lines[0];
  next.gateways["lab"].keys_env = "OTHER_KEYS";
  EXPECT_EQ(ChangesForAPerson(applied, next).size(), 2u);
  next = applied;
  GatewaySpec open;
  open.name = "open";
  next.gateways["open"] = open;
  EXPECT_TRUE(ChangesForAPerson(applied, next).empty());
}

TEST(SyncPolicy, WhomFleetTrustsWaits) {
  Manifest next = Applied();
  NodeSpec evil = next.nodes["dgx1"];
  evil.name = "dgx9";
  evil.address = "10.66.0.9";
  evil.loc = At(16, 3);
  evil.ssh.known_hosts = "/lab/manifests/evil_known_hosts";
  evil.ssh.loc = At(18, 5);
  next.nodes["dgx9"] = evil;
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:16:3: the commit adds node dgx9 at '10.66.0.9'", 0), 0u)
      << lines[0];

  next = Applied();
  next.nodes["dgx2"].address = "10.66.0.2";
  lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:12:3: node dgx2's address changes from 'dgx2.lab' to "
                           "'10.66.0.2'",
                           0),
            0u)
      << lines[0];
}

TEST(SyncPolicy, TheTopLevelSshBlockIsSaidOnceANodesOwnBlockByItself) {
  Manifest next = Applied();
  next.ssh.identity = "/lab/manifests/keys/id";
  for (auto& [name, n] : next.nodes) n.ssh = next.ssh;
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:4:1: ssh identity changes from", 0), 0u) << lines[0];

  next = Applied();
  next.nodes["dgx2"].ssh.port = 2222;
  next.nodes["dgx2"].ssh.loc = At(14, 5);
  lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:14:5: node dgx2's ssh port changes from '22' to '2222'", 0),
            0u)
      << lines[0];

  // A node block that only restates the top level's settings changes nothing.
  next = Applied();
  next.nodes["dgx2"].ssh.loc = At(14, 5);
  EXPECT_TRUE(ChangesForAPerson(Applied(), next).empty());
}

TEST(SyncPolicy, TheStateBackendWaits) {
  Manifest next = Applied();
  next.state.backend = "postgres";
  next.state.loc = At(3, 1);
  std::vector<std::string> lines = ChangesForAPerson(Applied(), next);
  ASSERT_EQ(lines.size(), 1u) << All(lines);
  EXPECT_EQ(lines[0].rfind("fleet.yaml:3:1: state backend changes from 'local' to 'postgres'", 0),
            0u);
}

PlanChange Change(const std::string& address, const std::string& type, Action action,
                  const std::string& summary = "") {
  PlanChange c;
  c.address = address;
  c.type = type;
  c.action = action;
  c.summary = summary;
  return c;
}

TEST(SyncPolicy, ThePlanIsGatedByTheAppliedPolicy) {
  const std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  Plan plan;
  plan.changes = {Change("deployment.a@dgx1", "deployment", Action::kCreate),
                  Change("deployment.b@dgx2", "deployment", Action::kDelete)};
  SyncSettings policy;  // the built-in one: no destroy
  EXPECT_EQ(PlanNeedsAPerson(plan, policy, providers),
            "the plan would destroy deployment.b@dgx2 (sync.destroy is false)");
  policy.destroy = true;
  EXPECT_EQ(PlanNeedsAPerson(plan, policy, providers), "");
  policy.allow = {"change"};
  EXPECT_EQ(PlanNeedsAPerson(plan, policy, providers),
            "the plan would add deployment.a@dgx1 (sync.allow does not list add)");

  Plan off;
  off.changes = {Change("node.dgx3", "node", Action::kUpdate, "power off (switch.dgx3)")};
  off.changes[0].detail = {{"op", "power_off"}};  // NodeStep
  EXPECT_EQ(PlanNeedsAPerson(off, SyncSettings{}, providers),
            "the plan would power off node.dgx3 (sync.destroy is false)");
  // A node's other steps are changes, which the built-in policy allows.
  off.changes[0].detail = {{"op", "power_on"}};
  EXPECT_EQ(PlanNeedsAPerson(off, SyncSettings{}, providers), "");
}

TEST(SyncPolicy, FromEnvNamesOutsideTheAllowListAreNamed) {
  Manifest m = Applied();
  DeploymentSpec d;
  d.name = "a";
  d.recipe_path = "recipes/a.toml";
  d.recipe.env_from = {{"HF_TOKEN", "HF_TOKEN"}, {"LEAK", "FLEET_DEMO_HA_TOKEN"}};
  m.deployments["a"] = d;
  m.deployments["b"] = d;  // the same recipe: said once
  std::vector<std::string> out = EnvNamesNotAllowed(m, {"HF_TOKEN"});
  ASSERT_EQ(out.size(), 1u) << All(out);
  EXPECT_EQ(out[0], "recipes/a.toml: LEAK = {from_env = \"FLEET_DEMO_HA_TOKEN\"}");
  EXPECT_EQ(EnvNamesNotAllowed(m, {}).size(), 2u);
  EXPECT_TRUE(EnvNamesNotAllowed(m, {"HF_TOKEN", "FLEET_DEMO_HA_TOKEN"}).empty());
}

TEST(SyncPolicy, ACopysRelativePathsResolveAgainstTheCheckout) {
  Manifest m = Applied();
  m.ssh.identity = "/tmp/fleet-sync.abc/keys/id";
  m.ssh.known_hosts = "/home/op/.ssh/known_hosts";
  m.nodes["dgx1"].ssh.known_hosts = "/tmp/fleet-sync.abc/kh";
  m.state.path = "/tmp/fleet-sync.abc/.fleet/state.json";
  RebaseControllerPaths("/tmp/fleet-sync.abc", "/lab/manifests", &m);
  EXPECT_EQ(m.ssh.identity, "/lab/manifests/keys/id");
  EXPECT_EQ(m.ssh.known_hosts, "/home/op/.ssh/known_hosts");  // outside the copy: kept
  EXPECT_EQ(m.nodes["dgx1"].ssh.known_hosts, "/lab/manifests/kh");
  EXPECT_EQ(m.state.path, "/lab/manifests/.fleet/state.json");
  // A sibling whose name only starts like the copy's is not inside it.
  m.ssh.identity = "/tmp/fleet-sync.abcd/id";
  RebaseControllerPaths("/tmp/fleet-sync.abc", "/lab/manifests", &m);
  EXPECT_EQ(m.ssh.identity, "/tmp/fleet-sync.abcd/id");
}

// Two trees as sync sees them: the commit's copy and the lab's checkout.
struct TwoTrees {
  const testing_support::TempDir copy_dir{"sync_policy_test"}, live_dir{"sync_policy_test"};
  const std::string copy = copy_dir.path(), live = live_dir.path();
  static void Write(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::binary) << text;
  }
};

TEST(SyncPolicy, ATrustFileChangedAtTheSamePathWaits) {
  TwoTrees t;
  ASSERT_FALSE(t.copy.empty() || t.live.empty());
  for (const std::string& root : {t.copy, t.live}) {
    TwoTrees::Write(root + "/ha-ca.pem", "CA of the lab\n");
    TwoTrees::Write(root + "/known_hosts", "dgx1.lab ssh-ed25519 AAAA1\n");
  }
  Manifest next = Applied();
  next.power.ca_file = t.copy + "/ha-ca.pem";
  next.ssh.known_hosts = t.copy + "/known_hosts";
  next.ssh.identity = "/home/op/.ssh/id_ed25519";  // outside the repo: no commit writes it
  for (auto& [name, node] : next.nodes) node.ssh = next.ssh;
  EXPECT_EQ(All(TrustFileChanges(next, t.copy, t.live)), "");

  // The commit swaps the CA and a host key, paths unchanged: both wait, the
  // known_hosts file once though three blocks name it.
  TwoTrees::Write(t.copy + "/ha-ca.pem", "the attacker's CA\n");
  TwoTrees::Write(t.copy + "/known_hosts", "dgx1.lab ssh-ed25519 AAAA-other\n");
  EXPECT_EQ(All(TrustFileChanges(next, t.copy, t.live)),
            "fleet.yaml:5:1: the commit changes the content of ha-ca.pem (whom fleet sends "
            "the switch's token to: a person approves it)\n"
            "fleet.yaml:4:1: the commit changes the content of known_hosts (whom fleet logs in "
            "to, and with which key: a person approves it)\n");

  // A file the commit adds at a declared path is a change too.
  next.nodes["dgx2"].ssh.identity = t.copy + "/keys/dgx2";
  std::filesystem::create_directories(t.copy + "/keys");
  TwoTrees::Write(t.copy + "/keys/dgx2", "a key\n");
  EXPECT_NE(All(TrustFileChanges(next, t.copy, t.live)).find("content of keys/dgx2"),
            std::string::npos);
}

}  // namespace
}  // namespace fleet
