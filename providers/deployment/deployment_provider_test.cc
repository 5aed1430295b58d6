// Unit tests of the deployment provider's pure parts: the container spec
// rendered from a recipe, the probe (run through /bin/sh against a stand-in
// container CLI), and the diff's decisions.
#include "providers/deployment/deployment_provider.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>

#include "providers/shared/engine_api_test_util.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "providers/shared/serving/container_probe_sh.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/remove_container_sh.h"
#include "providers/shared/serving/serve_health.h"
#include "state/state.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

const std::string kRef = "127.0.0.1:5000/team/vllm@sha256:" + std::string(64, 'd');
const std::string kRev = std::string(40, 'a');

Manifest TestManifest() {
  Manifest m;
  NodeSpec n;
  n.name = "dgx5";
  n.address = "dgx5.lan";
  n.container_cli = "podman";
  m.nodes["dgx5"] = n;
  ImageSpec img;
  img.name = "b12x";
  img.ref = kRef;
  m.images["b12x"] = img;
  ModelSpec model;
  model.name = "qwen";
  model.repo = "org/Qwen";
  model.revision = kRev;
  model.store = "local";
  m.models["qwen"] = model;
  DeploymentSpec d;
  d.name = "qwen";
  d.nodes = {"dgx5"};
  d.image = "b12x";
  d.model = "qwen";
  d.port = 30000;
  d.health.path = "/v1/models";
  d.health.timeout_s = 600;
  d.recipe.model = "{model_path}";
  d.recipe.args = {"--port", "{port}", "--host", "{host}", "--served-model-name", "q-{node}"};
  d.recipe.env = {{"VLLM_USE_V1", "1"}, {"HF_TOKEN", "hf_abcdefghijklmnopqrstuvwxyz012345"}};
  d.recipe.devices = {"nvidia.com/gpu=all"};
  d.recipe.memory_limit = "9g";
  d.recipe.cpus = "6";
  d.recipe.shm_size = "16g";
  d.recipe.extra_mounts = {{"{model_path}/config.json", "/cfg/config.json", true},
                           {"~/mods", "/mods", false}};
  m.deployments["qwen"] = d;
  return m;
}

TEST(DeploymentSpecTest, RendersRecipeIntoRunOptionsAndCommand) {
  Result<ContainerSpec> s = RenderContainerSpec(TestManifest(), "qwen", "dgx5");
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->container, "fleet-qwen");
  EXPECT_EQ(s->cli, "podman");
  EXPECT_EQ(s->command, (std::vector<std::string>{"/model", "--port", "30000", "--host", "dgx5.lan",
                                                  "--served-model-name", "q-dgx5"}));
  EXPECT_EQ(s->options,
            (std::vector<std::string>{
                "--network=host", "--device", "nvidia.com/gpu=all", "--memory=9g",
                "--memory-swap=9g", "--cpus=6", "--shm-size=16g", "--volume",
                "{model_path}/config.json:/cfg/config.json:ro", "--volume", "~/mods:/mods"}));
  EXPECT_EQ(s->env.at("VLLM_USE_V1"), "1");
  EXPECT_EQ(s->hash.size(), 64u);
  // --host {host} binds the node's address: health is read there.
  EXPECT_EQ(s->HealthUrl(), "http://dgx5.lan:30000/v1/models");
  Manifest any = TestManifest();
  any.deployments["qwen"].recipe.args = {"--host=0.0.0.0", "--port", "{port}"};
  EXPECT_EQ(RenderContainerSpec(any, "qwen", "dgx5")->HealthUrl(),
            "http://127.0.0.1:30000/v1/models");
  any.deployments["qwen"].recipe.args = {"--host", "fd00::5"};
  EXPECT_EQ(RenderContainerSpec(any, "qwen", "dgx5")->HealthUrl(),
            "http://[fd00::5]:30000/v1/models");
}

TEST(DeploymentSpecTest, AMountOfTheSnapshotFolderBecomesTheModelRoot) {
  Manifest m = TestManifest();
  m.deployments["qwen"].recipe.extra_mounts = {{"{model_path}", "/workspace/model", true}};
  Result<ContainerSpec> s = RenderContainerSpec(m, "qwen", "dgx5");
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->model_root, "/workspace/model");
  EXPECT_EQ(s->command[0], "/workspace/model");  // {model_path} as the container sees it
  for (const std::string& o : s->options)
    EXPECT_EQ(o.find("model_path"), std::string::npos) << o;  // no folder mount left
}

TEST(DeploymentSpecTest, HashFollowsWhatRunsAndNothingElse) {
  Manifest m = TestManifest();
  const std::string h = RenderContainerSpec(m, "qwen", "dgx5")->hash;
  EXPECT_EQ(RenderContainerSpec(m, "qwen", "dgx5")->hash, h);
  m.deployments["qwen"].health.timeout_s = 60;  // how long to wait is not what runs
  EXPECT_EQ(RenderContainerSpec(m, "qwen", "dgx5")->hash, h);
  m.deployments["qwen"].health.path = "/health";  // nor where health is read
  EXPECT_EQ(RenderContainerSpec(m, "qwen", "dgx5")->hash, h);
  Manifest cache = TestManifest();  // the model bound from elsewhere is another container
  cache.nodes["dgx5"].hf_cache = "/mnt/other/hub";
  EXPECT_NE(RenderContainerSpec(cache, "qwen", "dgx5")->hash, h);
  Manifest args = TestManifest();
  args.deployments["qwen"].recipe.args.push_back("--enforce-eager");
  EXPECT_NE(RenderContainerSpec(args, "qwen", "dgx5")->hash, h);
  Manifest secret = TestManifest();
  secret.deployments["qwen"].recipe.env["HF_TOKEN"] = "hf_zyxwvutsrqponmlkjihgfedcba987654";
  EXPECT_NE(RenderContainerSpec(secret, "qwen", "dgx5")->hash, h);
  Manifest rev = TestManifest();
  rev.models["qwen"].revision = std::string(40, 'b');
  EXPECT_NE(RenderContainerSpec(rev, "qwen", "dgx5")->hash, h);
}

