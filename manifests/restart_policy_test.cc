#include "manifests/restart_policy.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kDigest[] = "8d13908715809a2c974703ebdef73a03f3e854ceee241693788453a614abadc3";
constexpr char kRevision[] = "f751b8828ef23efd613b30602303a90e4e09e42d";

using Causes = std::vector<std::string>;

struct Loaded {
  bool ok = false;
  Manifest manifest;
  Diagnostics diags;
  std::string text;  // every diagnostic, one a line

  const RestartPolicy& restart(const std::string& deployment) const {
    return manifest.deployments.at(deployment).restart;
  }
  // How many diagnostics read exactly `line`.
  int Count(const std::string& line) const {
    int n = 0;
    for (const Diagnostic& d : diags) n += d.ToString() == line ? 1 : 0;
    return n;
  }
};

Loaded LoadYaml(const std::string& yaml) {
  char pattern[] = "/tmp/fleet-restart-policy-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  fs::copy(fs::path(FLEET_MANIFESTS_TESTDATA) / "valid" / "recipes", fs::path(dir) / "recipes",
           fs::copy_options::recursive);
  std::ofstream(dir + "/fleet.yaml") << yaml;
  Loaded l;
  l.ok = LoadManifest(dir, &l.manifest, &l.diags);
  for (const Diagnostic& d : l.diags) l.text += d.ToString() + "\n";
  fs::remove_all(dir);
  return l;
}

// Lines 1-9 of every manifest here.
const std::string kHead = std::string(
                              "version: 1\n"                   // 1
                              "fleet: lab\n"                   // 2
                              "nodes:\n"                       // 3
                              "  dgx1: {address: dgx1.lan}\n"  // 4
                              "  dgx2: {address: dgx2.lan}\n"  // 5
                              "images:\n"                      // 6
                              "  b12x: {ref: \"eugr/b12x@sha256:") +
                          kDigest +
                          "\"}\n"      // 7
                          "models:\n"  // 8
                          "  qwen38: {repo: a/q, revision: " +
                          kRevision + "}\n";  // 9

// A deployment entry of 6 lines (its name, then 5 keys at 4 spaces), then
// `extra` (lines at 4 spaces).
std::string Deployment(const std::string& name, const std::string& node, int port,
                       const std::string& extra = "") {
  return "  " + name +
         ":\n"
         "    recipe: recipes/qwen38-flash-next-int4.toml\n"
         "    nodes: [" +
         node +
         "]\n"
         "    image: b12x\n"
         "    model: qwen38\n"
         "    port: " +
         std::to_string(port) + "\n" + extra;
}

// kHead, then `defaults` (whole lines), then deployment q on dgx1 whose
// `extra` lines start at line 17 + the number of lines of `defaults`.
Loaded LoadQ(const std::string& defaults, const std::string& extra) {
  return LoadYaml(kHead + defaults + "deployments:\n" + Deployment("q", "dgx1", 30000, extra));
}

void ExpectBuiltIn(const RestartPolicy& p) {
  EXPECT_FALSE(p.never);
  EXPECT_EQ(p.on, (Causes{"exit", "unhealthy", "smoke"}));
  EXPECT_EQ(p.backoff_s, 30);
  EXPECT_EQ(p.max_backoff_s, 600);
  EXPECT_EQ(p.limit, 5);
  EXPECT_EQ(p.window_s, 3600);
}

TEST(RestartPolicy, WithoutAnyRestartKeyTheBuiltInPolicy) {
  const Loaded l = LoadQ("", "");
  ASSERT_TRUE(l.ok) << l.text;
  EXPECT_TRUE(l.diags.empty()) << l.text;
  const RestartPolicy& p = l.restart("q");
  ExpectBuiltIn(p);
  EXPECT_EQ(p.loc.line, 0);  // built in: declared nowhere
  EXPECT_EQ(l.manifest.deployments.at("q").health.grace_rounds, 2);
  ExpectBuiltIn(RestartPolicy{});
  EXPECT_TRUE(RestartPolicyHeals(p, "exit"));
  EXPECT_TRUE(RestartPolicyHeals(p, "unhealthy"));
  EXPECT_TRUE(RestartPolicyHeals(p, "smoke"));
  EXPECT_FALSE(RestartPolicyHeals(p, "reboot"));
}

