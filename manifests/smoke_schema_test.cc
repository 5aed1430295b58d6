#include "manifests/smoke_schema.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kDigest[] = "8d13908715809a2c974703ebdef73a03f3e854ceee241693788453a614abadc3";
constexpr char kRevision[] = "f751b8828ef23efd613b30602303a90e4e09e42d";

struct Loaded {
  bool ok = false;
  Manifest manifest;
  std::string diags;
};

// fleet.yaml with one deployment whose smoke list is `smoke` (from line 17).
Loaded Load(const std::string& smoke) {
  char pattern[] = "/tmp/fleet-smoke-schema-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  fs::copy(fs::path(FLEET_MANIFESTS_TESTDATA) / "valid" / "recipes", fs::path(dir) / "recipes",
           fs::copy_options::recursive);
  std::ofstream(dir + "/fleet.yaml") << "version: 1\n"                   // 1
                                        "fleet: lab\n"                   // 2
                                        "nodes:\n"                       // 3
                                        "  dgx1: {address: dgx1.lan}\n"  // 4
                                        "images:\n"                      // 5
                                        "  b12x: {ref: \"eugr/b12x@sha256:" +
                                            std::string(kDigest) +
                                            "\"}\n"  // 6
                                            "models:\n"
                                            "  qwen38: {repo: a/q, revision: " +
                                            kRevision +
                                            "}\n"
                                            "deployments:\n"  // 9
                                            "  q:\n"
                                            "    recipe: recipes/qwen38-flash-next-int4.toml\n"
                                            "    nodes: [dgx1]\n"
                                            "    image: b12x\n"
                                            "    model: qwen38\n"
                                            "    port: 30000\n"
                                            "    smoke:\n" +  // 19
                                            smoke;
  Loaded l;
  Diagnostics diags;
  l.ok = LoadManifest(dir, &l.manifest, &diags);
  for (const Diagnostic& d : diags) l.diags += d.ToString() + "\n";
  fs::remove_all(dir);
  return l;
}

TEST(SmokeSchema, TheIssueExampleLoads) {
  const Loaded l = Load(
      "      - {name: math,  chat: \"What is 127*89? Reply with the number only.\", expect: "
      "\"11303\", timeout: 2m}\n"
      "      - {name: paris, chat: \"What is the capital of France? One word.\", expect: "
      "\"(?i)paris\"}\n"
      "      - {name: tools, tools: true, timeout: 2m}\n"
      "      - {name: needle, needle_tokens: 45000, timeout: 10m, max_tokens: 64}\n");
  ASSERT_TRUE(l.ok) << l.diags;
  const std::vector<SmokeCheck>& s = l.manifest.deployments.at("q").smoke;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].name, "math");
  EXPECT_EQ(s[0].expect, "11303");
  EXPECT_EQ(s[0].timeout_s, 120);
  EXPECT_EQ(s[1].timeout_s, 120);  // the default
  EXPECT_TRUE(s[2].tools);
  EXPECT_EQ(s[3].needle_tokens, 45000);
  EXPECT_EQ(s[3].timeout_s, 600);
  EXPECT_EQ(s[3].max_tokens, 64);
}

TEST(SmokeSchema, ErrorsNameFileLineColumn) {
  const Loaded l = Load(
      "      - {name: math, chat: \"2+2\"}\n"                      // 17
      "      - {name: bad, chat: \"x\", expect: \"(unclosed\"}\n"  // 18
      "      - {name: t, tools: true, timout: 2m}\n"               // 19
      "      - {name: n, needle_tokens: 10}\n"                     // 20
      "      - {name: t, tools: true}\n"                           // 21
      "      - {chat: \"x\", expect: \"y\", timeout: soon}\n"      // 22
      "      - {name: e}\n");                                      // 23
  EXPECT_FALSE(l.ok);
  for (const char* want :
       {"fleet.yaml:17:22: error: smoke check 1 of deployment 'q' has 'chat' but no 'expect'",
        "fleet.yaml:18:40: error: 'expect' in smoke check 2 of deployment 'q' is not a "
        "regular expression",
        "fleet.yaml:19:32: error: unknown key 'timout' in smoke check 3 of deployment 'q'; "
        "did you mean 'timeout'?",
        "fleet.yaml:20:34: error: 'needle_tokens' in smoke check 4 of deployment 'q'",
        "fleet.yaml:21:9: error: smoke check 5 of deployment 'q': another check is already "
        "named 't'",
        "fleet.yaml:22:9: error: smoke check 6 of deployment 'q' has no 'name'",
        "fleet.yaml:22:43: error: 'timeout' in smoke check 6 of deployment 'q' must be a "
        "duration",
        "fleet.yaml:23:9: error: smoke check 7 of deployment 'q' asks nothing"})
    EXPECT_NE(l.diags.find(want), std::string::npos) << "want: " << want << "\ngot:\n" << l.diags;
}