TEST(DeploymentSpecTest, PlanJsonHidesSecretsAndDiffsSayWhatChanged) {
  Manifest m = TestManifest();
  nlohmann::json before = RenderContainerSpec(m, "qwen", "dgx5")->ToPlanJson();
  EXPECT_EQ(before["env"]["HF_TOKEN"], "(sensitive)");
  EXPECT_EQ(before["env"]["VLLM_USE_V1"], "1");
  EXPECT_EQ(before.dump().find("hf_abcdef"), std::string::npos);
  EXPECT_EQ(before["health"], "http://dgx5.lan:30000/v1/models");

  m.images["b12x"].ref = "127.0.0.1:5000/team/vllm@sha256:" + std::string(64, 'e');
  m.deployments["qwen"].recipe.env["VLLM_USE_V1"] = "0";
  nlohmann::json after = RenderContainerSpec(m, "qwen", "dgx5")->ToPlanJson();
  std::vector<std::string> d = SpecDifferences(before, after);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0], "image: " + kRef + " -> 127.0.0.1:5000/team/vllm@sha256:" + std::string(64, 'e'));
  EXPECT_EQ(d[1], "env changed (VLLM_USE_V1)");

  Manifest secret = TestManifest();
  secret.deployments["qwen"].recipe.env["HF_TOKEN"] = "hf_zyxwvutsrqponmlkjihgfedcba987654";
  d = SpecDifferences(before, RenderContainerSpec(secret, "qwen", "dgx5")->ToPlanJson());
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0], "spec changed (a value not shown, e.g. a sensitive env value)");
}

TEST(DeploymentSpecTest, PlanJsonHidesSecretArguments) {
  Manifest m = TestManifest();
  m.deployments["qwen"].recipe.args = {"--api-key",      "s3cr3t-value",
                                       "--hf-token=abc", "sk-abcdefghijklmnopqrstuvwx",
                                       "--port",         "{port}"};
  nlohmann::json plan = RenderContainerSpec(m, "qwen", "dgx5")->ToPlanJson();
  EXPECT_EQ(plan["command"],
            nlohmann::json({"/model", "--api-key", "(sensitive)", "--hf-token=(sensitive)",
                            "(sensitive)", "--port", "30000"}));
  EXPECT_EQ(plan.dump().find("s3cr3t"), std::string::npos);
}

TEST(DeploymentSpecTest, EnvFromTheControllerShowsOnlyTheVariablesName) {
  Manifest m = TestManifest();
  m.deployments["qwen"].recipe.env.erase("HF_TOKEN");
  m.deployments["qwen"].recipe.env_from["HF_TOKEN"] = "FLEET_UNIT_TEST_TOKEN";
  nlohmann::json plan = RenderContainerSpec(m, "qwen", "dgx5")->ToPlanJson();
  EXPECT_EQ(plan["env"]["HF_TOKEN"], "(from $FLEET_UNIT_TEST_TOKEN on the controller)");
  const std::string h = plan["spec"];
  setenv("FLEET_UNIT_TEST_TOKEN", "hf_one", 1);
  EXPECT_EQ(RenderContainerSpec(m, "qwen", "dgx5")->hash, h);  // the value is not hashed
  unsetenv("FLEET_UNIT_TEST_TOKEN");
}

TEST(DeploymentSpecTest, SeveralNodesGetRanksAndOnlyTheHeadIsHealthChecked) {
  Manifest m = TestManifest();
  NodeSpec n6 = m.nodes["dgx5"];
  n6.name = "dgx6";
  n6.address = "dgx6.lan";
  m.nodes["dgx6"] = n6;
  m.deployments["qwen"].nodes = {"dgx6", "dgx5"};
  m.deployments["qwen"].recipe.args = {"--nnodes", "{nnodes}",         "--node-rank",
                                       "{rank}",   "--dist-init-addr", "{head}:5000"};
  Result<ContainerSpec> head = RenderContainerSpec(m, "qwen", "dgx6");
  Result<ContainerSpec> worker = RenderContainerSpec(m, "qwen", "dgx5");
  ASSERT_TRUE(head.ok() && worker.ok());
  EXPECT_EQ(head->command, (std::vector<std::string>{"/model", "--nnodes", "2", "--node-rank", "0",
                                                     "--dist-init-addr", "dgx6.lan:5000"}));
  EXPECT_EQ(worker->command, (std::vector<std::string>{"/model", "--nnodes", "2", "--node-rank",
                                                       "1", "--dist-init-addr", "dgx6.lan:5000"}));
  EXPECT_EQ(head->HealthUrl(), "http://127.0.0.1:30000/v1/models");
  EXPECT_EQ(worker->HealthUrl(), "");
  EXPECT_EQ(worker->ToPlanJson()["rank"], "1 of 2");
  EXPECT_TRUE(RenderContainerSpec(TestManifest(), "qwen", "dgx5")->ToPlanJson()["rank"].is_null());
  DeploymentProvider p;
  for (const DesiredResource& r : p.Expand(m))
    if (r.address == "deployment.qwen@dgx6")
      EXPECT_EQ(r.depends_on.back(), "deployment.qwen@dgx5");  // the head waits for its worker
  // A worker's probe asks no health and no port.
  const std::string probe = ContainerProbeScript(*worker);
  EXPECT_EQ(probe.find("curl"), std::string::npos);
  EXPECT_EQ(probe.find("/proc/net/tcp"), std::string::npos);
}

TEST(DeploymentSpecTest, ReplicasOnSeveralNodesAreEachTheirOwnHead) {
  Manifest m = TestManifest();
  NodeSpec n6 = m.nodes["dgx5"];
  n6.name = "dgx6";
  m.nodes["dgx6"] = n6;
  m.deployments["qwen"].nodes = {"dgx6", "dgx5"};  // no {rank}/{nnodes}/{head}: replicas
  Result<ContainerSpec> second = RenderContainerSpec(m, "qwen", "dgx5");
  EXPECT_EQ(second->rank, 0);
  EXPECT_EQ(second->HealthUrl(), "http://dgx5.lan:30000/v1/models");
  const std::string h = second->hash;
  m.deployments["qwen"].nodes = {"dgx5"};  // one replica fewer restarts nothing
  EXPECT_EQ(RenderContainerSpec(m, "qwen", "dgx5")->hash, h);
}

