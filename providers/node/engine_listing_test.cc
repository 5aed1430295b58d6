// The engine listing run for real: the node's probe script under /bin/sh
// with stand-ins for the container CLI and curl that answer what docker and
// podman answered on a simulated node, through the CLI and through the API
// socket. Both ways must give the same facts (issue 31).
#include "providers/node/engine_listing.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "providers/node/node_provider.h"
#include "providers/shared/engine_api_test_util.h"
#include "providers/shared/gpu_facts.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

// What one engine printed: `ps --filter label=fleet.deployment --format
// serving={{.Names}}`, `image ls -q --no-trunc`, `image inspect --format
// 'img ...'` of those IDs, and the API's /containers/json (with the ps
// filter) and /images/json.
struct EngineAnswers {
  const char* ps;
  const char* ls;
  const char* inspect;
  const char* containers_json;
  const char* images_json;
};

// Captured from docker's CLI and API on one simulated node (fleet-sim, 2026-12-04):
// the serve fleet-qwen runs, `other` runs unlabelled, fleet-stopped is
// stopped; images with several tags, a pushed one's RepoDigests, a
// dangling one ("<none>" in the list, nothing in inspect), one whose
// digest outlived its tag (null in the list).
const EngineAnswers kDocker = {
    R"(serving=fleet-qwen
)",
    R"(sha256:15ead95b06d8fd38a3b2d7c716cc92173a32104fcbe2c9668c77d3abf5411845
sha256:f0792b2e0aeb6d2c70be94fe305ed7a876671bdccb9267a039a2b4319174dd4e
sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00
sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00
sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00
sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00
)",
    R"(img sha256:15ead95b06d8fd38a3b2d7c716cc92173a32104fcbe2c9668c77d3abf5411845 [] ["localhost/team/dang:v1"]
img sha256:f0792b2e0aeb6d2c70be94fe305ed7a876671bdccb9267a039a2b4319174dd4e [] []
img sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00 ["127.0.0.1:27499/team/app@sha256:3af439e948f7fb8fb4ec0e5650cb74f92bc242270c6e95b5411bf80deb4b86da"] ["127.0.0.1:27499/team/app:v1","other/app:v2","localhost/team/app:fleet-sha256-aaaa","localhost/team/app:v1"]
)",
    R"([{"Id":"18a39bfdc3567c51e0bbe0edee6385dcab68dfb41a5137b596a712b443b33209","Names":["/fleet-qwen"],"Image":"localhost/team/app:v1","ImageID":"sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00","Command":"/bin/sh -c 'sleep 100000'","Created":1796345611,"Ports":[],"Labels":{"fleet.deployment":"qwen","fleet.spec":"x"},"State":"running","Status":"Up 25 seconds","HostConfig":{"NetworkMode":"default"},"NetworkSettings":{"Networks":{"bridge":{"IPAMConfig":null,"Links":null,"Aliases":null,"NetworkID":"","EndpointID":"","Gateway":"","IPAddress":"","IPPrefixLen":0,"IPv6Gateway":"","GlobalIPv6Address":"","GlobalIPv6PrefixLen":0,"MacAddress":"","DriverOpts":null}}},"Mounts":[]}]
)",
    R"([{"Containers":-1,"Created":1796345611,"Id":"sha256:15ead95b06d8fd38a3b2d7c716cc92173a32104fcbe2c9668c77d3abf5411845","Labels":{"a":"b"},"ParentId":"","RepoDigests":null,"RepoTags":["localhost/team/dang:v1"],"SharedSize":-1,"Size":1982263,"VirtualSize":1982263},{"Containers":-1,"Created":1796345610,"Id":"sha256:f0792b2e0aeb6d2c70be94fe305ed7a876671bdccb9267a039a2b4319174dd4e","Labels":null,"ParentId":"","RepoDigests":["<none>@<none>"],"RepoTags":["<none>:<none>"],"SharedSize":-1,"Size":1982263,"VirtualSize":1982263},{"Containers":-1,"Created":1796345609,"Id":"sha256:8ecf5fc0b7ef10f4da211339cd4f9e4df51d819bc5fe03ac24f18650246c5f00","Labels":null,"ParentId":"","RepoDigests":["127.0.0.1:27499/team/app@sha256:3af439e948f7fb8fb4ec0e5650cb74f92bc242270c6e95b5411bf80deb4b86da"],"RepoTags":["127.0.0.1:27499/team/app:v1","other/app:v2","localhost/team/app:fleet-sha256-aaaa","localhost/team/app:v1"],"SharedSize":-1,"Size":1982263,"VirtualSize":1982263}]
)"};