TEST(RestartPolicy, DefaultsApplyToEveryDeployment) {
  const Loaded l = LoadYaml(
      kHead +
      "defaults:\n"                                                                           // 10
      "  restart: {on: [unhealthy, exit], backoff: 1m, max_backoff: 20m, limit: 10 in 2h}\n"  // 11
      "deployments:\n" +
      Deployment("a", "dgx1", 30000) + Deployment("b", "dgx2", 30001));
  ASSERT_TRUE(l.ok) << l.text;
  for (const char* name : {"a", "b"}) {
    const RestartPolicy& p = l.restart(name);
    EXPECT_FALSE(p.never);
    EXPECT_EQ(p.on, (Causes{"exit", "unhealthy"}));  // in the canonical order
    EXPECT_EQ(p.backoff_s, 60);
    EXPECT_EQ(p.max_backoff_s, 1200);
    EXPECT_EQ(p.limit, 10);
    EXPECT_EQ(p.window_s, 7200);
    EXPECT_EQ(p.loc.ToString(), "fleet.yaml:11:3");
    EXPECT_FALSE(RestartPolicyHeals(p, "smoke"));
  }
}

// The example of the issue, key by key.
TEST(RestartPolicy, DeploymentKeysOverrideTheDefaultsKeyByKey) {
  const Loaded l = LoadYaml(
      kHead +
      "defaults:\n"  // 10
      "  restart: {on: [exit, unhealthy, smoke], backoff: 45s, max_backoff: 15m, limit: 4 in "
      "2h}\n"             // 11
      "deployments:\n" +  // 12
      Deployment("qwen38", "dgx1", 30000,
                 "    restart: {on: [exit, smoke], limit: 3 in 30m}\n"          // 19
                 "    health: {path: /v1/models, timeout: 30m, grace: 4}\n") +  // 20
      Deployment("bench-only", "dgx2", 30001, "    restart: never\n"));         // 27
  ASSERT_TRUE(l.ok) << l.text;
  EXPECT_TRUE(l.diags.empty()) << l.text;
  const RestartPolicy& q = l.restart("qwen38");
  EXPECT_FALSE(q.never);
  EXPECT_EQ(q.on, (Causes{"exit", "smoke"}));
  EXPECT_EQ(q.backoff_s, 45);       // from defaults
  EXPECT_EQ(q.max_backoff_s, 900);  // from defaults
  EXPECT_EQ(q.limit, 3);
  EXPECT_EQ(q.window_s, 1800);
  EXPECT_EQ(q.loc.ToString(), "fleet.yaml:19:5");
  EXPECT_EQ(l.manifest.deployments.at("qwen38").health.grace_rounds, 4);
  EXPECT_EQ(l.manifest.deployments.at("qwen38").health.timeout_s, 1800);
  const RestartPolicy& bench = l.restart("bench-only");
  EXPECT_TRUE(bench.never);
  EXPECT_EQ(bench.loc.ToString(), "fleet.yaml:27:5");
  EXPECT_FALSE(RestartPolicyHeals(bench, "exit"));
}

TEST(RestartPolicy, NeverInADeploymentOnlyThatDeployment) {
  const Loaded l =
      LoadYaml(kHead + "deployments:\n" + Deployment("a", "dgx1", 30000, "    restart: never\n") +
               Deployment("b", "dgx2", 30001));
  ASSERT_TRUE(l.ok) << l.text;
  EXPECT_TRUE(l.restart("a").never);
  EXPECT_FALSE(l.restart("b").never);
  ExpectBuiltIn(l.restart("b"));
}

TEST(RestartPolicy, NeverInDefaultsWinsOverADeploymentMap) {
  const Loaded l = LoadQ(
      "defaults:\n"  // 10
      "  restart: never\n",
      "    restart: {limit: 2 in 1h}\n");  // 19
  ASSERT_TRUE(l.ok) << l.text;             // a warning only
  EXPECT_TRUE(l.restart("q").never);
  EXPECT_EQ(l.restart("q").limit, 2);
  ASSERT_EQ(l.diags.size(), 1u) << l.text;
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:19:5: warning: 'restart' in deployment 'q' has no effect: restart: never "
            "in defaults wins over it (remove that to heal this deployment)");
}