TEST(DeploymentSpecTest, RedactMasksEverySecretValueInLogLines) {
  Manifest m = TestManifest();
  m.deployments["qwen"].recipe.args = {"--api-key", "s3cr3t-value"};
  m.deployments["qwen"].recipe.env_from["PASS"] = "FLEET_UNIT_TEST_PASS";
  setenv("FLEET_UNIT_TEST_PASS", "pa55word-from-env", 1);
  Result<ContainerSpec> s = RenderContainerSpec(m, "qwen", "dgx5");
  const std::string log =
      "server_args=ServerArgs(api_key='s3cr3t-value', hf='hf_abcdefghijklmnopqrstuvwxyz012345')\n"
      "login with pa55word-from-env failed\n";
  EXPECT_EQ(Redact(log, SecretValues(*s)),
            "server_args=ServerArgs(api_key='(sensitive)', hf='(sensitive)')\n"
            "login with (sensitive) failed\n");
  unsetenv("FLEET_UNIT_TEST_PASS");
}

TEST(DeploymentSpecTest, FillPlaceholdersKeepsUnknownAndJson) {
  EXPECT_EQ(FillPlaceholders("{port}/{x}/{\"a\":1}", {{"port", "1"}}), "1/{x}/{\"a\":1}");
  EXPECT_EQ(FillPlaceholders("{port", {{"port", "1"}}), "{port");
}

// Runs the probe fragment with a stand-in `podman` on PATH that prints what
// a real one prints, and a stand-in curl.
class ProbeScriptTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(dir_, ""); }
  void Tool(const std::string& name, const std::string& body) { stub_.Tool(name, body); }
  std::string Run(const std::string& script, const std::string& env = "") {
    return stub_.Run(script, env).out;
  }
  const testing_support::StubCli stub_{"fleet-deploy-probe"};
  const std::string dir_ = stub_.dir();
};

ContainerSpec ProbeSpec() {
  ContainerSpec s;
  s.cli = "podman";
  s.container = "fleet-qwen";
  s.port = 30000;
  s.health_path = "/v1/models";
  return s;
}

// What both ways of reading the container give for the running abc123
// labelled "feed", started 95 s ago.
void ExpectRunningFor95s(const ContainerProbe& p) {
  EXPECT_TRUE(p.exists);
  EXPECT_EQ(p.state, "running");
  EXPECT_EQ(p.spec, "feed");
  EXPECT_EQ(p.id, "abc123");
  EXPECT_GE(p.age_s, 95);
  EXPECT_LE(p.age_s, 100);
}

TEST_F(ProbeScriptTest, RunningContainerWithHealth) {
  Tool("podman", "echo \"$@\" > " + dir_ +
                     "/podman.args\n"
                     "printf 'state=running\\nexit_code=0\\nstarted=%s\\nid=abc123\\nspec=feed\\n' "
                     "$(($(date +%s) - 95))\n");
  Tool("curl", "echo \"$@\" > " + dir_ + "/curl.args; printf 503\n");
  ContainerProbe p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec())));
  ExpectRunningFor95s(p);
  EXPECT_EQ(p.health, 503);
  EXPECT_EQ(p.health_tool, "curl");
  EXPECT_FALSE(p.Healthy());
  std::ifstream args(dir_ + "/curl.args");
  std::string a((std::istreambuf_iterator<char>(args)), {});
  EXPECT_NE(a.find("http://127.0.0.1:30000/v1/models"), std::string::npos);
}

// Where the engine's API answers (podman's service here), fleet's installed
// probe reads the container's inspect from it: not one CLI start, and the
// fields the CLI gives (podman's image ID without "sha256:").
TEST_F(ProbeScriptTest, InspectThroughTheEnginesApi) {
  ASSERT_TRUE(testing_engine::InstallBuiltProbe(dir_)) << "run by meson, which sets FLEET_PROBE";
  Tool("podman", "echo \"$@\" >> " + dir_ + "/podman.args\nexit 125\n");
  Tool("curl", "printf 200\n");
  const std::time_t t = std::time(nullptr) - 95;
  char started[64];
  std::strftime(started, sizeof started, "%Y-%m-%dT%H:%M:%S.010340068Z", std::gmtime(&t));
  const std::string env = "HOME=" + dir_ + " XDG_RUNTIME_DIR=" + dir_ + "/xdg";
  const std::string sock = dir_ + "/xdg/podman/podman.sock";
  ContainerProbe p;
  {
    testing_engine::FakeEngineApi engine(
        sock, {{"/containers/fleet-qwen/json",
                {"200 OK", std::string(R"({"Id":"abc123","Image":"sha256:feedface","State":{)") +
                               R"("Status":"running","ExitCode":0,"StartedAt":")" + started +
                               R"("},"Config":{"Labels":{"fleet.spec":"feed"}}})"}}});
    ASSERT_TRUE(engine.ok());
    p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec()), env));
    EXPECT_EQ(engine.requests(), 1);
  }
  ExpectRunningFor95s(p);
  EXPECT_EQ(p.image, "feedface");
  EXPECT_EQ(p.health, 200);
  EXPECT_EQ(p.error, "");
  EXPECT_NE(access((dir_ + "/podman.args").c_str(), F_OK), 0);  // no CLI start

  // No such container (404): absent, and the API lists the serves that
  // hold the node (docker's names start with '/').
  {
    testing_engine::FakeEngineApi engine(
        sock, {{"/containers/json?filters=", {"200 OK", R"([{"Names":["/fleet-old"]}])"}}});
    ASSERT_TRUE(engine.ok());
    p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec()), env));
  }
  EXPECT_FALSE(p.exists);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.health, -1);
  EXPECT_EQ(p.serving, std::vector<std::string>{"fleet-old"});
  EXPECT_NE(access((dir_ + "/podman.args").c_str(), F_OK), 0);  // no CLI start
  // An API that does not list them: the CLI does.
  {
    testing_engine::FakeEngineApi engine(sock, {});
    ASSERT_TRUE(engine.ok());
    p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec()), env));
  }
  EXPECT_FALSE(p.exists);
  std::ifstream args(dir_ + "/podman.args");
  const std::string a((std::istreambuf_iterator<char>(args)), {});
  EXPECT_EQ(a.find("inspect"), std::string::npos) << a;
  EXPECT_NE(a.find("ps --filter"), std::string::npos) << a;
}

// Whatever the API answers, the parse never throws: a field of another
// type reads as absent, an answer that is no container is an error.
TEST(ParseContainerProbe, OddApiAnswers) {
  ContainerProbe p = ParseContainerProbe(
      "inspect_cli=docker\ninspect_api={\"State\":{\"Status\":\"exited\",\"ExitCode\":\"x\"},"
      "\"Config\":{\"Labels\":null},\"Image\":7}\n@api=200\nnow=5\n");
  EXPECT_TRUE(p.exists);
  EXPECT_EQ(p.state, "exited");
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.image, "");
  EXPECT_EQ(p.spec, "");
  EXPECT_EQ(p.age_s, -1);
  p = ParseContainerProbe("inspect_cli=podman\ninspect_api=[1,2\n@api=200\nnow=5\n");
  EXPECT_FALSE(p.exists);
  EXPECT_NE(p.error.find("no container"), std::string::npos) << p.error;
}