// Captured from podman's CLI and API on one simulated node (fleet-sim, 2026-12-04):
// the serve fleet-qwen runs, `other` runs unlabelled, fleet-stopped is
// stopped; images with several tags, a pushed one's RepoDigests.
const EngineAnswers kPodman = {
    R"(serving=fleet-qwen
)",
    R"(sha256:ddee57aaa7e7a702fee6a9534b4b918d0cbc6c5d9133d67f9df16e94f5c1f0d7
sha256:6d125cb67bd48c269016f2a25c74a0381bdf7cb5e4e286e6adc3b1befe4f2e0f
)",
    R"(img ddee57aaa7e7a702fee6a9534b4b918d0cbc6c5d9133d67f9df16e94f5c1f0d7 ["127.0.0.1:27499/team/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","127.0.0.1:27499/team/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd","localhost/other/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","localhost/other/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd","localhost/team/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","localhost/team/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd"] ["127.0.0.1:27499/team/app:p1","localhost/team/app:v1","localhost/team/app:fleet-sha256-aaaa","localhost/other/app:v2"]
img 6d125cb67bd48c269016f2a25c74a0381bdf7cb5e4e286e6adc3b1befe4f2e0f ["localhost/team/dang@sha256:0c448406f692f1572da6bb925b48b9e6a6e73c137ee212e9005621581ed49f95"] ["localhost/team/dang:v1"]
)",
    R"([{"Id":"c1cbbf978c7130f94c193e0994f9a0e893a03469422f7be66c3a09e014346436","Names":["/fleet-qwen"],"Image":"localhost/team/app:v1","ImageID":"sha256:ddee57aaa7e7a702fee6a9534b4b918d0cbc6c5d9133d67f9df16e94f5c1f0d7","Command":"/bin/sh -c sleep 100000","Created":1796345603,"Ports":[],"Labels":{"fleet.deployment":"qwen","fleet.spec":"x"},"State":"running","Status":"Up 37 seconds","NetworkSettings":{"Networks":null},"Mounts":[],"Name":"","Config":null,"NetworkingConfig":null,"Platform":null,"AdjustCPUShares":false}]
)",
    R"([{"Id":"sha256:ddee57aaa7e7a702fee6a9534b4b918d0cbc6c5d9133d67f9df16e94f5c1f0d7","ParentId":"","RepoTags":["127.0.0.1:27499/team/app:p1","localhost/team/app:v1","localhost/team/app:fleet-sha256-aaaa","localhost/other/app:v2"],"RepoDigests":["127.0.0.1:27499/team/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","127.0.0.1:27499/team/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd","localhost/other/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","localhost/other/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd","localhost/team/app@sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","localhost/team/app@sha256:f187259ae80a7291be35e650800ffb5ad1f84d9bde74b9caad9fca6655c9bfdd"],"Created":1796345600,"Size":1988025,"SharedSize":0,"VirtualSize":1988025,"Labels":null,"Containers":3,"Names":["127.0.0.1:27499/team/app:p1","localhost/team/app:v1","localhost/team/app:fleet-sha256-aaaa","localhost/other/app:v2"],"Digest":"sha256:b55c5aedfb2b25c555eba3d4f3407d88176845f88c91d07461b064defd15df4b","History":["localhost/other/app:v2","localhost/team/app:fleet-sha256-aaaa","localhost/team/app:v1","127.0.0.1:27499/team/app:p1","localhost/team/dang:v1"]},{"Id":"sha256:6d125cb67bd48c269016f2a25c74a0381bdf7cb5e4e286e6adc3b1befe4f2e0f","ParentId":"","RepoTags":["localhost/team/dang:v1"],"RepoDigests":["localhost/team/dang@sha256:0c448406f692f1572da6bb925b48b9e6a6e73c137ee212e9005621581ed49f95"],"Created":1796345600,"Size":1987673,"SharedSize":0,"VirtualSize":1987673,"Labels":{"a":"b"},"Containers":0,"Names":["localhost/team/dang:v1"],"Digest":"sha256:0c448406f692f1572da6bb925b48b9e6a6e73c137ee212e9005621581ed49f95","History":["localhost/team/dang:v1"]}]
)"};

// `a`'s API answers, for testing_engine::FakeEngineApi.
std::map<std::string, std::pair<std::string, std::string>> ApiAnswers(const EngineAnswers& a) {
  return {{"/containers/json?filters=", {"200 OK", a.containers_json}},
          {"/images/json", {"200 OK", a.images_json}}};
}

class EngineListingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(dir_, ""); }
  void TearDown() override {
    if (sock_ >= 0) close(sock_);
  }

  void Write(const std::string& name, const std::string& text) { stub_.Write(name, text); }
  // Every stand-in records its arguments in <dir>/<name>.args (Ran, Read).
  void Tool(const std::string& name, const std::string& body) { stub_.RecordingTool(name, body); }
  static std::string ImageLs(const std::string& d) {
    return "case \"$*\" in *--format*) cat " + d + "/inspect ;; *) cat " + d + "/ls ;; esac";
  }
  // The container CLI `cli`, answering from `a`.
  void Cli(const std::string& cli, const EngineAnswers& a) {
    Write("ps", a.ps);
    Write("ls", a.ls);
    Write("inspect", a.inspect);
    const std::string d = ShellQuote(dir_);
    // podman lists with the inspect's template (`image ls --format 'img
    // ...'`, the same lines: checked against podman 4.3.1), docker with
    // `image ls -q` and then `image inspect`.
    Tool(cli, "case \"$1 $2\" in\n'ps '*) cat " + d + "/ps ;;\n'image ls') " + ImageLs(d) +
                  " ;;\n'image inspect') cat " + d + "/inspect ;;\n*) exit 125 ;;\nesac\n");
  }
  // curl, answering from `a` as `curl -w '\n@api=%{http_code}\n' URL...`
  // does; `code` for every answer, `rc` its exit status.
  void Curl(const EngineAnswers& a, const std::string& code = "200", int rc = 0) {
    Write("containers.json", a.containers_json);
    Write("images.json", a.images_json);
    const std::string d = ShellQuote(dir_);
    Tool("curl", "for u; do case $u in\n*/containers/json*) cat " + d +
                     "/containers.json; printf '\\n@api=" + code + "\\n' ;;\n*/images/json) cat " +
                     d + "/images.json; printf '\\n@api=" + code + "\\n' ;;\nesac; done\nexit " +
                     std::to_string(rc) + "\n");
  }
  // A listening socket at `path` (the engine's, as far as `[ -S ]` can tell).
  void Socket(const std::string& path) {
    unlink(path.c_str());  // one an earlier Socket left
    sock_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << path;
    ASSERT_EQ(listen(sock_, 1), 0);
  }
  // `from` as the node's installed fleet-probe ($HOME/.fleet/bin).
  void InstallProbe(const std::string& from) {
    ASSERT_EQ(std::system(("mkdir -p " + ShellQuote(dir_ + "/.fleet/bin") + " && cp " +
                           ShellQuote(from) + " " + ShellQuote(dir_ + "/.fleet/bin/fleet-probe"))
                              .c_str()),
              0);
  }
  // Runs `script` with only the stand-ins and the base system on PATH, and
  // `env` (e.g. DOCKER_HOST=...) set.
  std::string Run(const std::string& script, const std::string& env) {
    return stub_.Run(script, env).out;
  }
  // The plan's node probe (no GPU, no fabric) on a node whose CLI is `cli`.
  NodeFacts Plan(const std::string& cli, const std::string& env) {
    NodeSpec spec;
    spec.container_cli = cli;
    spec.sysfs = "/nonexistent";
    return ParseNodeFacts(Run(NodeProvider().ProbeScript(DesiredResource{}, spec), env));
  }
  bool Ran(const std::string& tool) {
    return access((dir_ + "/" + tool + ".args").c_str(), F_OK) == 0;
  }
  void Forget(const std::string& tool) { unlink((dir_ + "/" + tool + ".args").c_str()); }
  std::string Read(const std::string& name) { return stub_.Read(name); }

  const testing_support::StubCli stub_{"engine_listing_test"};
  const std::string dir_ = stub_.dir();
  int sock_ = -1;
};

// The facts a plan reads from the listing.
void ExpectSameListing(const NodeFacts& api, const NodeFacts& cli) {
  EXPECT_EQ(api.fleet_serves_listed, cli.fleet_serves_listed);
  EXPECT_EQ(api.fleet_serves, cli.fleet_serves);
  EXPECT_EQ(api.images.dump(), cli.images.dump());
}