TEST(SmokeSchema, SpeedFloorsAndFreshContextLoad) {
  const Loaded l = Load(
      "      - {name: math, chat: \"2+2\", expect: \"4\", min_decode_tps: 40, max_ttft: 3s}\n"
      "      - {name: slow, tools: true, min_decode_tps: 12.5}\n"
      "      - {name: prefill, fresh_context: {tokens: 4000}, max_ttft: 1m, max_tokens: 8}\n"
      "      - name: block\n"
      "        fresh_context:\n"
      "          tokens: 1000\n"
      "        max_ttft: 90s\n"
      "        min_decode_tps: 5\n");
  ASSERT_TRUE(l.ok) << l.diags;
  const std::vector<SmokeCheck>& s = l.manifest.deployments.at("q").smoke;
  ASSERT_EQ(s.size(), 4u);
  EXPECT_DOUBLE_EQ(s[0].min_decode_tps, 40);
  EXPECT_EQ(s[0].max_ttft_s, 3);
  EXPECT_EQ(s[0].fresh_context_tokens, 0);
  EXPECT_DOUBLE_EQ(s[1].min_decode_tps, 12.5);
  EXPECT_EQ(s[1].max_ttft_s, 0);  // not declared: no floor
  EXPECT_EQ(s[2].fresh_context_tokens, 4000);
  EXPECT_EQ(s[2].max_ttft_s, 60);
  EXPECT_EQ(s[2].max_tokens, 8);
  EXPECT_DOUBLE_EQ(s[2].min_decode_tps, 0);
  EXPECT_EQ(s[3].fresh_context_tokens, 1000);
  EXPECT_EQ(s[3].max_ttft_s, 90);
  EXPECT_DOUBLE_EQ(s[3].min_decode_tps, 5);
}

// The lab's clocks (issue 42): a check's prefill rate, else its
// deployment's, and the stall limit once the first token came.
TEST(SmokeSchema, PrefillRateAndStallLoad) {
  const Loaded l = Load(
      "      - {name: needle, needle_tokens: 132000, timeout: 10m, stall: 45s}\n"
      "      - {name: own, chat: \"x\", expect: \"y\", prefill_tps: 150}\n"
      "    health: {prefill_tps: 1000, busy_grace: 10m}\n");
  ASSERT_TRUE(l.ok) << l.diags;
  const DeploymentSpec& d = l.manifest.deployments.at("q");
  EXPECT_EQ(d.health.busy_grace_s, 600);
  EXPECT_DOUBLE_EQ(d.health.prefill_tps, 1000);
  ASSERT_EQ(d.smoke.size(), 2u);
  EXPECT_DOUBLE_EQ(d.smoke[0].prefill_tps, 1000);  // the deployment's
  EXPECT_EQ(d.smoke[0].stall_s, 45);
  EXPECT_DOUBLE_EQ(d.smoke[1].prefill_tps, 150);  // its own wins
  EXPECT_EQ(d.smoke[1].stall_s, 30);              // the default
}