TEST_F(ProbeScriptTest, AbsentContainerAndNoCli) {
  Tool("podman", "echo 'Error: no such container fleet-qwen' >&2; exit 125\n");
  ContainerProbe p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec())));
  EXPECT_TRUE(p.cli_found);
  EXPECT_FALSE(p.exists);
  EXPECT_EQ(p.error, "");
  EXPECT_EQ(p.health, -1);  // not asked

  Tool("podman", "echo 'Error: cannot connect to storage' >&2; exit 125\n");
  p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec())));
  EXPECT_FALSE(p.exists);
  EXPECT_NE(p.error.find("cannot connect to storage"), std::string::npos);

  ContainerSpec docker = ProbeSpec();
  docker.cli = "no-such-cli";
  p = ParseContainerProbe(Run(ContainerProbeScript(docker)));
  EXPECT_FALSE(p.cli_found);
}

TEST_F(ProbeScriptTest, PortBusyReadsIpv4AndIpv6AndToleratesNoIpv6) {
  // A stand-in cat for /proc/net: `listen` lines in tcp, and tcp6 missing
  // (IPv6 off), as cat says it: an error on stderr, exit 1.
  auto net = [&](const std::string& tcp) {
    Tool("cat",
         "for f; do case $f in *tcp6) echo \"cat: $f: No such file or directory\" >&2; "
         "rc=1 ;; *tcp) printf '  sl  local_address rem_address   st\\n" +
             tcp + "' ;; esac; done; exit ${rc:-0}\n");
  };
  net("   0: 0100007F:7530 00000000:0000 0A\\n");  // 0x7530 = 30000, listening
  EXPECT_EQ(Run(PortBusyCommand(30000)), "port_busy=1\n");
  EXPECT_EQ(Run(PortBusyCommand(30001)), "port_busy=0\n");
  net("   0: 0100007F:7530 0100007F:D431 01\\n");  // a connection from it is no listener
  EXPECT_EQ(Run(PortBusyCommand(30000)), "port_busy=0\n");
}

TEST(ContainerProbeScript, SpellsTheNoSuchContainerPatternAsTheHeader) {
  // container_probe.sh and remove_container.sh write the pattern out (a
  // case pattern with | cannot come from a variable).
  const std::string script(kContainerProbeScript, kContainerProbeScriptSize);
  EXPECT_NE(script.find(std::string(kNoSuchContainerPattern) + ")"), std::string::npos);
  const std::string remove(kRemoveContainerScript, kRemoveContainerScriptSize);
  EXPECT_NE(remove.find(std::string(kNoSuchContainerPattern) + ")"), std::string::npos);
}

// remove_container.sh on its own: a container there is stopped and
// removed; one that is not (docker's and podman's words) is no error; an
// engine that cannot say is, with its words.
TEST_F(ProbeScriptTest, RemoveContainerStopsRemovesAndTellsAbsentFromBroken) {
  Tool("docker",
       "echo \"$*\" >> " + dir_ + "/docker.args\n" +
           "[ \"$1\" = container ] || exit 0\n"
           "case $3 in\n"
           "there) echo '[{}]' ;;\n"
           "gone) echo 'Error: No such container: gone' >&2; exit 1 ;;\n"
           "old) echo 'Error: inspecting object: no such container old' >&2; exit 125 ;;\n"
           "*) echo 'Cannot connect to the Docker daemon' >&2; exit 1 ;;\n"
           "esac\n");
  auto calls = [&] {
    std::ifstream in(dir_ + "/docker.args");
    std::string a((std::istreambuf_iterator<char>(in)), {});
    std::remove((dir_ + "/docker.args").c_str());
    return a;
  };
  EXPECT_EQ(stub_.Run(RemoveContainerScript("docker", "there")).exit_code, 0);
  EXPECT_EQ(calls(), "container inspect there\nstop -t 30 there\nrm -f there\n");
  EXPECT_EQ(stub_.Run(RemoveContainerScript("docker", "gone")).exit_code, 0);
  EXPECT_EQ(stub_.Run(RemoveContainerScript("docker", "old")).exit_code, 0);
  EXPECT_EQ(calls(), "container inspect gone\ncontainer inspect old\n");
  EXPECT_EQ(stub_.Run(RemoveContainerScript("docker", "x; rm -rf /")).exit_code, 1);
  EXPECT_EQ(calls(), "container inspect x; rm -rf /\n");
}

// swap_container.sh: aside stops before it renames, and renames nothing
// when the stop fails; back renames, then starts.
TEST_F(ProbeScriptTest, SwapContainerAsideAndBack) {
  Tool("podman", "echo \"$*\" >> " + dir_ + "/podman.args\n[ \"$1 $4\" != 'stop stuck' ]\n");
  auto calls = [&] {
    std::ifstream in(dir_ + "/podman.args");
    std::string a((std::istreambuf_iterator<char>(in)), {});
    std::remove((dir_ + "/podman.args").c_str());
    return a;
  };
  EXPECT_EQ(stub_.Run(SwapContainerScript("podman", SwapWay::kAside, "fleet-q", "fleet-q-previous"))
                .exit_code,
            0);
  EXPECT_EQ(calls(), "stop -t 30 fleet-q\nrename fleet-q fleet-q-previous\n");
  EXPECT_NE(stub_.Run(SwapContainerScript("podman", SwapWay::kAside, "stuck", "stuck-previous"))
                .exit_code,
            0);
  EXPECT_EQ(calls(), "stop -t 30 stuck\n");
  EXPECT_EQ(stub_.Run(SwapContainerScript("podman", SwapWay::kBack, "fleet-q-previous", "fleet-q"))
                .exit_code,
            0);
  EXPECT_EQ(calls(), "rename fleet-q-previous fleet-q\nstart fleet-q\n");
}