TEST_F(EngineListingTest, DockersApiGivesWhatItsCliGives) {
  Tool("fleet-probe", "printf '{\"probe_version\":1,\"cuda_context\":false,\"gpus\":[]}\\n'\n");
  Cli("docker", kDocker);
  const NodeFacts cli = Plan("docker", "DOCKER_HOST=unix://" + dir_ + "/docker.sock");
  EXPECT_FALSE(Ran("curl"));  // no socket there: the CLI
  ASSERT_TRUE(Ran("docker"));
  Socket(dir_ + "/docker.sock");
  Curl(kDocker);
  Forget("docker");
  const NodeFacts api = Plan("docker", "DOCKER_HOST=unix://" + dir_ + "/docker.sock");
  EXPECT_FALSE(Ran("docker"));  // not one CLI start
  EXPECT_NE(Read("curl.args").find("--unix-socket " + dir_ + "/docker.sock"), std::string::npos);
  ExpectSameListing(api, cli);
  EXPECT_EQ(api.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  const ImageListing images = ImageListing::FromJson(api.images);
  EXPECT_TRUE(images.listed);
  EXPECT_EQ(images.error, "");
  ASSERT_EQ(images.images.size(), 3u);
  EXPECT_TRUE(images.images[1].tags.empty());  // the dangling one: no "<none>:<none>"
  EXPECT_TRUE(images.images[1].repo_digests.empty());
  EXPECT_EQ(images.images[2].tags.size(), 4u);
  // The CUDA context decision names the serve either way.
  GpuFacts a, c;
  ASSERT_TRUE(GpuFactsFromJson(api.gpu, &a));
  ASSERT_TRUE(GpuFactsFromJson(cli.gpu, &c));
  EXPECT_EQ(a.context_decision, c.context_decision);
  EXPECT_EQ(a.context_decision.rfind("no CUDA context: fleet serve fleet-qwen runs", 0), 0u)
      << a.context_decision;
}

TEST_F(EngineListingTest, PodmansApiGivesWhatItsCliGives) {
  Cli("podman", kPodman);
  ASSERT_EQ(mkdir((dir_ + "/xdg").c_str(), 0700), 0);
  ASSERT_EQ(mkdir((dir_ + "/xdg/podman").c_str(), 0700), 0);
  const std::string env = "XDG_RUNTIME_DIR=" + dir_ + "/xdg";
  const NodeFacts cli = Plan("podman", env);
  EXPECT_FALSE(Ran("curl"));  // no service: the CLI, and no service is started
  Socket(dir_ + "/xdg/podman/podman.sock");
  Curl(kPodman);
  Forget("podman");
  const NodeFacts api = Plan("podman", env);
  EXPECT_FALSE(Ran("podman"));
  ExpectSameListing(api, cli);
  EXPECT_EQ(ImageListing::FromJson(api.images).images.size(), 2u);
}

// fleet's installed probe reads the API itself (the real one): not curl,
// and no `timeout` around its GPU run (it ends itself after 20 s); in the
// plan's node probe, API and GPU in one start (`fleet-probe --api-gpu`).
// A probe that knows --api but not --api-gpu reads the API with --api and
// the GPU in a start of its own; an older probe refuses --api too: curl
// answers, and timeout is kept. The same facts every way.
TEST_F(EngineListingTest, InstalledProbeReadsTheApi) {
  const char* probe = std::getenv("FLEET_PROBE");
  ASSERT_NE(probe, nullptr) << "run by meson, which sets FLEET_PROBE";
  Cli("docker", kDocker);
  const std::string env = "DOCKER_HOST=unix://" + dir_ + "/docker.sock";
  const NodeFacts want = Plan("docker", env);  // no socket yet: the CLI
  Curl(kDocker);
  Tool("timeout", "shift; exec \"$@\"\n");
  // The real probe, its starts recorded (probe.args: one line each).
  Write("real-probe", probe);
  Tool("probe", "exec \"$(cat " + ShellQuote(dir_ + "/real-probe") + ")\" \"$@\"\n");
  InstallProbe(dir_ + "/bin/probe");
  testing_engine::FakeEngineApi engine(dir_ + "/docker.sock", ApiAnswers(kDocker));
  ASSERT_TRUE(engine.ok());
  Forget("docker");
  const NodeFacts got = Plan("docker", env);
  EXPECT_EQ(engine.requests(), 2);
  EXPECT_FALSE(Ran("docker"));
  EXPECT_FALSE(Ran("curl"));
  EXPECT_FALSE(Ran("timeout"));
  const std::string calls = Read("probe.args");
  EXPECT_EQ(calls.rfind("--api-gpu auto ", 0), 0u) << calls;  // one start: API and GPU
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 1) << calls;
  ExpectSameListing(got, want);
  EXPECT_EQ(got.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  EXPECT_GE(got.gpu_probe_s, 0.0);  // its document's elapsed_ns
  EXPECT_LT(got.gpu_probe_s, 20.0);
  GpuFacts g;
  ASSERT_TRUE(GpuFactsFromJson(got.gpu, &g)) << got.gpu.dump();
  EXPECT_EQ(g.source, "fleet-probe");
  EXPECT_EQ(g.context_decision.rfind("no CUDA context: fleet serve fleet-qwen runs", 0), 0u)
      << g.context_decision;

  // A probe from before --api-gpu: --api, then its GPU run.
  Forget("probe");
  Tool("mid-probe", "[ \"$1\" = --api-gpu ] && exit 2\nexec \"$(cat " +
                        ShellQuote(dir_ + "/real-probe") + ")\" \"$@\"\n");
  InstallProbe(dir_ + "/bin/mid-probe");
  const NodeFacts mid = Plan("docker", env);
  EXPECT_EQ(engine.requests(), 4);
  EXPECT_FALSE(Ran("docker"));
  EXPECT_FALSE(Ran("curl"));
  EXPECT_FALSE(Ran("timeout"));
  const std::string mid_calls = Read("mid-probe.args");
  EXPECT_NE(mid_calls.find("--api-gpu auto "), std::string::npos) << mid_calls;
  EXPECT_NE(mid_calls.find("\n--api "), std::string::npos) << mid_calls;
  EXPECT_NE(mid_calls.find("\n--no-context\n"), std::string::npos) << mid_calls;  // a serve runs
  ExpectSameListing(mid, want);
  EXPECT_GE(mid.gpu_probe_s, 0.0);

  Tool("old-probe",
       "case $1 in --api | --api-gpu) exit 2 ;; esac\n"
       "printf '{\"probe_version\":1,\"cuda_context\":false,\"gpus\":[]}\\n'\n");
  InstallProbe(dir_ + "/bin/old-probe");
  const NodeFacts old = Plan("docker", env);
  EXPECT_FALSE(Ran("docker"));
  EXPECT_TRUE(Ran("curl"));
  EXPECT_TRUE(Ran("timeout"));
  ExpectSameListing(old, want);
  EXPECT_LT(old.gpu_probe_s, 0.0);  // an older probe does not say
}

// No fleet serve runs (the API's list is empty): --api-gpu creates a
// context as the CLI's "idle" decision does, in one start; a GPU run that
// ends without its document (a hung driver's deadline) leaves the engine's
// answer standing and an empty gpu_probe line, as a separate run did.
TEST_F(EngineListingTest, ApiGpuDecidesTheContextAsTheScriptDoes) {
  EngineAnswers idle = kDocker;
  idle.ps = "";
  idle.containers_json = "[]\n";
  Cli("docker", idle);
  Tool("fleet-probe", "printf '{\"probe_version\":1,\"cuda_context\":true,\"gpus\":[]}\\n'\n");
  const std::string env = "DOCKER_HOST=unix://" + dir_ + "/docker.sock";
  const NodeFacts want = Plan("docker", env);
  const char* probe = std::getenv("FLEET_PROBE");
  ASSERT_NE(probe, nullptr) << "run by meson, which sets FLEET_PROBE";
  Write("real-probe", probe);
  Tool("probe", "exec \"$(cat " + ShellQuote(dir_ + "/real-probe") + ")\" \"$@\"\n");
  InstallProbe(dir_ + "/bin/probe");
  testing_engine::FakeEngineApi engine(dir_ + "/docker.sock", ApiAnswers(idle));
  ASSERT_TRUE(engine.ok());
  Forget("docker");
  const NodeFacts got = Plan("docker", env);
  EXPECT_FALSE(Ran("docker"));
  const std::string calls = Read("probe.args");
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 1) << calls;
  ExpectSameListing(got, want);
  GpuFacts g, w;
  ASSERT_TRUE(GpuFactsFromJson(got.gpu, &g)) << got.gpu.dump();
  ASSERT_TRUE(GpuFactsFromJson(want.gpu, &w)) << want.gpu.dump();
  EXPECT_EQ(g.context_decision, w.context_decision);

  // The GPU run killed after the marker: the listing stands, no document.
  Tool("cut-probe",
       "if [ \"$1\" = --api-gpu ]; then \"$(cat " + ShellQuote(dir_ + "/real-probe") +
           ")\" --api \"$3\" \"$4\" \"$5\"; printf '@gpu='; kill -ALRM $$; fi\nexit 9\n");
  InstallProbe(dir_ + "/bin/cut-probe");
  const NodeFacts cut = Plan("docker", env);
  EXPECT_FALSE(Ran("docker"));
  const std::string cut_calls = Read("cut-probe.args");
  EXPECT_EQ(std::count(cut_calls.begin(), cut_calls.end(), '\n'), 1) << cut_calls;
  ExpectSameListing(cut, want);
  GpuFacts c;
  ASSERT_TRUE(GpuFactsFromJson(cut.gpu, &c)) << cut.gpu.dump();
  EXPECT_EQ(c.source, "none") << cut.gpu.dump();  // no document: no probe's facts
}