TEST(SmokeSchema, PrefillRateAndStallErrors) {
  const Loaded l = Load(
      "      - {name: a, chat: \"x\", expect: \"y\", prefill_tps: fast}\n"  // 17
      "      - {name: b, chat: \"x\", expect: \"y\", stall: soon}\n"        // 18
      "    health: {prefill_tps: -3, busy_grace: a while}\n");              // 19
  EXPECT_FALSE(l.ok);
  for (const std::string want :
       {"fleet.yaml:17:56: error: 'prefill_tps' in smoke check 1 of deployment 'q' must be a "
        "number of prompt tokens/s above 0",
        "fleet.yaml:18:50: error: 'stall' in smoke check 2 of deployment 'q' must be a duration",
        "fleet.yaml:19:27: error: 'prefill_tps' in deployment 'q' health must be a number of "
        "prompt tokens/s",
        "fleet.yaml:19:43: error: 'busy_grace' in deployment 'q' health must be a duration"})
    EXPECT_NE(l.diags.find(want), std::string::npos) << "want: " << want << "\ngot:\n" << l.diags;
}

TEST(SmokeSchema, SpeedFloorAndFreshContextErrorsNameFileLineColumn) {
  const Loaded l = Load(
      "      - {name: a, chat: \"x\", expect: \"y\", min_decode_tps: 0}\n"                     // 17
      "      - {name: b, chat: \"x\", expect: \"y\", min_decode_tps: fast}\n"                  // 18
      "      - {name: c, chat: \"x\", expect: \"y\", max_ttft: 3 seconds}\n"                   // 19
      "      - {name: d, fresh_context: {tokens: 4000}}\n"                                     // 20
      "      - {name: e, fresh_context: {tokens: 10}, max_ttft: 3s}\n"                         // 21
      "      - {name: f, fresh_context: {tokns: 4000}, max_ttft: 3s}\n"                        // 22
      "      - {name: g, fresh_context: 4000, max_ttft: 3s}\n"                                 // 23
      "      - {name: h, needle_tokens: 4000, fresh_context: {tokens: 4000}, max_ttft: 3s}\n"  // 24
      "      - {name: i, tools: true, min_decode_tps: -3, max_ttft: 0s}\n"                     // 25
      "      - {name: j, tools: true, min_decode_tps: 1e9}\n");                                // 26
  EXPECT_FALSE(l.ok);
  for (const char* want :
       {"fleet.yaml:17:59: error: 'min_decode_tps' in smoke check 1 of deployment 'q' must be a "
        "number of decode tokens/s above 0",
        "fleet.yaml:18:59: error: 'min_decode_tps' in smoke check 2 of deployment 'q' must be a "
        "number",
        "got 'fast'",
        "fleet.yaml:19:53: error: 'max_ttft' in smoke check 3 of deployment 'q' must be a "
        "duration such as 3s",
        "fleet.yaml:20:19: error: smoke check 4 of deployment 'q' has 'fresh_context' but no "
        "'max_ttft'",
        "fleet.yaml:21:43: error: 'tokens' in 'fresh_context' in smoke check 5 of deployment 'q' "
        "10 is out of range 1000-1000000",
        "fleet.yaml:22:35: error: unknown key 'tokns' in 'fresh_context' in smoke check 6 of "
        "deployment 'q'; did you mean 'tokens'?",
        "fleet.yaml:22:19: error: 'fresh_context' in smoke check 6 of deployment 'q' has no "
        "'tokens'",
        "fleet.yaml:23:34: error: 'fresh_context' in smoke check 7 of deployment 'q' must be a map",
        "fleet.yaml:24:9: error: smoke check 8 of deployment 'q' mixes kinds",
        "fleet.yaml:25:48: error: 'min_decode_tps' in smoke check 9 of deployment 'q'",
        "fleet.yaml:25:62: error: 'max_ttft' in smoke check 9 of deployment 'q'",
        "fleet.yaml:26:48: error: 'min_decode_tps' in smoke check 10 of deployment 'q'"})
    EXPECT_NE(l.diags.find(want), std::string::npos) << "want: " << want << "\ngot:\n" << l.diags;
}

TEST(SmokeSchema, NotAList) {
  const Loaded l = Load("      {name: math}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.diags.find("fleet.yaml:17:7: error: 'smoke' in deployment 'q' must be a list"),
            std::string::npos)
      << l.diags;
}

}  // namespace
}  // namespace fleet
