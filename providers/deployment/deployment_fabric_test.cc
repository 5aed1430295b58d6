// Fabric facts for a deployment on several nodes: the placeholders, the
// fabric_env opt-in, the hash, the plan errors, and the diff that renders
// them from the probe's facts.
#include "providers/deployment/deployment_fabric.h"

#include <gtest/gtest.h>

#include "providers/deployment/deployment_provider.h"
#include "providers/shared/fabric_facts.h"
#include "providers/shared/serving/deployment_json.h"

namespace fleet {
namespace {

const std::string kRef = "127.0.0.1:5000/team/vllm@sha256:" + std::string(64, 'd');

// dgx1 (head) and dgx2, each with the fake sysfs of fleet-sim --net
// lan+fabric: one ACTIVE 200 Gb/s RoCE port with GID 3, one DOWN HCA.
Manifest GroupManifest() {
  Manifest m;
  for (const char* name : {"dgx1", "dgx2"}) {
    NodeSpec n;
    n.name = name;
    n.address = std::string(name) + ".lan";
    n.container_cli = "podman";
    m.nodes[name] = n;
  }
  ImageSpec img;
  img.name = "vllm";
  img.ref = kRef;
  m.images["vllm"] = img;
  DeploymentSpec d;
  d.name = "pair";
  d.nodes = {"dgx1", "dgx2"};
  d.image = "vllm";
  d.port = 30000;
  d.health.path = "/v1/models";
  d.recipe.args = {"--node-rank", "{rank}",       "--dist-init-addr", "{head_fabric_addr}:5000",
                   "--bind",      "{fabric_addr}"};
  m.deployments["pair"] = d;
  return m;
}

NodeFacts FactsWith(const std::string& ports) {
  NodeFacts f;
  f.reachable = true;
  f.fabric = FabricPortsToJson(ParseFabricPorts(ports));
  return f;
}

std::map<std::string, NodeFacts> SimFacts() {
  std::map<std::string, NodeFacts> facts;
  facts["dgx1"] = FactsWith(
      "fabric_port=rocep1s0f0|1|DOWN|enp1s0f0np0|200|-1|\n"
      "fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.77.0.11/24\n");
  facts["dgx2"] = FactsWith(
      "fabric_port=rocep1s0f0|1|DOWN|enp1s0f0np0|200|-1|\n"
      "fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.77.0.12/24\n");
  return facts;
}

TEST(DeploymentFabric, PlaceholdersNameTheNodesFabricAndTheHeads) {
  const Manifest m = GroupManifest();
  const auto facts = SimFacts();
  Result<ContainerSpec> worker = RenderWithFabric(m, "pair", "dgx2", &facts);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  EXPECT_EQ(worker->command, (std::vector<std::string>{"--node-rank", "1", "--dist-init-addr",
                                                       "10.77.0.11:5000", "--bind", "10.77.0.12"}));
  ASSERT_TRUE(worker->fabric.has_value());
  EXPECT_EQ(worker->fabric->interface, "enp1s0f1np1");
  EXPECT_EQ(worker->fabric->hcas, "rocep1s0f1");  // the DOWN HCA is not listed
  EXPECT_EQ(worker->fabric->gid_index, 3);
  EXPECT_EQ(worker->fabric->subnet, "10.77.0.0/24");
  EXPECT_TRUE(worker->env.empty());  // no fabric_env: placeholders only
  // {head_fabric_addr} alone makes a group: ranks and one head.
  EXPECT_EQ(worker->nnodes, 2);
  EXPECT_EQ(worker->HealthUrl(), "");
  Result<ContainerSpec> head = RenderWithFabric(m, "pair", "dgx1", &facts);
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->command[3], "10.77.0.11:5000");
  EXPECT_EQ(head->command[5], "10.77.0.11");
  // Every fabric placeholder, with two active HCAs on one netdev.
  Manifest all = GroupManifest();
  all.deployments["pair"].recipe.args = {"{fabric_if}", "{fabric_hca}", "{fabric_gid_index}"};
  auto two = SimFacts();
  two["dgx2"] = FactsWith(
      "fabric_port=rocep1s0f0|1|ACTIVE|enp1s0f1np1|200|3|10.77.0.12/24\n"
      "fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.77.0.12/24\n");
  Result<ContainerSpec> w2 = RenderWithFabric(all, "pair", "dgx2", &two);
  ASSERT_TRUE(w2.ok()) << w2.status().message();
  EXPECT_EQ(w2->command, (std::vector<std::string>{"enp1s0f1np1", "rocep1s0f0,rocep1s0f1", "3"}));
}

TEST(DeploymentFabric, FabricEnvSetsWhatThePlaybooksSetAndTheRecipeWins) {
  Manifest m = GroupManifest();
  m.deployments["pair"].fabric_env = true;
  m.deployments["pair"].recipe.env = {{"NCCL_IB_GID_INDEX", "1"}};
  m.deployments["pair"].recipe.env_from = {{"UCX_NET_DEVICES", "FLEET_TEST_UCX"}};
  const auto facts = SimFacts();
  Result<ContainerSpec> worker = RenderWithFabric(m, "pair", "dgx2", &facts);
  ASSERT_TRUE(worker.ok()) << worker.status().message();
  const std::map<std::string, std::string> want = {
      {"NCCL_SOCKET_IFNAME", "enp1s0f1np1"}, {"GLOO_SOCKET_IFNAME", "enp1s0f1np1"},
      {"NCCL_IB_HCA", "rocep1s0f1"},         {"NCCL_IB_GID_INDEX", "1"},  // the recipe's
      {"MASTER_ADDR", "10.77.0.11"},         {"MASTER_PORT", "29500"}};
  EXPECT_EQ(worker->env, want);
  EXPECT_EQ(worker->env_from.at("UCX_NET_DEVICES"), "FLEET_TEST_UCX");
  // The plan shows the values, and its JSON carries them to apply.
  const nlohmann::json j = worker->ToPlanJson();
  EXPECT_EQ(j["env"]["MASTER_ADDR"], "10.77.0.11");
  EXPECT_EQ(j["fabric"]["head_address"], "10.77.0.11");
  EXPECT_EQ(j.get<ContainerShown>().fabric, worker->fabric);
  // Not a group: its own fabric, MASTER_ADDR its own address.
  Manifest one = m;
  one.deployments["pair"].nodes = {"dgx2"};
  one.deployments["pair"].recipe.args = {};
  Result<ContainerSpec> alone = RenderWithFabric(one, "pair", "dgx2", &facts);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  EXPECT_EQ(alone->env.at("MASTER_ADDR"), "10.77.0.12");
  EXPECT_EQ(alone->nnodes, 1);
}

// MASTER_PORT is torch's default rendezvous port (no manifest or recipe
// field names one), and a recipe that rendezvouses elsewhere says so in its
// own env, which wins, as does a from_env of it.
TEST(DeploymentFabric, FabricEnvSetsTorchsDefaultMasterPortUnlessTheRecipeSetsIt) {
  Manifest m = GroupManifest();
  m.deployments["pair"].fabric_env = true;
  const auto facts = SimFacts();
  Result<ContainerSpec> head = RenderWithFabric(m, "pair", "dgx1", &facts);
  ASSERT_TRUE(head.ok()) << head.status().message();
  EXPECT_EQ(head->env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(head->env.at("MASTER_ADDR"), "10.77.0.11");
  const std::string default_port_hash = RenderWithFabric(m, "pair", "dgx2", &facts)->hash;
  m.deployments["pair"].recipe.env = {{"MASTER_PORT", "{port}1"}};
  Result<ContainerSpec> own = RenderWithFabric(m, "pair", "dgx2", &facts);
  ASSERT_TRUE(own.ok()) << own.status().message();
  EXPECT_EQ(own->env.at("MASTER_PORT"), std::to_string(m.deployments["pair"].port) + "1");
  EXPECT_NE(own->hash, default_port_hash);
  m.deployments["pair"].recipe.env = {};
  m.deployments["pair"].recipe.env_from = {{"MASTER_PORT", "FLEET_TEST_PORT"}};
  Result<ContainerSpec> from = RenderWithFabric(m, "pair", "dgx2", &facts);
  ASSERT_TRUE(from.ok()) << from.status().message();
  EXPECT_EQ(from->env.count("MASTER_PORT"), 0u);
  EXPECT_EQ(from->env_from.at("MASTER_PORT"), "FLEET_TEST_PORT");
  // Without a head address there is no rendezvous to name: neither is set.
  FabricValues none;
  none.interface = "enp1s0f1np1";
  EXPECT_EQ(FabricEnv(none).count("MASTER_PORT"), 0u);
}

TEST(DeploymentFabric, HashFollowsTheFabricOnlyWhereItIsUsed) {
  Manifest m = GroupManifest();
  m.deployments["pair"].fabric_env = true;
  auto facts = SimFacts();
  const std::string before = RenderWithFabric(m, "pair", "dgx2", &facts)->hash;
  facts["dgx2"] = FactsWith("fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|4|10.77.0.12/24\n");
  Result<ContainerSpec> after = RenderWithFabric(m, "pair", "dgx2", &facts);
  EXPECT_NE(after->hash, before);  // a new GID index replaces the serve
  EXPECT_EQ(SpecDifferences(RenderWithFabric(m, "pair", "dgx2", &facts)->Shown(),
                            RenderWithFabric(m, "pair", "dgx2", &facts)->Shown()),
            std::vector<std::string>{});
  auto old_facts = SimFacts();
  const std::vector<std::string> diffs =
      SpecDifferences(RenderWithFabric(m, "pair", "dgx2", &old_facts)->Shown(), after->Shown());
  ASSERT_FALSE(diffs.empty());
  EXPECT_EQ(diffs[0],
            "fabric: 10.77.0.12 on enp1s0f1np1 (HCA rocep1s0f1, GID 3), head 10.77.0.11 -> "
            "10.77.0.12 on enp1s0f1np1 (HCA rocep1s0f1, GID 4), head 10.77.0.11");
  // A deployment that uses no fabric: the same spec (and hash) as ever,
  // whatever the facts say.
  Manifest plain = GroupManifest();
  plain.deployments["pair"].recipe.args = {"--node-rank", "{rank}", "{head}"};
  Result<ContainerSpec> p = RenderWithFabric(plain, "pair", "dgx2", &facts);
  EXPECT_FALSE(p->fabric.has_value());
  EXPECT_EQ(p->hash, RenderContainerSpec(plain, "pair", "dgx2")->hash);
  EXPECT_FALSE(p->ToPlanJson().contains("fabric"));
}

TEST(DeploymentFabric, ANodeWithoutAFabricIsAnErrorNamingIt) {
  const Manifest m = GroupManifest();
  auto facts = SimFacts();
  facts["dgx2"] = FactsWith("fabric_port=rocep1s0f1|1|DOWN|enp1s0f1np1|200|-1|\n");
  Result<ContainerSpec> s = RenderWithFabric(m, "pair", "dgx1", &facts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "deployment 'pair' uses the fabric ({fabric_addr}), but dgx2 has no fabric address "
            "(no ACTIVE port with an IPv4 address); declare fabric: {address: ...} on it, or "
            "bring up its RoCE port");
  facts.erase("dgx2");  // not probed (unreachable)
  s = RenderWithFabric(m, "pair", "dgx1", &facts);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dgx2 has no fabric address (none declared, and dgx2 could "
                                      "not be probed)"),
            std::string::npos)
      << s.status().message();
}

TEST(DeploymentFabric, NodesOnNoCommonSubnetAreAnErrorNamingThem) {
  Manifest m = GroupManifest();
  m.deployments["pair"].fabric_env = true;
  m.deployments["pair"].recipe.args = {};
  auto facts = SimFacts();
  facts["dgx2"] = FactsWith("fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.99.0.12/24\n");
  Result<ContainerSpec> s = RenderWithFabric(m, "pair", "dgx1", &facts);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "deployment 'pair' uses the fabric (fabric_env: true), but its nodes share no fabric "
            "subnet: dgx1 10.77.0.11 (10.77.0.0/24) (the head), dgx2 10.99.0.12 (10.99.0.0/24)");
}