// A podman node with no API service: the installed probe reads podman's
// own storage (`fleet-probe --podman-store-gpu`, its answer in --api's
// format) and the GPU in one start, and no podman starts at all. A probe
// that is unsure (exit 3, the reason on stderr), one from before the flag
// (exit 2), or an answer cut short: the CLI answers. The same facts every
// way. (src/probe/fleet_probe_store_test.cc reads a real podman's store.)
TEST_F(EngineListingTest, PodmansStoreReadGivesWhatItsCliGives) {
  Cli("podman", kPodman);
  Tool("fleet-probe", "printf '{\"probe_version\":1,\"cuda_context\":false,\"gpus\":[]}\\n'\n");
  const NodeFacts want = Plan("podman", "");  // no probe installed: the CLI
  ASSERT_TRUE(Ran("podman"));
  Write("containers.json", kPodman.containers_json);
  Write("images.json", kPodman.images_json);
  const std::string d = ShellQuote(dir_);
  const std::string answers = "for p; do case $p in\n/containers/json*) cat " + d +
                              "/containers.json; printf '\\n@api=200\\n' ;;\n/images/json) cat " +
                              d + "/images.json; printf '\\n@api=200\\n' ;;\nesac; done\n";
  const std::string gpu_doc =
      "printf '{\"probe_version\":1,\"cuda_context\":false,\"gpus\":[],"
      "\"elapsed_ns\":1000}\\n'\n";
  Tool("store-probe", "case $1 in\n--podman-store-gpu) shift 2; " + answers +
                          "printf '@gpu=' ;;\n--podman-store) shift; " + answers +
                          "exit 0 ;;\n--*) exit 2 ;;\nesac\n" + gpu_doc);
  InstallProbe(dir_ + "/bin/store-probe");
  Forget("podman");
  const NodeFacts got = Plan("podman", "");
  EXPECT_FALSE(Ran("podman"));  // not one podman start
  const std::string calls = Read("store-probe.args");
  EXPECT_EQ(calls.rfind("--podman-store-gpu auto /containers/json?filters=", 0), 0u) << calls;
  EXPECT_NE(calls.find(" /images/json\n"), std::string::npos) << calls;
  EXPECT_EQ(std::count(calls.begin(), calls.end(), '\n'), 1) << calls;  // one start: all of it
  ExpectSameListing(got, want);
  EXPECT_EQ(got.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  EXPECT_EQ(ImageListing::FromJson(got.images).images.size(), 2u);
  EXPECT_GE(got.gpu_probe_s, 0.0);

  // Unsure (exit 3): podman's CLI lists, the probe reads the GPU alone.
  Tool("unsure-probe",
       "case $1 in\n--podman-store*) echo 'fleet-probe: --podman-store: busy: use the CLI' >&2; "
       "exit 3 ;;\n--*) exit 2 ;;\nesac\n" +
           gpu_doc);
  InstallProbe(dir_ + "/bin/unsure-probe");
  const NodeFacts unsure = Plan("podman", "");
  EXPECT_TRUE(Ran("podman"));
  const std::string unsure_calls = Read("unsure-probe.args");
  EXPECT_EQ(std::count(unsure_calls.begin(), unsure_calls.end(), '\n'), 2) << unsure_calls;
  ExpectSameListing(unsure, want);
  EXPECT_EQ(unsure.fleet_serves, std::vector<std::string>{"fleet-qwen"});

  // From before --podman-store (and --api): exit 2, the CLI.
  Tool("old-probe", "case $1 in --*) exit 2 ;; esac\n" + gpu_doc);
  InstallProbe(dir_ + "/bin/old-probe");
  Forget("podman");
  ExpectSameListing(Plan("podman", ""), want);
  EXPECT_TRUE(Ran("podman"));

  // An answer without the images' marker (cut short): the CLI.
  Tool("short-probe", "case $1 in\n--podman-store*) cat " + d +
                          "/containers.json; printf '\\n@api=200\\n' ;;\nesac\n" + gpu_doc);
  InstallProbe(dir_ + "/bin/short-probe");
  Forget("podman");
  ExpectSameListing(Plan("podman", ""), want);
  EXPECT_TRUE(Ran("podman"));

  // The real probe where a storage.conf of its own is named (podman would
  // read that one): it refuses, and the CLI answers.
  const char* probe = std::getenv("FLEET_PROBE");
  ASSERT_NE(probe, nullptr) << "run by meson, which sets FLEET_PROBE";
  InstallProbe(probe);
  Forget("podman");
  ExpectSameListing(Plan("podman", "CONTAINERS_STORAGE_CONF=" + dir_ + "/storage.conf"), want);
  EXPECT_TRUE(Ran("podman"));
}

// An engine that does not answer the probe would not answer curl either:
// the CLI answers, and the probe, which knows --api, runs without timeout.
TEST_F(EngineListingTest, EngineThatDoesNotAnswerTheProbeMeansTheCli) {
  const char* probe = std::getenv("FLEET_PROBE");
  ASSERT_NE(probe, nullptr) << "run by meson, which sets FLEET_PROBE";
  Cli("docker", kDocker);
  const std::string env = "DOCKER_HOST=unix://" + dir_ + "/docker.sock";
  const NodeFacts want = Plan("docker", env);
  Curl(kDocker);
  Tool("timeout", "shift; exec \"$@\"\n");
  InstallProbe(probe);
  Forget("docker");
  testing_engine::FakeEngineApi engine(dir_ + "/docker.sock", ApiAnswers(kDocker), /*mute=*/true);
  ASSERT_TRUE(engine.ok());
  const NodeFacts got = Plan("docker", env);
  EXPECT_EQ(engine.requests(), 1);  // none after the unanswered one
  EXPECT_TRUE(Ran("docker"));
  EXPECT_FALSE(Ran("curl"));
  EXPECT_FALSE(Ran("timeout"));
  ExpectSameListing(got, want);
}

// Any failed call, or no curl, and the node asks the CLI: the same facts.
TEST_F(EngineListingTest, FallsBackToTheCli) {
  Cli("docker", kDocker);
  const std::string env = "DOCKER_HOST=unix://" + dir_ + "/docker.sock";
  const NodeFacts want = Plan("docker", env);  // no socket yet
  Socket(dir_ + "/docker.sock");
  for (const auto& [code, rc] : std::vector<std::pair<std::string, int>>{{"500", 0}, {"000", 7}}) {
    Curl(kDocker, code, rc);
    Forget("docker");
    const NodeFacts got = Plan("docker", env);
    EXPECT_TRUE(Ran("docker")) << code;
    ExpectSameListing(got, want);
  }
  // A remote engine (tcp://) or a docker context: the CLI knows where it is.
  Curl(kDocker);
  for (const std::string& other :
       {std::string("DOCKER_HOST=tcp://10.0.0.1:2375"), env + " DOCKER_CONTEXT=remote"}) {
    Forget("curl");
    ExpectSameListing(Plan("docker", other), want);
    EXPECT_FALSE(Ran("curl")) << other;
  }
  EXPECT_EQ(want.fleet_serves, std::vector<std::string>{"fleet-qwen"});
}

// What stays a CLI call runs side by side: `ps` beside the image listing
// (podman: one `image ls`), so the node waits for about one start. Here
// `ps` answers only once `image ls` has started (5 s at most).
TEST_F(EngineListingTest, CliRunsGoSideBySide) {
  Cli("podman", kPodman);
  const std::string d = ShellQuote(dir_);
  Tool("podman",
       "case \"$1 $2\" in\n"
       "'ps '*) i=0; while [ ! -e " +
           d +
           "/ls.started ] && [ $i -lt 50 ]; do\n"
           "  sleep 0.1; i=$((i+1)); done\n"
           "  [ -e " +
           d + "/ls.started ] && echo seen > " + d + "/ps.saw; cat " + d +
           "/ps ;;\n"
           "'image ls') touch " +
           d + "/ls.started; " + ImageLs(d) +
           " ;;\n"
           "'image inspect') cat " +
           d + "/inspect ;;\nesac\n");
  const NodeFacts f = Plan("podman", "");
  EXPECT_EQ(Read("ps.saw"), "seen\n");
  EXPECT_EQ(f.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  EXPECT_EQ(ImageListing::FromJson(f.images).images.size(), 2u);
}

// The image listing reaches the controller through a pipe, after the rest
// of the node's lines: one far larger than a pipe's buffer (64 KiB) comes
// whole, and so do the lines it waited behind.
TEST_F(EngineListingTest, ALargeImageListingComesWhole) {
  Tool("fleet-probe", "printf '{\"probe_version\":1,\"cuda_context\":true,\"gpus\":[]}\\n'\n");
  Cli("podman", kPodman);
  std::string inspect;
  for (int i = 0; i < 2000; ++i) {
    char id[65];
    std::snprintf(id, sizeof id, "%064x", i + 1);
    inspect += std::string("img ") + id + " [\"127.0.0.1:5000/team/app@sha256:" + id +
               "\"] [\"127.0.0.1:5000/team/app:v" + std::to_string(i) + "\"]\n";
  }
  ASSERT_GT(inspect.size(), 4u * 65536);
  Write("inspect", inspect);
  const NodeFacts f = Plan("podman", "");
  EXPECT_EQ(f.fleet_serves, std::vector<std::string>{"fleet-qwen"});
  EXPECT_TRUE(f.gpu.is_object()) << f.gpu.dump();
  const ImageListing l = ImageListing::FromJson(f.images);
  EXPECT_EQ(l.error, "");
  ASSERT_EQ(l.images.size(), 2000u);
  EXPECT_EQ(l.images[1999].tags, std::vector<std::string>{"127.0.0.1:5000/team/app:v1999"});
}

// engine_listing.sh on its own: the serves' line, then what runs beside,
// then the images; the names in $fsl and $gcs for the script after it.
TEST_F(EngineListingTest, TheServesLineThenBesideThenTheImages) {
  Cli("docker", kDocker);
  const std::string beside = "echo beside\nprintf 'fsl=%s gcs=%s\\n' \"$fsl\" \"$gcs\"\n";
  const std::string no_api = "DOCKER_HOST=unix:///nonexistent";
  EXPECT_EQ(Run(EngineListingScript("docker", false, beside) + "echo after=$fsl\n", no_api),
            "fleet_serves=listed:fleet-qwen \nbeside\nfsl=listed gcs=fleet-qwen \nafter=listed\n");
  EXPECT_EQ(Read("docker.args"),
            "ps --filter label=fleet.deployment --format serving={{.Names}}\n");
  // With the images: beside the CLI's listing, whose lines come last.
  const std::string out = Run(EngineListingScript("docker", true, beside), no_api);
  EXPECT_EQ(out.rfind("fleet_serves=listed:fleet-qwen \nbeside\nfsl=listed gcs=fleet-qwen \n", 0),
            0u)
      << out;
  EXPECT_NE(out.find("\nimages=inspect 0\n"), std::string::npos) << out;
  EXPECT_EQ(ImageListing::FromJson(ParseNodeFacts(out).images).images.size(), 3u);
  // No CLI: nothing asked, the images' line says so after the rest.
  EXPECT_EQ(Run(EngineListingScript("fleet-no-such-cli", true, beside), no_api),
            "fleet_serves=no-engine:\nbeside\nfsl=no-engine gcs=\nimages=cli-missing\n");
}

// A CLI that cannot list: its first line, cut at 300 bytes, and no
// listing; the API's answer, when one is read, goes out line by line.
TEST_F(EngineListingTest, AnEngineErrorAndTheApisLines) {
  Tool("docker", "echo \"Cannot connect $(printf '%0400d' 0)\"; echo second; exit 1\n");
  const std::string out = Run(EngineListingScript("docker", false, ""), "DOCKER_HOST=unix:///x");
  EXPECT_EQ(out, "fleet_serves=engine-error:Cannot connect " + std::string(285, '0') + "\n");
  Socket(dir_ + "/docker.sock");
  Curl(kDocker);
  const std::string api = Run(EngineListingScript("docker", false, "echo beside\n"),
                              "DOCKER_HOST=unix://" + dir_ + "/docker.sock");
  EXPECT_EQ(api.rfind("fleet_serves=api:\nengine_api=[{", 0), 0u) << api;
  EXPECT_NE(api.find("}]\nengine_api=\nengine_api=@api=200\nbeside\n"), std::string::npos) << api;
  EXPECT_EQ(ParseEngineApi(api).serves.names, std::vector<std::string>{"fleet-qwen"});
  // Only the serves were asked for: no /images/json without the images.
  EXPECT_EQ(Read("curl.args").find("/images/json"), std::string::npos) << Read("curl.args");
}

TEST(ParseEngineApi, WhatTheAnswerSays) {
  EXPECT_FALSE(ParseEngineApi("fleet_serves=listed:x \n").present);
  EngineApiListing a = ParseEngineApi("engine_api=[]\nengine_api=\nengine_api=@api=200\n");
  EXPECT_TRUE(a.present);
  EXPECT_TRUE(a.serves.listed);
  EXPECT_TRUE(a.serves.names.empty());
  EXPECT_FALSE(a.images_listed);
  a = ParseEngineApi(
      "engine_api={\"message\":\"x\"}\nengine_api=@api=200\nengine_api=nope\n"
      "engine_api=@api=200\n");
  EXPECT_FALSE(a.serves.listed);
  EXPECT_NE(a.serves.error.find("no list"), std::string::npos);
  EXPECT_TRUE(a.images_listed);
  EXPECT_NE(a.images.error.find("no list"), std::string::npos);
  // Names as docker's CLI prints them: no '/', several joined by ','.
  EXPECT_EQ(ContainersFromJson(R"([{"Names":["/a","/b/alias"]},{"Names":["/c"]},{}])").names,
            (std::vector<std::string>{"a,b/alias", "c"}));
}

}  // namespace
}  // namespace fleet