TEST_F(ProbeScriptTest, ABusyPortListsTheServingContainers) {
  Tool("podman",
       "case $1 in container) echo 'Error: no such container fleet-qwen' >&2; exit 125 ;;\n"
       "ps) echo \"$@\" > " +
           dir_ + "/ps.args; echo serving=fleet-old ;; esac\n");
  Tool("cat",
       "printf '  sl  local_address rem_address   st\\n   0: 0100007F:7530 00000000:0000 0A\\n'\n");
  ContainerProbe p = ParseContainerProbe(Run(ContainerProbeScript(ProbeSpec())));
  EXPECT_FALSE(p.exists);
  EXPECT_TRUE(p.port_busy);
  EXPECT_EQ(p.serving, std::vector<std::string>{"fleet-old"});
  std::ifstream args(dir_ + "/ps.args");
  std::string a((std::istreambuf_iterator<char>(args)), {});
  EXPECT_EQ(a, "ps --filter label=fleet.deployment --format serving={{.Names}}\n");
}

TEST(ProbeParseTest, DockerTimesAndWget) {
  ContainerProbe p = ParseContainerProbe(
      "state=exited\nexit_code=137\nstarted=2026-11-29T20:00:00.123456Z\nid=x\nspec=\n"
      "now=1795982460\n");
  EXPECT_EQ(p.state, "exited");
  EXPECT_EQ(p.exit_code, 137);
  EXPECT_EQ(p.age_s, 60);
  p = ParseContainerProbe("state=running\nhealth=200 health_tool=wget\n");
  EXPECT_TRUE(p.Healthy());
  EXPECT_EQ(p.health_tool, "wget");
  p = ParseContainerProbe("state=running\nhealth=none\n");
  EXPECT_EQ(p.health, -1);
  EXPECT_EQ(ContainerProbe::FromJson(p.ToJson()).ToJson(), p.ToJson());
}

// Found auditing the parsers for exceptions (fuzz/): a `now=` or `started=` that is not
// a number (or does not fit a long) made std::stol throw out of the parser,
// which ended `fleet plan`. The age is unknown instead.
TEST(ProbeParseTest, TimesThatAreNotNumbersLeaveTheAgeUnknown) {
  for (const char* text : {"state=running\nstarted=1795982400\nnow=later\n",
                           "state=running\nstarted=1795982400\nnow=99999999999999999999999\n",
                           "state=running\nstarted=99999999999999999999999\nnow=1795982460\n",
                           "state=running\nstarted=1\nnow=-9223372036854775808\n"}) {
    ContainerProbe p;
    ASSERT_NO_THROW(p = ParseContainerProbe(text)) << text;
    EXPECT_EQ(p.state, "running");
    EXPECT_EQ(p.age_s, -1) << text;
  }
}

// The diff, from probe facts to a decision.
class DiffTest : public ::testing::Test {
 protected:
  DiffTest() : m_(TestManifest()), p_() {
    desired_ = p_.Expand(m_).at(0);
    facts_["dgx5"].reachable = true;
  }
  PlanChange Diff(const ContainerProbe& probe, const ResourceRecord* rec = nullptr,
                  const std::vector<PlanChange>* planned = nullptr) {
    ActualResource a;
    a.probed = true;
    a.exists = probe.exists;
    a.attributes = probe.ToJson();
    DiffContext ctx{facts_["dgx5"], &facts_, nullptr, &m_, false, planned};
    return p_.Diff(desired_, a, rec, ctx);
  }
  ContainerProbe Running(int health, long age = 30) {
    ContainerProbe p;
    p.exists = true;
    p.state = "running";
    p.spec = desired_.attributes["spec"];
    p.health = health;
    p.health_tool = "curl";
    p.age_s = age;
    return p;
  }
  Manifest m_;
  DeploymentProvider p_;
  DesiredResource desired_;
  std::map<std::string, NodeFacts> facts_;
};

TEST_F(DiffTest, ExpandDependsOnEverythingItRuns) {
  EXPECT_EQ(desired_.address, "deployment.qwen@dgx5");
  EXPECT_EQ(desired_.depends_on, (std::vector<std::string>{"node.dgx5", "display_ram.dgx5",
                                                           "image.b12x@dgx5", "model.qwen@dgx5"}));
}

TEST_F(DiffTest, AbsentIsCreatedUnlessThePortIsTaken) {
  ContainerProbe absent;
  PlanChange c = Diff(absent);
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.error, "");
  absent.port_busy = true;
  c = Diff(absent);
  EXPECT_NE(c.error.find("port 30000 on dgx5 is already in use"), std::string::npos);
}

TEST_F(DiffTest, HealthyIsNoopAndStartingIsANote) {
  EXPECT_EQ(Diff(Running(200)).action, Action::kNoop);
  EXPECT_TRUE(Diff(Running(200)).reasons.empty());
  PlanChange c = Diff(Running(0, 120));
  EXPECT_EQ(c.action, Action::kNoop);
  ASSERT_EQ(c.reasons.size(), 1u);
  EXPECT_EQ(c.reasons[0],
            "starting: http://dgx5.lan:30000/v1/models does not answer after 2 min "
            "(health.timeout 10 min)");
  c = Diff(Running(503, 601));
  EXPECT_EQ(c.action, Action::kReplace);
  EXPECT_NE(c.reasons[0].find("answers 503 and it has run 10 min"), std::string::npos);
}

TEST_F(DiffTest, StoppedIsStartedAndAReloadRestartsIt) {
  ContainerProbe stopped = Running(-1);
  stopped.state = "exited";
  stopped.exit_code = 137;
  PlanChange c = Diff(stopped);
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.reasons[0], "container is exited (exit code 137)");

  std::vector<PlanChange> planned(1);
  planned[0].address = "display_ram.dgx5";
  planned[0].action = Action::kUpdate;
  planned[0].detail["stop_containers"] = {"fleet-qwen"};
  c = Diff(Running(200), nullptr, &planned);
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_NE(c.reasons[0].find("display_ram.dgx5 stops it"), std::string::npos);
}

TEST_F(DiffTest, AnotherSpecIsReplacedWithTheRecordedDifferences) {
  Manifest old = TestManifest();
  old.deployments["qwen"].port = 30001;
  ResourceRecord rec;
  rec.address = desired_.address;
  rec.attributes = RenderContainerSpec(old, "qwen", "dgx5")->ToPlanJson();
  ContainerProbe p = Running(200);
  p.spec = rec.attributes["spec"];
  PlanChange c = Diff(p, &rec);
  EXPECT_EQ(c.action, Action::kReplace);
  ASSERT_GE(c.reasons.size(), 1u);
  EXPECT_EQ(c.reasons[0], "port: 30001 -> 30000");

  p.spec = "0123456789abcdef";  // started by someone else's fleet: no record to compare
  c = Diff(p);
  EXPECT_EQ(c.action, Action::kReplace);
  EXPECT_NE(c.reasons[0].find("runs spec 0123456789ab, not the declared"), std::string::npos);
}