TEST(RestartPolicy, AMapWithoutKeysChangesNothing) {
  const Loaded l = LoadQ("defaults: {restart: {}}\n", "    restart: {}\n");
  ASSERT_TRUE(l.ok) << l.text;
  ExpectBuiltIn(l.restart("q"));
}

// One error and the line of it, for a `restart` (or health) under q.
struct ErrorCase {
  std::string extra;  // deployment q's extra line (line 17)
  std::string want;   // the whole diagnostic
};

TEST(RestartPolicy, EachErrorNamesLineColumnAndWhatWasExpected) {
  const std::vector<ErrorCase> cases = {
      {"    restart: {on: [exit, unhealty]}\n",
       "fleet.yaml:17:26: error: 'on' in deployment 'q' restart must list exit, unhealthy or "
       "smoke, got 'unhealty'; did you mean 'unhealthy'?"},
      {"    restart: {on: [exit, reboot]}\n",
       "fleet.yaml:17:26: error: 'on' in deployment 'q' restart must list exit, unhealthy or "
       "smoke, got 'reboot'"},
      {"    restart: {on: [exit, exit]}\n",
       "fleet.yaml:17:26: error: 'on' in deployment 'q' restart lists 'exit' twice"},
      {"    restart: {on: []}\n",
       "fleet.yaml:17:19: error: 'on' in deployment 'q' restart is empty; write restart: never "
       "to heal nothing, or list some of exit, unhealthy or smoke"},
      {"    restart: {on: exit}\n",
       "fleet.yaml:17:19: error: 'on' in deployment 'q' restart must be a list, got the string "
       "'exit'; write [exit]"},
      {"    restart: {backoff: soon}\n",
       "fleet.yaml:17:24: error: 'backoff' in deployment 'q' restart must be a duration such as "
       "30s, 2m or 1h (a plain number is seconds), got 'soon'"},
      {"    restart: {backoff: 0s}\n",
       "fleet.yaml:17:24: error: 'backoff' in deployment 'q' restart must be longer than 0, got "
       "'0s'"},
      {"    restart: {max_backoff: 0}\n",
       "fleet.yaml:17:28: error: 'max_backoff' in deployment 'q' restart must be longer than 0, "
       "got '0'"},
      {"    restart: {backoff: 20m, max_backoff: 10m}\n",
       "fleet.yaml:17:24: error: 'backoff' 20m in deployment 'q' restart is longer than "
       "'max_backoff' 10m; backoff is the first wait before healing again, max_backoff the "
       "longest"},
      {"    restart: {backoff: 1h30m}\n",
       "fleet.yaml:17:24: error: 'backoff' 1h30m in deployment 'q' restart is longer than the "
       "inherited max_backoff 10m; backoff is the first wait before healing again, max_backoff "
       "the longest"},
      {"    restart: {max_backoff: 10s}\n",
       "fleet.yaml:17:28: error: 'max_backoff' 10s in deployment 'q' restart is shorter than the "
       "inherited backoff 30s; backoff is the first wait before healing again, max_backoff the "
       "longest"},
      {"    restart: {limit: 5}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart must be '<count> in "
       "<duration>' such as '5 in 1h' (at most <count> heals in any <duration>), got '5'"},
      {"    restart: {limit: 5 per 1h}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart must be '<count> in "
       "<duration>' such as '5 in 1h' (at most <count> heals in any <duration>), got '5 per "
       "1h'"},
      {"    restart: {limit: 0 in 1h}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart: the count 0 is out of range "
       "1-1000"},
      {"    restart: {limit: 1001 in 1h}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart: the count 1001 is out of "
       "range 1-1000"},
      {"    restart: {limit: 5 in 1y}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart: '1y' is not a duration longer "
       "than 0; expected such as 30m, 1h or 90s (a plain number is seconds)"},
      {"    restart: {limit: 5 in 0s}\n",
       "fleet.yaml:17:22: error: 'limit' in deployment 'q' restart: '0s' is not a duration longer "
       "than 0; expected such as 30m, 1h or 90s (a plain number is seconds)"},
      {"    restart: {backof: 1m}\n",
       "fleet.yaml:17:15: error: unknown key 'backof' in deployment 'q' restart; did you mean "
       "'backoff'?"},
      {"    restart: nevr\n",
       "fleet.yaml:17:14: error: 'restart' in deployment 'q' must be never or a map such as {on: "
       "[exit, smoke], backoff: 30s, max_backoff: 10m, limit: 5 in 1h}, got 'nevr'; did you mean "
       "'never'?"},
      {"    restart: [exit]\n",
       "fleet.yaml:17:14: error: 'restart' in deployment 'q' must be never or a map such as {on: "
       "[exit, smoke], backoff: 30s, max_backoff: 10m, limit: 5 in 1h}, got a list"},
      {"    resart: never\n",
       "fleet.yaml:17:5: error: unknown key 'resart' in deployment 'q'; did you mean 'restart'?"},
      {"    health: {grace: 0}\n",
       "fleet.yaml:17:21: error: 'grace' in deployment 'q' health 0 is out of range 1-1000"},
      {"    health: {grace: two}\n",
       "fleet.yaml:17:21: error: 'grace' in deployment 'q' health must be an integer 1-1000, got "
       "the string 'two'"},
  };
  for (const ErrorCase& c : cases) {
    const Loaded l = LoadQ("", c.extra);
    EXPECT_FALSE(l.ok) << c.extra;
    EXPECT_EQ(l.Count(c.want), 1) << "yaml: " << c.extra << "want: " << c.want << "\ngot:\n"
                                  << l.text;
    EXPECT_EQ(l.diags.size(), 1u) << c.extra << l.text;
  }
}