TEST(DeploymentFabric, ADeclaredFabricNeedsNoProbeButHasNoPortFacts) {
  Manifest m = GroupManifest();
  m.nodes["dgx1"].fabric_address = "10.77.0.11";
  m.nodes["dgx2"].fabric_address = "10.77.0.12";
  Result<ContainerSpec> s = RenderWithFabric(m, "pair", "dgx2", nullptr);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->command[3], "10.77.0.11:5000");
  m.deployments["pair"].recipe.args = {"{fabric_hca}"};
  s = RenderWithFabric(m, "pair", "dgx2", nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message(),
            "deployment 'pair' uses the fabric ({fabric_hca}), but no active RoCE HCA was probed "
            "on dgx2 (declare fabric: {interface: ...}, or let the probe read "
            "/sys/class/infiniband) for {fabric_hca}");
  m.deployments["pair"].recipe.args = {};
  m.deployments["pair"].fabric_env = true;
  s = RenderWithFabric(m, "pair", "dgx2", nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("its fabric interface is not known on dgx2"),
            std::string::npos);
  m.nodes["dgx2"].fabric_interface = "enp1s0f1np1";
  s = RenderWithFabric(m, "pair", "dgx2", nullptr);
  ASSERT_TRUE(s.ok()) << s.status().message();
  // What is not known is left out of the env, not guessed.
  EXPECT_EQ(s->env, (std::map<std::string, std::string>{{"NCCL_SOCKET_IFNAME", "enp1s0f1np1"},
                                                        {"GLOO_SOCKET_IFNAME", "enp1s0f1np1"},
                                                        {"UCX_NET_DEVICES", "enp1s0f1np1"},
                                                        {"MASTER_ADDR", "10.77.0.11"},
                                                        {"MASTER_PORT", "29500"}}));
}