TEST_F(DiffTest, DestroyAndOrphansStopTheServe) {
  ActualResource a;
  a.probed = true;
  a.exists = true;
  a.attributes = Running(200).ToJson();
  DiffContext ctx{facts_["dgx5"], &facts_, nullptr, &m_};
  EXPECT_EQ(p_.DiffDestroy(desired_, a, nullptr, ctx).action, Action::kDelete);
  a.exists = false;
  EXPECT_EQ(p_.DiffDestroy(desired_, a, nullptr, ctx).action, Action::kNoop);

  ResourceRecord rec;
  rec.address = "deployment.old@dgx5";
  rec.type = "deployment";
  rec.node = "dgx5";
  rec.attributes = {{"container", "fleet-old"}, {"cli", "podman"}};
  PlanChange c = p_.DiffOrphan(rec, ctx);
  EXPECT_EQ(c.action, Action::kDelete);
  EXPECT_EQ(c.detail["container"], "fleet-old");
}

TEST_F(DiffTest, AnUnsetFromEnvVariableIsAPlanError) {
  m_.deployments["qwen"].recipe.env_from["HF_TOKEN"] = "FLEET_UNIT_TEST_UNSET";
  desired_ = p_.Expand(m_).at(0);
  unsetenv("FLEET_UNIT_TEST_UNSET");
  EXPECT_EQ(Diff(ContainerProbe()).error,
            "deployment.qwen@dgx5: env HF_TOKEN comes from $FLEET_UNIT_TEST_UNSET on the "
            "controller (from_env), which is not set");
  setenv("FLEET_UNIT_TEST_UNSET", "x", 1);
  EXPECT_EQ(Diff(ContainerProbe()).error, "");
  unsetenv("FLEET_UNIT_TEST_UNSET");
}

TEST_F(DiffTest, ARunningWorkerIsHealthy) {
  desired_.attributes["health"] = "";  // rank > 0
  EXPECT_EQ(Diff(Running(-1)).action, Action::kNoop);
  EXPECT_EQ(Diff(Running(-1)).error, "");
  EXPECT_TRUE(Diff(Running(-1)).reasons.empty());
}

TEST_F(DiffTest, AnUnsetFromEnvVariableDoesNotStopARunningServesPlan) {
  m_.deployments["qwen"].recipe.env_from["HF_TOKEN"] = "FLEET_UNIT_TEST_UNSET";
  desired_ = p_.Expand(m_).at(0);
  unsetenv("FLEET_UNIT_TEST_UNSET");
  EXPECT_EQ(Diff(Running(200)).error, "");
  EXPECT_EQ(Diff(Running(200)).action, Action::kNoop);
}

TEST_F(DiffTest, AnOrphanOnANodeTheManifestsDroppedIsForgotten) {
  ResourceRecord rec;
  rec.address = "deployment.old@dgx9";
  rec.type = "deployment";
  rec.node = "dgx9";
  rec.attributes = {{"container", "fleet-old"}, {"cli", "podman"}};
  DiffContext ctx{facts_["dgx5"], &facts_, nullptr, &m_};
  PlanChange c = p_.DiffOrphan(rec, ctx);
  EXPECT_TRUE(c.detail.value("forget", false));
  EXPECT_NE(c.reasons.back().find("fleet-old is not stopped there"), std::string::npos);
}

TEST_F(DiffTest, NoHealthToolIsAPlanError) {
  PlanChange c = Diff(Running(-1));
  EXPECT_NE(c.error.find("neither curl nor wget is on dgx5's PATH"), std::string::npos) << c.error;
}

TEST_F(DiffTest, AnotherImageUnderTheSameRefIsReplaced) {
  std::map<std::string, ActualResource> actual;
  ActualResource img;
  img.probed = img.exists = true;
  ImageProbe ip;
  ip.by_ref.tried = ip.by_ref.found = true;
  ip.by_ref.id = "sha256:" + std::string(64, 'b');
  img.attributes = ip.ToJson();
  actual["image.b12x@dgx5"] = img;
  ContainerProbe p = Running(200);
  p.image = std::string(64, 'a');  // podman prints bare hex
  ActualResource a;
  a.probed = a.exists = true;
  a.attributes = p.ToJson();
  DiffContext ctx{facts_["dgx5"], &facts_, &actual, &m_};
  PlanChange c = p_.Diff(desired_, a, nullptr, ctx);
  EXPECT_EQ(c.action, Action::kReplace);
  EXPECT_NE(c.reasons[0].find("it runs image aaaaaaaaaaaa, but " + kRef + " is image bbbbbbbbbbbb"),
            std::string::npos)
      << c.reasons[0];
  p.image = std::string(64, 'b');
  a.attributes = p.ToJson();
  EXPECT_EQ(p_.Diff(desired_, a, nullptr, ctx).action, Action::kNoop);
}

TEST_F(DiffTest, APortHeldByADroppedServeWaitsForItsRemoval) {
  ContainerProbe absent;
  absent.port_busy = true;
  absent.serving = {"fleet-qwen-old"};  // what the probe lists when the port is busy
  PlanChange c = Diff(absent);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.depends_on, std::vector<std::string>{"deployment.qwen-old@dgx5"});
  // A declared serve holds it: nothing this plan removes, so an error.
  absent.serving = {"fleet-qwen"};
  c = Diff(absent);
  EXPECT_NE(c.error.find("port 30000 on dgx5 is already in use"), std::string::npos);
}

// The planner's view: the state records `recorded`, the probe found `probe`.
class UnrecordedTest : public DiffTest {
 protected:
  DiffContext Ctx(const ContainerProbe& probe, bool purge = false) {
    ActualResource a;
    a.probed = true;
    a.exists = probe.exists;
    a.attributes = probe.ToJson();
    actual_[desired_.address] = a;
    return DiffContext{facts_["dgx5"], &facts_, &actual_, &m_, purge, nullptr, &recorded_};
  }
  PlanChange DiffWith(const ContainerProbe& probe, bool purge = false) {
    return p_.Diff(desired_, actual_[desired_.address], nullptr, Ctx(probe, purge));
  }
  std::map<std::string, ActualResource> actual_;
  std::set<std::string> recorded_;
};

