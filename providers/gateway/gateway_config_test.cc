#include "providers/gateway/gateway_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace fleet {
namespace {

GatewayWant Lab() {
  GatewayWant w;
  w.gateway = "lab";
  w.container = GatewayContainerName("lab");
  w.cli = "podman";
  w.image = "gw";
  w.image_ref = "haproxy@sha256:" + std::string(64, 'a');
  w.port = 8000;
  w.routes = {{"qwen3.8", "qwen38", "dgx3", "10.0.0.3", 30000, "/health"},
              {"gpt-oss", "oss", "dgx1", "10.0.0.1", 30001, "/v1/models"},
              {"gpt-oss", "oss", "dgx2", "10.0.0.2", 30001, "/v1/models"}};
  std::sort(w.routes.begin(), w.routes.end());
  SealGatewayWant(&w);
  return w;
}

TEST(GatewayConfig, RoutesAreReadBackFromTheConfig) {
  const GatewayWant w = Lab();
  EXPECT_EQ(ParseConfigRoutes(RenderHaproxyConfig(w)), w.routes);
}

TEST(GatewayConfig, ARouteChangeIsANewConfigButTheSameContainer) {
  GatewayWant a = Lab(), b = Lab();
  b.routes[2].node = "dgx5";
  b.routes[2].host = "10.0.0.5";
  SealGatewayWant(&b);
  EXPECT_NE(a.config, b.config);
  EXPECT_EQ(a.spec, b.spec);
  b.port = 8001;
  SealGatewayWant(&b);
  EXPECT_NE(a.spec, b.spec);
}

TEST(GatewayConfig, TheConfigRoutesEachModelAndAnswersTheListAndUnknownModels) {
  const GatewayWant w = Lab();
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_NE(cfg.find("bind :8000"), std::string::npos);
  EXPECT_NE(cfg.find("hdr x-fleet-config " + w.config), std::string::npos);
  EXPECT_NE(cfg.find("{\"id\":\"gpt-oss\",\"object\":\"model\""), std::string::npos);
  EXPECT_NE(cfg.find("routed: gpt-oss, qwen3.8"), std::string::npos);
  EXPECT_NE(cfg.find("  acl fleet_routed var(txn.model) -m str gpt-oss\n"
                     "  acl fleet_routed var(txn.model) -m str qwen3.8\n"),
            std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("\"type\":\"invalid_request_error\"}}' unless fleet_routed\n"),
            std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("backend model_qwen3.8\n"), std::string::npos);
  EXPECT_NE(cfg.find("use_backend model_gpt-oss if { var(txn.model) -m str gpt-oss }"),
            std::string::npos);
  // Two replicas of one model: one backend, two servers.
  EXPECT_NE(cfg.find("server oss_dgx1 10.0.0.1:30001 check"), std::string::npos);
  EXPECT_NE(cfg.find("server oss_dgx2 10.0.0.2:30001 check"), std::string::npos);
  EXPECT_NE(cfg.find("option httpchk GET /v1/models"), std::string::npos);
  EXPECT_NE(cfg.find("hard-stop-after 60s"), std::string::npos);
}

TEST(GatewayConfig, BackendNamesHoldOnlyWhatHaproxyAccepts) {
  GatewayWant w = Lab();
  w.routes = {{"org/m@v1", "a", "dgx1", "10.0.0.1", 1, "/health"},
              {"org_m_v1", "b", "dgx2", "10.0.0.2", 1, "/health"}};
  SealGatewayWant(&w);
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_NE(cfg.find("backend model_org_m_v1\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("backend model_org_m_v1_1\n"), std::string::npos) << cfg;
}

// Only the OpenAI API reaches a serve (issue 44: the stand-in engine's
// /fault switch was reachable through the gateway): the rule comes before
// the body is read and before any routing.
TEST(GatewayConfig, OnlyTheOpenAiApiIsForwarded) {
  const std::string cfg = RenderHaproxyConfig(Lab());
  const size_t rule = cfg.find(" if !fleet_api || fleet_dot_segment\n");
  ASSERT_NE(rule, std::string::npos) << cfg;
  EXPECT_NE(cfg.find("  acl fleet_api path_reg '^/v1/[A-Za-z0-9._:@+/-]*$'\n"), std::string::npos);
  EXPECT_NE(cfg.find("  acl fleet_dot_segment path_sub /.\n"), std::string::npos);
  EXPECT_NE(cfg.find("{\"error\":{\"code\":\"not_found\",\"message\":\"gateway lab forwards "
                     "only the OpenAI API under /v1/"),
            std::string::npos)
      << cfg;
  EXPECT_LT(cfg.find("if { path /metrics }"), rule);
  EXPECT_GT(cfg.find("wait-for-body"), rule);
  EXPECT_GT(cfg.find("use_backend"), rule);
}

// The writer's own defence: a route the plan should have refused is not
// written at all, in no line (comments included: a newline in a name
// would start a config line of its own).
TEST(GatewayConfig, ARouteThatCouldChangeTheConfigIsNeverWritten) {
  GatewayWant w = Lab();
  const std::vector<GatewayRoute> bad = {
      {"0 } || TRUE #", "evil", "dgx9", "10.0.0.9", 30000, "/health"},
      {"x\nbackend y", "evil2", "dgx9", "10.0.0.9", 30001, "/health"},
      {"fine", "evil3", "dgx9", "10.0.0.9 backup", 30002, "/health"},
      {"fine2", "evil4", "dgx9", "10.0.0.9", 30003, "/health HTTP/1.1\r\nHost: x"},
      {"fine3", "evil 5", "dgx9", "10.0.0.9", 30004, "/health"},
  };
  for (const GatewayRoute& r : bad) {
    EXPECT_NE(GatewayRouteProblem(r), "") << r.model;
    w.routes.push_back(r);
  }
  std::sort(w.routes.begin(), w.routes.end());
  SealGatewayWant(&w);
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_EQ(cfg.find("evil"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("TRUE"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("10.0.0.9"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("fine"), std::string::npos) << cfg;
  EXPECT_EQ(ParseConfigRoutes(cfg), Lab().routes);
  EXPECT_EQ(GatewayRouteProblem(Lab().routes[0]), "");
  EXPECT_EQ(GatewayRouteProblem(bad[0]),
            "the model name '0 } || TRUE #' must be letters, digits and . _ : / @ + -, starting "
            "with a letter, a digit or '/', got a space at byte 1");
  // A name that is not UTF-8 made nlohmann's dump() throw; it is not written.
  w.routes = {{"q\xff", "a", "dgx1", "10.0.0.1", 1, "/health"}};
  EXPECT_NO_THROW(RenderHaproxyConfig(w));
}

TEST(GatewayConfig, NoRoutesAnswer404ToEveryModel) {
  GatewayWant w = Lab();
  w.routes.clear();
  SealGatewayWant(&w);
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_NE(cfg.find("routed: (none)"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("unless"), std::string::npos) << cfg;
  EXPECT_EQ(cfg.find("use_backend"), std::string::npos);
}

TEST(GatewayConfig, TheRoutesDiffSaysWhatMoved) {
  const GatewayWant a = Lab();
  std::vector<GatewayRoute> b = a.routes;
  b.back().node = "dgx5";  // qwen3.8 moves
  EXPECT_EQ(RouteDifferences(a.routes, b),
            (std::vector<std::string>{"- qwen3.8 -> dgx3:30000", "+ qwen3.8 -> dgx5:30000"}));
  EXPECT_TRUE(RouteDifferences(a.routes, a.routes).empty());
}

TEST(GatewayConfig, TheWantSurvivesJson) {
  const GatewayWant w = Lab();
  const GatewayWant back = nlohmann::json(w).get<GatewayWant>();
  EXPECT_EQ(back.routes, w.routes);
  EXPECT_EQ(back.config, w.config);
  EXPECT_EQ(back.spec, w.spec);
}

// alice may use qwen3.8, ops every model.
GatewayWant Keyed() {
  GatewayWant w = Lab();
  w.keyed = true;
  w.keys = KeyGrants({{"alice", "sk-alice-0123456789abcdef", {"qwen3.8"}},
                      {"ops", "sk-ops-0123456789abcdefgh", {"*"}}});
  SealGatewayWant(&w);
  return w;
}

// The buffer holds the largest request of the routed deployments whole
// (`model` comes after `messages`); a larger one gets a 413 naming the
// limit, not a "not routed".
TEST(GatewayConfig, TheBufferFollowsTheLargestMaxRequest) {
  GatewayWant w = Lab();
  EXPECT_EQ(GatewayBufferSize(w), (uint64_t{4} << 20) + (uint64_t{256} << 10));
  w.routes[1].max_request = uint64_t{16} << 20;
  SealGatewayWant(&w);
  EXPECT_NE(Lab().config, w.config);
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_NE(cfg.find("  tune.bufsize 17039360\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("' if { req.hdr_val(content-length) gt 16777216 }\n"), std::string::npos)
      << cfg;
  EXPECT_LT(cfg.find("gt 16777216"), cfg.find("wait-for-body"));
}

// The check of a serve waits its health.request_timeout and drops it after
// health.grace failures.
TEST(GatewayConfig, ChecksFollowTheDeploymentsHealth) {
  GatewayWant w = Lab();
  for (GatewayRoute& r : w.routes)
    if (r.model == "qwen3.8") {
      r.check_timeout_s = 600;
      r.fall = 5;
    }
  SealGatewayWant(&w);
  EXPECT_NE(Lab().config, w.config);
  const std::string cfg = RenderHaproxyConfig(w);
  const size_t qwen = cfg.find("backend model_qwen3.8\n");
  ASSERT_NE(qwen, std::string::npos);
  EXPECT_NE(cfg.find("  timeout check 600s\n", qwen), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("10.0.0.3:30000 check inter 2s fall 5 rise 1\n", qwen), std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("  timeout check 5s\n"), std::string::npos) << cfg;
  EXPECT_NE(cfg.find("10.0.0.1:30001 check inter 2s fall 2 rise 1\n"), std::string::npos) << cfg;
}

TEST(GatewayConfig, AnOpenGatewayAsksForNoKey) {
  const std::string cfg = RenderHaproxyConfig(Lab());
  EXPECT_EQ(cfg.find("http_auth_bearer"), std::string::npos);
  EXPECT_EQ(cfg.find("status 401"), std::string::npos);
  EXPECT_EQ(cfg.find("/metrics/keys"), std::string::npos);
}

// Digests only; the key gate comes before the body is waited for; a key is
// held to its models; each key's requests are counted.
TEST(GatewayConfig, AKeyedGatewayChecksDigestsAndGrants) {
  const GatewayWant w = Keyed();
  const std::string cfg = RenderHaproxyConfig(w);
  EXPECT_EQ(cfg.find("sk-alice"), std::string::npos);
  EXPECT_EQ(cfg.find("sk-ops"), std::string::npos);
  const std::string alice = w.keys[0].digest, ops = w.keys[1].digest;
  EXPECT_NE(cfg.find("set-var(txn.key) http_auth_bearer,sha2(256),hex,lower\n"), std::string::npos);
  EXPECT_NE(cfg.find("  acl fleet_key var(txn.key) -m str " + alice + "\n"), std::string::npos);
  const size_t unauthorized = cfg.find("http-request return status 401");
  ASSERT_NE(unauthorized, std::string::npos);
  EXPECT_NE(cfg.find("\"code\":\"invalid_api_key\"", unauthorized), std::string::npos);
  EXPECT_LT(unauthorized, cfg.find("wait-for-body"));
  EXPECT_NE(cfg.find("  acl fleet_grant var(txn.grant) -m str " + alice + "qwen3.8\n"),
            std::string::npos)
      << cfg;
  EXPECT_NE(cfg.find("  acl fleet_key_all var(txn.key) -m str " + ops + "\n"), std::string::npos);
  EXPECT_NE(cfg.find("unless fleet_grant || fleet_key_all\n"), std::string::npos) << cfg;
  EXPECT_LT(cfg.find("status 403"), cfg.find("use_backend"));
  EXPECT_NE(cfg.find("track-sc0 var(txn.key) table fleet_keys"), std::string::npos);
  EXPECT_NE(cfg.find("key=\\\"alice\\\"} %[str(" + alice + "),table_http_req_cnt(fleet_keys)]"),
            std::string::npos)
      << cfg;
  // alice's list names only her model.
  const size_t her_list = cfg.find("{ var(txn.key) -m str " + alice + " }");
  ASSERT_NE(her_list, std::string::npos);
  const size_t line = cfg.rfind('\n', her_list);
  EXPECT_EQ(cfg.substr(line, her_list - line).find("gpt-oss"), std::string::npos);
  // The keys are part of the config: a new key reloads the gateway.
  EXPECT_NE(w.config, Lab().config);
  GatewayWant fewer = Keyed();
  fewer.keys.pop_back();
  SealGatewayWant(&fewer);
  EXPECT_NE(fewer.config, w.config);
}

TEST(GatewayConfig, KeysSurviveJsonAndStayOutOfAnOpenGatewaysJson) {
  const GatewayWant w = Keyed();
  const GatewayWant back = nlohmann::json(w).get<GatewayWant>();
  EXPECT_TRUE(back.keyed);
  EXPECT_EQ(back.keys, w.keys);
  EXPECT_FALSE(nlohmann::json(Lab()).contains("keys"));
  EXPECT_FALSE(nlohmann::json(Lab()).get<GatewayWant>().keyed);
}

// HAProxy itself accepts what fleet writes (Debian's haproxy, when installed).
TEST(GatewayConfig, HaproxyAcceptsTheConfig) {
  if (std::system("command -v haproxy >/dev/null 2>&1") != 0) GTEST_SKIP() << "no haproxy";
  for (int variant = 0; variant < 5; ++variant) {
    GatewayWant w = variant >= 2 ? Keyed() : Lab();
    if (variant == 1) w.routes.clear();
    if (variant == 3) w.keys.pop_back();  // no key for every model
    if (variant == 4) {
      w.keys.erase(w.keys.begin());                  // only a key for every model
      w.routes[0].max_request = uint64_t{16} << 20;  // a 4M-token context
    }
    SealGatewayWant(&w);
    char path[] = "/tmp/fleet-gw-test-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    close(fd);
    std::ofstream(path) << RenderHaproxyConfig(w);
    const int rc = std::system(("haproxy -c -q -f " + std::string(path)).c_str());
    unlink(path);
    EXPECT_EQ(rc, 0) << RenderHaproxyConfig(w);
  }
}

}  // namespace
}  // namespace fleet

namespace fleet {
namespace {

// issue #46: a model whose serve may sleep gets fleet's wake listener as a
// backup server; the others, and gateways without wake, hash as before.
TEST(GatewayConfig, WakeAddsABackupServerOnlyForModelsThatMaySleep) {
  GatewayWant plain = Lab();
  GatewayWant w = Lab();
  for (GatewayRoute& r : w.routes) r.wakes = r.model == "qwen3.8";
  SealGatewayWant(&w);
  EXPECT_NE(plain.config, w.config);  // the flag is part of the routes
  const std::string no_listener = RenderHaproxyConfig(w);
  EXPECT_EQ(no_listener.find("fleet_wake"), std::string::npos) << no_listener;
  w.wake_listener = "10.0.0.9:9101";
  w.wake_hold_s = 600;
  SealGatewayWant(&w);
  const std::string cfg = RenderHaproxyConfig(w);
  const size_t qwen = cfg.find("backend model_qwen3.8\n");
  ASSERT_NE(qwen, std::string::npos);
  const size_t next = cfg.find("\nbackend ", qwen + 1);
  const std::string backend = cfg.substr(qwen, next == std::string::npos ? next : next - qwen);
  EXPECT_NE(backend.find("  server fleet_wake 10.0.0.9:9101 backup\n"), std::string::npos)
      << backend;
  EXPECT_NE(backend.find("  timeout server 1800s\n"), std::string::npos) << backend;
  const size_t oss = cfg.find("backend model_gpt-oss\n");
  ASSERT_NE(oss, std::string::npos);
  EXPECT_EQ(cfg.substr(oss, cfg.find("\n\n", oss) - oss).find("fleet_wake"), std::string::npos);
  // The want's JSON keeps the flag and the listener; a plain want has neither.
  const nlohmann::json j = w;
  EXPECT_EQ(j["wake"]["listener"], "10.0.0.9:9101");
  EXPECT_EQ(j.get<GatewayWant>().routes, w.routes);
  EXPECT_EQ(j.get<GatewayWant>().wake_hold_s, 600);
  const nlohmann::json p = plain;
  EXPECT_FALSE(p.contains("wake"));
  EXPECT_EQ(p.dump().find("wakes"), std::string::npos);
  // A hold over 29 minutes lengthens the backend's server timeout.
  w.wake_hold_s = 3600;
  EXPECT_NE(RenderHaproxyConfig(w).find("  timeout server 3660s\n"), std::string::npos);
}

}  // namespace
}  // namespace fleet