TEST(RestartPolicy, ErrorsInDefaultsAreLocatedThere) {
  const Loaded l = LoadQ(
      "defaults:\n"                                    // 10
      "  restart: {on: [exit, smoke], backoff: 2h}\n"  // 11
      "  restat: never\n",                             // 12
      "    restart: {backoff: 5m}\n");                 // 19
  EXPECT_FALSE(l.ok);
  EXPECT_EQ(l.Count("fleet.yaml:11:41: error: 'backoff' 2h in defaults restart is longer than "
                    "the inherited max_backoff 10m; backoff is the first wait before healing "
                    "again, max_backoff the longest"),
            1)
      << l.text;
  EXPECT_EQ(l.Count("fleet.yaml:12:3: error: unknown key 'restat' in defaults; did you mean "
                    "'restart'?"),
            1)
      << l.text;
  EXPECT_EQ(l.diags.size(), 2u) << l.text;
  // The bad backoff of defaults is left out; its good keys stay.
  const RestartPolicy& p = l.restart("q");
  EXPECT_EQ(p.on, (Causes{"exit", "smoke"}));
  EXPECT_EQ(p.backoff_s, 300);
  EXPECT_EQ(p.max_backoff_s, 600);
}

TEST(RestartPolicy, DefaultsMustBeAMap) {
  const Loaded l = LoadQ("defaults: never\n", "");
  EXPECT_FALSE(l.ok);
  EXPECT_EQ(l.Count("fleet.yaml:10:11: error: defaults must be a map (key: value pairs), got the "
                    "string 'never'"),
            1)
      << l.text;
}

TEST(RestartPolicy, ABadValueKeepsTheInheritedOne) {
  const Loaded l = LoadQ("defaults: {restart: {limit: 7 in 2h, backoff: 1m}}\n",
                         "    restart: {limit: 0 in 1h, backoff: never, on: [exit, nope]}\n");
  EXPECT_FALSE(l.ok);
  const RestartPolicy& p = l.restart("q");
  EXPECT_EQ(p.limit, 7);
  EXPECT_EQ(p.window_s, 7200);
  EXPECT_EQ(p.backoff_s, 60);
  EXPECT_EQ(p.on, (Causes{"exit", "unhealthy", "smoke"}));
}

}  // namespace
}  // namespace fleet