TEST_F(UnrecordedTest, AMatchingServeWithoutARecordIsNamedWithTheAdvice) {
  PlanChange c = DiffWith(Running(200));
  EXPECT_EQ(c.action, Action::kNoop);
  ASSERT_EQ(c.reasons.size(), 1u);
  EXPECT_EQ(c.reasons[0],
            "running on dgx5 (container fleet-qwen) but not in this state: `fleet state adopt "
            "deployment.qwen@dgx5` takes it over (it matches the manifests)");
  recorded_.insert(desired_.address);  // in the state: nothing to say
  EXPECT_TRUE(DiffWith(Running(200)).reasons.empty());
}

TEST_F(UnrecordedTest, AnUnknownServeOnThePortIsAnErrorThatSaysWhatToDo) {
  ContainerProbe absent;
  absent.port_busy = true;
  absent.serving = {"fleet-b"};
  PlanChange c = DiffWith(absent);
  EXPECT_EQ(c.error,
            "deployment.qwen@dgx5: port 30000 on dgx5 is held by deployment.b@dgx5, running on "
            "dgx5 (container fleet-b) but not in this state, and the manifests do not declare it "
            "on dgx5: `fleet apply --purge` stops and removes it (or declare it there, and `fleet "
            "state adopt deployment.b@dgx5` takes it over if it matches)");
  EXPECT_TRUE(c.depends_on.empty());
  // --purge: the plan removes it first.
  c = DiffWith(absent, true);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.depends_on, std::vector<std::string>{"deployment.b@dgx5"});
  // A recorded one (an orphan of this state) is removed first, as before.
  recorded_.insert("deployment.b@dgx5");
  c = DiffWith(absent);
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.depends_on, std::vector<std::string>{"deployment.b@dgx5"});
}

TEST_F(UnrecordedTest, DiffUnrecordedNamesOrRemovesUnknownUndeclaredServes) {
  ContainerProbe absent;
  absent.port_busy = true;
  absent.serving = {"fleet-b", "fleet-qwen", "fleet-b", "someone-else"};
  std::vector<PlanChange> found = p_.DiffUnrecorded("dgx5", Ctx(absent));
  ASSERT_EQ(found.size(), 1u);  // not the declared one, not twice, not another's
  EXPECT_EQ(found[0].address, "deployment.b@dgx5");
  EXPECT_EQ(found[0].action, Action::kNoop);
  EXPECT_NE(found[0].reasons.at(0).find("`fleet apply --purge` stops and removes it"),
            std::string::npos);
  found = p_.DiffUnrecorded("dgx5", Ctx(absent, true));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].action, Action::kDelete);
  EXPECT_EQ(found[0].summary, "stop and remove fleet-b");
  recorded_.insert("deployment.b@dgx5");  // DiffOrphan's, not this
  EXPECT_TRUE(p_.DiffUnrecorded("dgx5", Ctx(absent)).empty());
}

// The node probe lists every fleet serve on the node, so one that holds no
// port a deployment wants is named too.
TEST_F(UnrecordedTest, DiffUnrecordedNamesEveryServeTheNodeProbeListed) {
  facts_["dgx5"].fleet_serves_listed = true;
  facts_["dgx5"].fleet_serves = {"fleet-qwen", "fleet-old", "fleet-other"};
  recorded_.insert("deployment.other@dgx5");  // the state knows it: DiffOrphan's
  std::vector<PlanChange> found = p_.DiffUnrecorded("dgx5", Ctx(Running(200)));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].address, "deployment.old@dgx5");
  EXPECT_EQ(found[0].action, Action::kNoop);
  EXPECT_EQ(found[0].reasons.at(0),
            "running on dgx5 (container fleet-old) but not in this state, and the manifests do "
            "not declare it on dgx5: `fleet apply --purge` stops and removes it (or declare it "
            "there, and `fleet state adopt deployment.old@dgx5` takes it over if it matches)");
  found = p_.DiffUnrecorded("dgx5", Ctx(Running(200), true));
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].action, Action::kDelete);
  EXPECT_EQ(found[0].summary, "stop and remove fleet-old");
}

TEST_F(UnrecordedTest, AdoptTakesARunningMatchingServeAndRefusesOthers) {
  ContainerProbe running = Running(200);
  running.id = "cid";
  running.image = "iid";
  Result<nlohmann::json> r = p_.Adopt(desired_, actual_[desired_.address], Ctx(running), nullptr);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DeploymentRecord rec = r->get<DeploymentRecord>();
  EXPECT_EQ(rec.container_id, "cid");
  EXPECT_EQ(rec.image_id, "iid");
  EXPECT_EQ(rec.want.shown.spec, desired_.attributes["spec"]);
  ContainerProbe other = running;
  other.spec = std::string(64, 'e');
  r = p_.Adopt(desired_, actual_[desired_.address], Ctx(other), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("does not match the manifests (the plan would replace "
                                      "fleet-qwen): container fleet-qwen runs spec eeeeeeeeeeee"),
            std::string::npos)
      << r.status().message();
  ContainerProbe stopped = running;
  stopped.state = "exited";
  r = p_.Adopt(desired_, actual_[desired_.address], Ctx(stopped), nullptr);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("container is exited"), std::string::npos);
  r = p_.Adopt(desired_, actual_[desired_.address], Ctx(ContainerProbe{}), nullptr);
  EXPECT_EQ(r.status().message(), "no container fleet-qwen on dgx5");
}

// A GB10 as fleet-probe reports it, with `free_bytes` free.
GpuFacts Gb10Facts(uint64_t free_bytes) {
  GpuFacts gb10;
  gb10.source = "fleet-probe";
  GpuInfo g;
  g.name = "NVIDIA GB10";
  g.unified_memory = true;
  g.memory_total_bytes = 128526893056ull;
  g.memory_free_bytes = free_bytes;
  gb10.gpus.push_back(g);
  return gb10;
}