// The diff renders with the probe's facts (Expand knew none), and its
// errors are the plan's.
TEST(DeploymentFabric, TheDiffRendersFromTheProbeAndFailsThePlan) {
  Manifest m = GroupManifest();
  m.deployments["pair"].fabric_env = true;
  DeploymentProvider p;
  std::vector<DesiredResource> desired = p.Expand(m);
  ASSERT_EQ(desired.size(), 2u);
  const DesiredResource& worker = desired[1];
  ASSERT_EQ(worker.address, "deployment.pair@dgx2");
  auto facts = SimFacts();
  ActualResource absent;
  absent.probed = true;
  DiffContext ctx{facts["dgx2"], &facts, nullptr, &m, false, nullptr};
  PlanChange c = p.Diff(worker, absent, nullptr, ctx);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.action, Action::kCreate);
  const DeploymentWant want = c.after.get<DeploymentWant>();
  EXPECT_EQ(want.shown.env.at("NCCL_SOCKET_IFNAME"), "enp1s0f1np1");
  EXPECT_EQ(want.shown.env.at("MASTER_ADDR"), "10.77.0.11");
  ASSERT_TRUE(want.shown.fabric.has_value());
  // Apply renders again from what the plan carries: the same spec.
  EXPECT_EQ(RenderContainerSpec(m, "pair", "dgx2", &*want.shown.fabric)->hash, want.shown.spec);
  // A container running that spec is left alone.
  ActualResource running;
  running.probed = running.exists = true;
  ContainerProbe probe;
  probe.exists = true;
  probe.state = "running";
  probe.spec = want.shown.spec;
  running.attributes = probe.ToJson();
  EXPECT_EQ(p.Diff(worker, running, nullptr, ctx).action, Action::kNoop);
  // The head moved to another subnet: a plan error on each rank.
  facts["dgx1"] = FactsWith("fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.99.0.11/24\n");
  c = p.Diff(worker, absent, nullptr, ctx);
  EXPECT_EQ(c.error.rfind("deployment.pair@dgx2: deployment 'pair' uses the fabric "
                          "(fabric_env: true), but its nodes share no fabric subnet: dgx1",
                          0),
            0u)
      << c.error;
}

}  // namespace
}  // namespace fleet