TEST_F(DiffTest, GpuMemoryNeedIsCheckedAgainstTheNodesFreeMemory) {
  GpuFacts gb10 = Gb10Facts(103401336832ull);  // 96.3 GiB
  gb10.host_mem_available_bytes = 110ull << 30;
  facts_["dgx5"].gpu = GpuFactsToJson(gb10);

  m_.deployments["qwen"].gpu_memory_bytes = 120ull << 30;
  desired_ = p_.Expand(m_).at(0);
  PlanChange c = Diff(ContainerProbe());
  EXPECT_NE(c.error.find("deployment.qwen@dgx5: gpu_memory does not fit on dgx5: needs 120.0 GiB"),
            std::string::npos)
      << c.error;
  EXPECT_NE(c.error.find("96.3 GiB free"), std::string::npos) << c.error;

  m_.deployments["qwen"].gpu_memory_bytes = 24ull << 30;
  desired_ = p_.Expand(m_).at(0);
  c = Diff(ContainerProbe());
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.action, Action::kCreate);
  ASSERT_EQ(c.reasons.size(), 2u);
  EXPECT_EQ(c.reasons[1].rfind("gpu_memory fits: needs 24.0 GiB", 0), 0u) << c.reasons[1];

  // nvidia-smi on a GB10: memory unknown, neither yes nor no.
  gb10.source = "nvidia-smi";
  gb10.gpus[0].memory_free_bytes.reset();
  gb10.gpus[0].memory_total_bytes.reset();
  facts_["dgx5"].gpu = GpuFactsToJson(gb10);
  c = Diff(ContainerProbe());
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.reasons[1].rfind("gpu_memory not checked: ", 0), 0u) << c.reasons[1];

  // A serve that already runs is not checked again: its memory is in use.
  EXPECT_EQ(Diff(Running(200)).action, Action::kNoop);
  EXPECT_TRUE(Diff(Running(200)).reasons.empty());
}

// A GB10 right after a model was staged: 36.3 GiB free as cuMemGetInfo
// counts it, 60 GiB of page cache. A need within both is planned with the
// drop before the start; over both, refused with both figures; where sudo
// would ask for the drop, refused with the sudoers line.
TEST_F(DiffTest, GpuMemoryWithinThePageCacheIsPlannedWithADrop) {
  GpuFacts gb10 = Gb10Facts(38976827392ull);  // 36.3 GiB
  gb10.gpus[0].memory_free_source = "host MemFree";
  gb10.gpus[0].memory_reclaimable_bytes = 60ull << 30;
  gb10.drop_caches_sudo = "allowed";
  gb10.drop_caches_command = "/usr/sbin/sysctl vm.drop_caches=3";
  gb10.drop_caches_user = "lab";
  facts_["dgx5"].gpu = GpuFactsToJson(gb10);

  m_.deployments["qwen"].gpu_memory_bytes = 90ull << 30;
  desired_ = p_.Expand(m_).at(0);
  PlanChange c = Diff(ContainerProbe());
  EXPECT_EQ(c.error, "");
  EXPECT_EQ(c.action, Action::kCreate);
  ASSERT_EQ(c.reasons.size(), 2u);
  EXPECT_EQ(c.reasons[1].rfind("gpu_memory fits once the page cache is dropped: needs 90.0 GiB", 0),
            0u)
      << c.reasons[1];
  EXPECT_NE(c.reasons[1].find("sudo -n sysctl vm.drop_caches=3"), std::string::npos);
  EXPECT_TRUE(c.detail.value("drop_page_cache", false)) << c.detail.dump();
  // The detail still names the deployment for the apply.
  EXPECT_EQ(c.detail.value("name", ""), "qwen") << c.detail.dump();

  // Within free: no drop.
  m_.deployments["qwen"].gpu_memory_bytes = 24ull << 30;
  desired_ = p_.Expand(m_).at(0);
  c = Diff(ContainerProbe());
  EXPECT_FALSE(c.detail.value("drop_page_cache", false)) << c.detail.dump();

  // Over free + page cache: refused with both figures.
  m_.deployments["qwen"].gpu_memory_bytes = 100ull << 30;
  desired_ = p_.Expand(m_).at(0);
  c = Diff(ContainerProbe());
  EXPECT_NE(c.error.find("gpu_memory does not fit on dgx5: needs 100.0 GiB"), std::string::npos)
      << c.error;
  EXPECT_NE(c.error.find("36.3 GiB free"), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("+ 60.0 GiB reclaimable page cache"), std::string::npos) << c.error;

  // sudo asks for the drop: a plan error naming the one line to install.
  gb10.drop_caches_sudo = "refused";
  facts_["dgx5"].gpu = GpuFactsToJson(gb10);
  m_.deployments["qwen"].gpu_memory_bytes = 90ull << 30;
  desired_ = p_.Expand(m_).at(0);
  c = Diff(ContainerProbe());
  EXPECT_NE(c.error.find("only once the page cache is dropped"), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("lab ALL=(root) NOPASSWD: /usr/sbin/sysctl vm.drop_caches=3"),
            std::string::npos)
      << c.error;
}

// The health wait's dark-node time: 30 s unless FLEET_HEALTH_DARK_AFTER
// says another duration; anything else is an error, never the default.
TEST(ServeHealthTest, DarkNodeTimeComesFromTheSettings) {
  Settings s;
  EXPECT_EQ(DarkNodeSeconds(s).value(), 30);
  s.health_dark_after = "5s";
  EXPECT_EQ(DarkNodeSeconds(s).value(), 5);
  s.health_dark_after = "2m";
  EXPECT_EQ(DarkNodeSeconds(s).value(), 120);
  for (const char* bad : {"0", "-5", "five", "5x", "1.5s"}) {
    s.health_dark_after = bad;
    Result<int> r = DarkNodeSeconds(s);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(r.status().message().find("FLEET_HEALTH_DARK_AFTER="), std::string::npos) << bad;
  }
}

// The engine's words on a refused run are read once, into a code (podman
// exits 125 for every refusal): the storage-only-container retry tests it.
TEST(RunRefusalTest, ANameInUseIsAlreadyExists) {
  ContainerSpec spec;
  spec.cli = "podman";
  spec.container = "fleet-q";
  CommandResult run;
  run.exit_code = 125;
  run.err =
      "Error: creating container storage: the container name \"fleet-q\" is already in use by "
      "3f1c. You have to remove that container to be able to reuse that name: that name is "
      "already in use\n";
  const Status taken = RunRefusal(spec, run);
  EXPECT_TRUE(taken.already_exists());
  EXPECT_EQ(taken.message().rfind("`podman run` of fleet-q failed: Error: creating", 0), 0u)
      << taken.message();
  run.err = "Error: short-name resolution enforced but cannot prompt without a TTY\n";
  const Status other = RunRefusal(spec, run);
  EXPECT_FALSE(other.ok());
  EXPECT_FALSE(other.already_exists());
  EXPECT_EQ(other.code(), StatusCode::kFailed);
}

}  // namespace
}  // namespace fleet
