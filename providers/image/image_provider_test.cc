// Unit tests of the image provider's pure parts: refs, probe parsing, the
// diff (presence by digest / config digest, source choice, errors) and the
// no-pull run argv.
#include "providers/image/image_provider.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "providers/image/image_steps.h"
#include "providers/shared/cli_error.h"
#include "providers/shared/engine_api_test_util.h"
#include "providers/shared/image_listing.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "providers/shared/run_args.h"
#include "state/state.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

const std::string kD = "sha256:" + std::string(64, 'd');
const std::string kC = "sha256:" + std::string(64, 'c');
const std::string kX = "sha256:" + std::string(64, 'e');
const std::string kRepo = "127.0.0.1:5000/team/vllm";

// The node's image listing as its probe prints it (image_listing.h): one
// image per line, its RepoDigests and tags.
std::string Img(const std::string& id, const std::vector<std::string>& digests,
                const std::vector<std::string>& tags) {
  return "image_out=img " + id + " " + nlohmann::json(digests).dump() + " " +
         nlohmann::json(tags).dump() + "\n";
}
std::string HasByDigest(const std::string& id = std::string(64, 'c')) {
  return Img(id, {kRepo + "@" + kD}, {});
}
std::string HasByFleetTag(const std::string& id = std::string(64, 'c')) {
  return Img(id, {}, {kRepo + ":sha256-" + kD.substr(7)});
}
const std::string kMissing = "";
const std::string kNoCli = "images=cli-missing\n";

// What the node's probe printed: the listing's status line, then `out`.
NodeFacts ListedFacts(const std::string& out) {
  NodeFacts f;
  f.reachable = true;
  const std::string status = out.find("images=") == std::string::npos ? "images=inspect 0\n" : "";
  f.images = ParseImageListing(status + out).ToJson();
  return f;
}

TEST(ImageRefTest, SplitsRepositoryTagDigest) {
  ImageRef r = ParseImageRef(kRepo + ":nightly@" + kD);
  EXPECT_EQ(r.repository, kRepo);
  EXPECT_EQ(r.tag, "nightly");
  EXPECT_EQ(r.digest, kD);
  EXPECT_TRUE(r.pinned());
  EXPECT_EQ(r.Lookup(), kRepo + "@" + kD);  // the tag does not take part
  EXPECT_EQ(r.FleetTag(), kRepo + ":sha256-" + std::string(64, 'd'));
  EXPECT_EQ(r.TaggedName(), kRepo + ":nightly");

  ImageRef f = ParseImageRef("eugr/spark-vllm-b12x:latest");
  EXPECT_FALSE(f.pinned());
  EXPECT_EQ(f.repository, "eugr/spark-vllm-b12x");
  EXPECT_EQ(f.Lookup(), "eugr/spark-vllm-b12x:latest");
  EXPECT_EQ(f.FleetTag(), "");

  ImageRef port = ParseImageRef("localhost:5000/x");  // the port is no tag
  EXPECT_EQ(port.repository, "localhost:5000/x");
  EXPECT_EQ(port.tag, "");
}

// Found by fuzz/image_ref_fuzzer: FleetTag of a digest shorter than
// "sha256:" threw std::out_of_range (substr). Such a ref has no fleet tag.
TEST(ImageRefTest, ADigestThatIsNotSha256HasNoFleetTag) {
  ImageRef r = ParseImageRef(std::string("c417a16ae2\0@62", 14));
  EXPECT_TRUE(r.pinned());
  std::string tag = "unset";
  ASSERT_NO_THROW(tag = r.FleetTag());
  EXPECT_EQ(tag, "");
  EXPECT_EQ(ParseImageRef("x@md5:abc").FleetTag(), "");
  EXPECT_EQ(ParseImageRef("x@sha256:" + std::string(64, 'a')).FleetTag(),
            "x:sha256-" + std::string(64, 'a'));
}

TEST(ImageRefTest, NormalisesIdsAndMatchesDigestsUnderAnyName) {
  EXPECT_EQ(NormalizeImageId(std::string(64, 'c')), kC);  // podman prints bare hex
  EXPECT_EQ(NormalizeImageId(kC), kC);                    // docker prints sha256:
  EXPECT_EQ(NormalizeImageId("abc"), "");
  EXPECT_EQ(NormalizeImageId("sha256:" + std::string(64, 'C')), "");
  EXPECT_TRUE(HasRepoDigest({"other.io/elsewhere@" + kD}, kD));
  EXPECT_FALSE(HasRepoDigest({kRepo + "@" + kX}, kD));
  EXPECT_FALSE(HasRepoDigest({}, kD));
  EXPECT_FALSE(HasRepoDigest({kRepo + "@" + kD}, ""));
  EXPECT_EQ(ShortId(kC), "cccccccccccc");
}

TEST(ImageProbeTest, FloatingScriptInspectsTheTagOnlyAndQuotes) {
  std::string f = ImageProbeScript("docker", ParseImageRef("repo:latest"));
  EXPECT_NE(f.find("ipr_format='{{json .RepoDigests}} {{.Id}}' ipr_ref=repo:latest\n"),
            std::string::npos)
      << f;
  EXPECT_EQ(f.find("image ls"), std::string::npos);
  EXPECT_EQ(f.find(".Digest"), std::string::npos);
  // A hostile CLI name stays one quoted word.
  std::string h = ImageProbeScript("podman; rm -rf /", ParseImageRef("repo:latest"));
  EXPECT_NE(h.find("ipr_cli='podman; rm -rf /'"), std::string::npos);
}

// image_probe.sh on its own, with a stand-in CLI: the inspect's answer and
// its exit status on one "ref" line (a multi-line miss joined), and "cli
// missing" without the CLI.
TEST(ImageProbeTest, FloatingScriptRunsTheInspectWithStubCli) {
  const testing_support::StubCli stub("image_probe_test");
  stub.RecordingTool(
      "docker",
      "case $5 in\n"
      "repo:latest) echo 'WARN[0000] a warning'; echo '[] " +
          std::string(64, 'c') +
          "' ;;\n"
          "*) printf 'Error: No such image: %s\\nsecond line\\n' \"$5\" >&2; exit 1 ;;\n"
          "esac\n");
  testing_support::ShellRun run =
      stub.Run(ImageProbeScript("docker", ParseImageRef("repo:latest")));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "ref 0 WARN[0000] a warning [] " + std::string(64, 'c') + "\n");
  EXPECT_EQ(stub.Calls("docker"),
            "image inspect --format {{json .RepoDigests}} {{.Id}} repo:latest\n");
  ImageProbe p = ParseImageProbe(run.out);
  EXPECT_TRUE(p.by_ref.found) << p.by_ref.error;
  EXPECT_EQ(p.by_ref.id, kC);

  run = stub.Run(ImageProbeScript("docker", ParseImageRef("repo:gone")));
  EXPECT_EQ(run.out, "ref 1 Error: No such image: repo:gone second line\n");
  p = ParseImageProbe(run.out);
  EXPECT_TRUE(p.by_ref.tried);
  EXPECT_FALSE(p.by_ref.found);
  EXPECT_EQ(p.by_ref.error, "");

  run = stub.Run(ImageProbeScript("fleet-no-such-cli", ParseImageRef("repo:latest")));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, "cli missing\n");
  EXPECT_FALSE(ParseImageProbe(run.out).cli_found);
}

TEST(ImageProviderTest, OnlyAFloatingRefHasAFragmentOfItsOwn) {
  ImageProvider p;
  NodeSpec node;
  node.container_cli = "podman";
  DesiredResource r;
  r.attributes = {{"ref", kRepo + "@" + kD}, {"cli", "podman"}};
  EXPECT_EQ(p.ProbeScript(r, node), "");  // the node's image listing answers it
  r.attributes = {{"ref", kRepo + ":latest"}, {"cli", "podman"}};
  EXPECT_NE(p.ProbeScript(r, node).find("image inspect"), std::string::npos);
}

TEST(ImageProbeTest, ParsesFoundMissingAndErrors) {
  ImageProbe p =
      ParseImageProbe("ref 0 [\"" + kRepo + "@" + kD + "\"] " + std::string(64, 'c') + "\n");
  EXPECT_TRUE(p.cli_found);
  EXPECT_TRUE(p.by_ref.found);
  EXPECT_EQ(p.by_ref.id, kC);
  ASSERT_EQ(p.by_ref.repo_digests.size(), 1u);
  EXPECT_FALSE(p.by_name.tried);

  // podman's miss, then found by fleet's tag with no RepoDigests (a copy).
  p = ParseImageProbe(
      "ref 125 Error: inspecting object: x: image not known\n"
      "name 0 [] " +
      std::string(64, 'c') + "\n");
  EXPECT_FALSE(p.by_ref.found);
  EXPECT_TRUE(p.by_ref.error.empty());
  EXPECT_TRUE(p.by_name.found);
  EXPECT_EQ(p.by_name.id, kC);
  EXPECT_TRUE(p.by_name.repo_digests.empty());

  // A record a crash cut short (podman 4.3, reproduced by removing an
  // image's manifest from its storage): broken, neither found nor an error.
  ImageLookup broken = ParseInspect(
      125,
      "time=\"...\" level=warning msg=\"Failed to determine if an image is a manifest list: "
      "locating item named \\\"manifest\\\" for image with ID \\\"377ae5b9\\\" (consider "
      "removing the image to resolve the issue): file does not exist, ignoring the error\"\n"
      "Error: locating item named \"manifest\" for image with ID \"377ae5b9\" (consider removing "
      "the image to resolve the issue): file does not exist\n");
  EXPECT_TRUE(broken.broken);
  EXPECT_FALSE(broken.found);
  EXPECT_TRUE(broken.error.empty()) << broken.error;
  // Another failure stays an error.
  broken = ParseInspect(125, "Error: database is locked\n");
  EXPECT_FALSE(broken.broken);
  EXPECT_NE(broken.error.find("database is locked"), std::string::npos);

  // docker's miss and `null` RepoDigests; warnings around the answer.
  p = ParseImageProbe(
      "ref 1 Error: No such image: x\n"
      "name 0 WARN[0000] cgroup thing null " +
      kC + "\n");
  EXPECT_FALSE(p.by_ref.found);
  EXPECT_TRUE(p.by_ref.error.empty());
  EXPECT_TRUE(p.by_name.found);
  EXPECT_EQ(p.by_name.id, kC);

  p = ParseImageProbe("ref 1 Cannot connect to the Docker daemon at unix:///var/run/docker.sock\n");
  EXPECT_FALSE(p.by_ref.found);
  EXPECT_NE(p.by_ref.error.find("Cannot connect"), std::string::npos);

  p = ParseImageProbe("cli missing\n");
  EXPECT_FALSE(p.cli_found);

  // Round trip through the attributes the planner keeps.
  ImageProbe q = ImageProbe::FromJson(ParseImageProbe("ref 0 [] " + kC + "\n").ToJson());
  EXPECT_TRUE(q.by_ref.found);
  EXPECT_EQ(q.by_ref.id, kC);
}

// Where the engine's API answers (podman's service here), an image's
// inspect is read from it by fleet's installed probe: found (podman's ID in
// the CLI's form), missing (404), and an answer the API cannot give (a
// record it cannot read: 500) goes to the CLI, as does a node without the
// service.
TEST(ImageProbeTest, InspectThroughTheEnginesApi) {
  const testing_support::StubCli stub("image_api_test");
  const std::string& dir = stub.dir();
  ASSERT_TRUE(testing_engine::InstallBuiltProbe(dir)) << "run by meson, which sets FLEET_PROBE";
  stub.RecordingTool("podman", "echo 'Error: image not known' >&2; exit 125\n");
  const std::string ref = kRepo + "@" + kD;
  auto inspect = [&](const std::string& what) {
    const testing_support::ShellRun run =
        stub.Run(ImageInspectScript("podman", what), "XDG_RUNTIME_DIR=" + dir + "/xdg");
    return ParseImageInspect(run.exit_code, run.out);
  };
  auto cli_calls = [&] { return stub.Calls("podman"); };
  const std::string sock = dir + "/xdg/podman/podman.sock";
  {
    testing_engine::FakeEngineApi engine(
        sock, {{"/images/" + ref + "/json",
                {"200 OK", R"({"Id":")" + kC + R"(","RepoDigests":[")" + ref + R"("]})"}},
               {"/images/broken/json", {"500 Internal Server Error", R"({"message":"x"})"}}});
    ASSERT_TRUE(engine.ok());
    ImageLookup l = inspect(ref);
    EXPECT_TRUE(l.found) << l.error;
    EXPECT_EQ(l.id, kC);
    EXPECT_TRUE(HasRepoDigest(l.repo_digests, kD));
    l = inspect("sha256:" + std::string(64, 'e'));
    EXPECT_TRUE(l.tried);
    EXPECT_FALSE(l.found);
    EXPECT_EQ(l.error, "");
    EXPECT_EQ(cli_calls(), "");  // not one CLI start
    l = inspect("broken");
    EXPECT_FALSE(l.found);
    EXPECT_NE(cli_calls().find("image inspect --format"), std::string::npos);
    EXPECT_EQ(engine.requests(), 3);
  }
  unlink(sock.c_str());
  const ImageLookup l = inspect(ref);  // no service: the CLI
  EXPECT_FALSE(l.found);
  EXPECT_EQ(l.error, "");
  std::filesystem::remove_all(dir);
}

TEST(ImageProviderTest, ParseProbeReportsMissingCliAsError) {
  ImageProvider p;
  DesiredResource r;
  r.attributes = {{"ref", kRepo + "@" + kD}, {"cli", "podman"}};
  ActualResource a = p.ParseProbe(r, "", ListedFacts(kNoCli));
  EXPECT_NE(a.error.find("'podman' not found"), std::string::npos);
  a = p.ParseProbe(r, "", NodeFacts{});  // the node's probe did not list
  EXPECT_NE(a.error.find("did not list"), std::string::npos) << a.error;
  a = p.ParseProbe(r, "", ListedFacts(kMissing));
  EXPECT_TRUE(a.error.empty()) << a.error;
  EXPECT_FALSE(a.exists);
  a = p.ParseProbe(r, "", ListedFacts(HasByFleetTag()));
  EXPECT_TRUE(a.exists);
  a = p.ParseProbe(r, "",
                   ListedFacts("images=ls 1\nimage_out=Cannot connect to the Docker daemon at "
                               "unix:///var/run/docker.sock\n"));
  EXPECT_NE(a.error.find("`image ls` exited 1: Cannot connect"), std::string::npos) << a.error;
  // A floating ref reads its own fragment, and the listing for fleet's tags.
  r.attributes = {{"ref", kRepo + ":latest"}, {"cli", "podman"}};
  a = p.ParseProbe(r, "cli missing\n", ListedFacts(kMissing));
  EXPECT_NE(a.error.find("'podman' not found"), std::string::npos);
  a = p.ParseProbe(r, "ref 125 Error: x: image not known\n", ListedFacts(kMissing));
  EXPECT_TRUE(a.error.empty());
  EXPECT_FALSE(a.exists);
}

// ---- Expand and Diff

Manifest ThreeNodes(const std::string& ref, const std::string& source) {
  Manifest m;
  for (const char* n : {"a", "b", "c"}) {
    NodeSpec s;
    s.name = n;
    s.container_cli = "podman";
    m.nodes[n] = s;
  }
  ImageSpec img;
  img.name = "vllm";
  img.ref = ref;
  img.source = source;
  img.nodes = {"a", "b", "c"};
  m.images["vllm"] = img;
  return m;
}

TEST(ImageProviderTest, ExpandScopesDeploymentNodesAndListedNodes) {
  Manifest m = ThreeNodes(kRepo + "@" + kD, "registry");
  m.images["vllm"].nodes = {"c"};
  DeploymentSpec d;
  d.name = "qwen";
  d.image = "vllm";
  d.nodes = {"a"};
  m.deployments["qwen"] = d;
  ImageProvider p;
  std::vector<DesiredResource> rs = p.Expand(m);
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].address, "image.vllm@a");
  EXPECT_EQ(rs[0].depends_on, std::vector<std::string>{"node.a"});
  EXPECT_EQ(rs[0].attributes["wanted_by"][0], "deployment qwen");
  EXPECT_EQ(rs[1].address, "image.vllm@c");
  EXPECT_EQ(rs[1].attributes["digest"], kD);
}

struct Fixture {
  Manifest m;
  ImageProvider p;
  std::map<std::string, NodeFacts> facts;
  std::map<std::string, ActualResource> actual;
  std::vector<DesiredResource> desired;

  Fixture(const std::string& ref, const std::string& source,
          const std::map<std::string, std::string>& outputs)
      : m(ThreeNodes(ref, source)) {
    desired = p.Expand(m);
    for (const DesiredResource& r : desired) {
      NodeFacts f;
      if (outputs.count(r.node)) f = ListedFacts(outputs.at(r.node));
      if (!f.reachable) f.unreachable_reason = "connection refused";
      facts[r.node] = f;
      if (f.reachable) actual[r.address] = p.ParseProbe(r, outputs.at(r.node), f);
    }
  }
  PlanChange Diff(const std::string& node, const ResourceRecord* rec = nullptr) {
    for (const DesiredResource& r : desired)
      if (r.node == node) {
        DiffContext ctx{facts[node], &facts, &actual, &m};
        ActualResource a;
        if (auto it = actual.find(r.address); it != actual.end()) a = it->second;
        return p.Diff(r, a, rec, ctx);
      }
    ADD_FAILURE() << "no resource on " << node;
    return {};
  }
};

TEST(ImageDiffTest, PresentByDigestIsNoop) {
  Fixture f(kRepo + "@" + kD, "registry", {{"a", HasByDigest()}, {"b", kMissing}, {"c", kMissing}});
  PlanChange c = f.Diff("a");
  EXPECT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.action, Action::kNoop);
  EXPECT_EQ(c.before["image_id"], kC);
}

TEST(ImageDiffTest, MissingWithRegistrySourcePullsByDigest) {
  Fixture f(kRepo + "@" + kD, "registry", {{"a", HasByDigest()}, {"b", kMissing}, {"c", kMissing}});
  PlanChange c = f.Diff("b");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.detail["op"], "pull");
  EXPECT_EQ(c.detail["config"], kC);  // to check the pull against
  EXPECT_EQ(c.reasons.front(), "digest " + kD + " not on node");
  EXPECT_EQ(c.after["digest"], kD);
}

TEST(ImageDiffTest, CopiedImageFoundByFleetTagWithTheRightConfigIsPresent) {
  // a pulled it (knows D -> C); b got a copy (only the config digest survives).
  Fixture f(kRepo + "@" + kD, "peers",
            {{"a", HasByDigest()}, {"b", HasByFleetTag()}, {"c", kMissing}});
  EXPECT_EQ(f.Diff("b").action, Action::kNoop);
}

TEST(ImageDiffTest, FleetTagOnAnotherImageIsRestaged) {
  Fixture f(kRepo + "@" + kD, "peers",
            {{"a", HasByDigest()}, {"b", HasByFleetTag(std::string(64, 'e'))}, {"c", kMissing}});
  PlanChange c = f.Diff("b");
  EXPECT_EQ(c.action, Action::kUpdate);
  EXPECT_EQ(c.detail["op"], "copy");
  EXPECT_EQ(c.detail["from"], "a");
  EXPECT_EQ(c.before["image_id"], kX);
}

TEST(ImageDiffTest, CopyOnlyHoldersUseTheRecordedConfigDigest) {
  // Nobody has D any more, b has the copy: the record vouches for its ID.
  Fixture f(kRepo + "@" + kD, "peers", {{"a", kMissing}, {"b", HasByFleetTag()}, {"c", kMissing}});
  ResourceRecord rec;
  rec.attributes = {{"digest", kD}, {"image_id", kC}};
  PlanChange c = f.Diff("b", &rec);
  EXPECT_EQ(c.action, Action::kNoop);
  rec.attributes["image_id"] = kX;  // the record says another image: not it
  EXPECT_EQ(f.Diff("b", &rec).action, Action::kUpdate);
  // No record, no digest holder: trusted by fleet's tag, and the plan says so.
  c = f.Diff("b");
  EXPECT_EQ(c.action, Action::kNoop);
  ASSERT_FALSE(c.reasons.empty());
  EXPECT_NE(c.reasons[0].find("only"), std::string::npos);
  // c copies from b (the only holder).
  c = f.Diff("c");
  EXPECT_EQ(c.detail["from"], "b");
}

TEST(ImageDiffTest, PeersPickAHolderAndSpreadTargets) {
  Fixture f(kRepo + "@" + kD, "peers", {{"a", HasByDigest()}, {"b", kMissing}, {"c", kMissing}});
  PlanChange b = f.Diff("b"), c = f.Diff("c");
  EXPECT_EQ(b.detail["op"], "copy");
  EXPECT_EQ(b.detail["from"], "a");
  EXPECT_EQ(c.detail["from"], "a");
  EXPECT_EQ(b.detail["config"], kC);
  EXPECT_NE(b.summary.find("copy from a"), std::string::npos);
}

TEST(ImageDiffTest, PeersWithNoHolderIsAPlanErrorNamingImageAndNodes) {
  Fixture f(kRepo + "@" + kD, "peers", {{"a", kMissing}, {"b", kMissing}, {"c", kMissing}});
  PlanChange c = f.Diff("b");
  EXPECT_NE(c.error.find("image vllm"), std::string::npos) << c.error;
  EXPECT_NE(c.error.find("a, b, c"), std::string::npos) << c.error;
}

TEST(ImageDiffTest, NamedSourceNodeMustHaveItAndBeUp) {
  Fixture f(kRepo + "@" + kD, "node:a", {{"a", kMissing}, {"b", kMissing}, {"c", kMissing}});
  EXPECT_NE(f.Diff("b").error.find("source node a does not have it"), std::string::npos);
  EXPECT_NE(f.Diff("a").error.find("its own source"), std::string::npos);

  Fixture off(kRepo + "@" + kD, "node:a", {{"b", kMissing}, {"c", kMissing}});
  EXPECT_NE(off.Diff("b").error.find("not reachable"), std::string::npos);

  Fixture ok(kRepo + "@" + kD, "node:c", {{"a", kMissing}, {"b", kMissing}, {"c", HasByDigest()}});
  PlanChange c = ok.Diff("a");
  EXPECT_TRUE(c.error.empty()) << c.error;
  EXPECT_EQ(c.detail["from"], "c");
}

TEST(ImageDiffTest, UnreachableTargetIsPlannedAndCheckedAtApply) {
  Fixture f(kRepo + "@" + kD, "registry", {{"a", HasByDigest()}, {"c", kMissing}});
  PlanChange c = f.Diff("b");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_NE(c.reasons.front().find("checked again at apply"), std::string::npos);
}

TEST(ImageDiffTest, ProbeErrorIsAPlanError) {
  Fixture f(kRepo + "@" + kD, "registry", {{"a", kNoCli}, {"b", kMissing}, {"c", kMissing}});
  EXPECT_NE(f.Diff("a").error.find("not found on the node's PATH"), std::string::npos);
}

TEST(ImageDiffTest, FloatingTagSaysWhatItIsOnEachNode) {
  const std::string tag = kRepo + ":latest";
  Manifest m = ThreeNodes(tag, "registry");
  // Without allow_floating the diff refuses (the loader refuses first).
  {
    Fixture f(tag, "registry", {{"a", kMissing}, {"b", kMissing}, {"c", kMissing}});
    EXPECT_NE(f.Diff("a").error.find("not pinned"), std::string::npos);
  }
  Fixture f(tag, "registry",
            {{"a", "ref 0 [\"" + kRepo + "@" + kD + "\"] " + std::string(64, 'c') + "\n"},
             {"b", "ref 0 [\"" + kRepo + "@" + kX + "\"] " + std::string(64, 'e') + "\n"},
             {"c", "ref 125 Error: image not known\n"}});
  for (DesiredResource& r : f.desired) r.attributes["allow_floating"] = true;
  PlanChange a = f.Diff("a");
  EXPECT_EQ(a.action, Action::kNoop);
  ASSERT_GE(a.reasons.size(), 2u);
  EXPECT_NE(a.reasons[0].find("FLOATING TAG"), std::string::npos);
  EXPECT_NE(a.reasons[0].find(kD), std::string::npos);  // the digest it resolves to here
  EXPECT_NE(a.reasons[1].find("disagree"), std::string::npos);
  PlanChange c = f.Diff("c");
  EXPECT_EQ(c.action, Action::kCreate);
  EXPECT_EQ(c.detail["op"], "pull");
}

// What a state does not know (issue 12).

std::string Tagged(const std::string& digest, const std::string& id,
                   const std::string& repo = kRepo) {
  return Img(id, {}, {repo + ":sha256-" + digest.substr(7)});
}
std::string Staged(const std::string& digest, const std::string& id,
                   const std::string& repo = kRepo) {
  return Img(id, {}, {repo + ":staged-sha256-" + digest.substr(7)});
}

TEST(ImageListingTest, FleetTaggedImagesKeepThroughJson) {
  const ImageListing l =
      ParseImageListing("images=inspect 0\n" + Tagged(kD, kC) + Staged(kD, kC) +
                        Img(kC, {}, {kRepo + ":latest", "r:sha256-short"}) + HasByDigest());
  ASSERT_EQ(l.images.size(), 1u);  // one image, its lines merged
  const ImageProbe p = ImageProbeFromListing(l, ParseImageRef(kRepo + "@" + kD));
  ASSERT_EQ(p.fleet_tagged.size(), 1u);  // only fleet's tag, whole
  EXPECT_EQ(p.fleet_tagged[0].name, kRepo + ":sha256-" + std::string(64, 'd'));
  EXPECT_EQ(p.fleet_tagged[0].id, kC);
  EXPECT_TRUE(p.fleet_tagged[0].staged);  // fleet pulled or copied it
  EXPECT_FALSE(FleetTaggedIn(ParseImageListing("images=inspect 0\n" + Tagged(kD, kC)))[0].staged);
  EXPECT_EQ(ParseImageRef(kRepo + "@" + kD).StagedTag(),
            kRepo + ":staged-sha256-" + std::string(64, 'd'));
  const ImageProbe q = ImageProbe::FromJson(p.ToJson());
  ASSERT_EQ(q.fleet_tagged.size(), 1u);
  EXPECT_EQ(q.fleet_tagged[0].id, kC);
  EXPECT_TRUE(q.fleet_tagged[0].staged);
  const ImageListing back = ImageListing::FromJson(l.ToJson());
  ASSERT_EQ(back.images.size(), 1u);
  EXPECT_EQ(back.images[0].tags, l.images[0].tags);
  EXPECT_EQ(back.images[0].repo_digests, l.images[0].repo_digests);
  EXPECT_EQ(DigestOfFleetTag(kRepo + ":sha256-" + std::string(64, 'd')), kD);
  EXPECT_EQ(DigestOfFleetTag(kRepo + ":v1"), "");
}

TEST(ImageUnrecordedTest, PresentWithFleetsTagButNoRecordSaysAdopt) {
  Fixture f(kRepo + "@" + kD, "registry",
            {{"a", Tagged(kD, kC) + HasByDigest()}, {"b", HasByDigest()}, {"c", kMissing}});
  const std::set<std::string> none;
  auto diff = [&](const std::string& node, const std::set<std::string>& recorded) {
    for (const DesiredResource& r : f.desired)
      if (r.node == node)
        return f.p.Diff(
            r, f.actual[r.address], nullptr,
            DiffContext{f.facts[node], &f.facts, &f.actual, &f.m, false, nullptr, &recorded});
    return PlanChange();
  };
  PlanChange c = diff("a", none);
  EXPECT_EQ(c.action, Action::kNoop);
  ASSERT_EQ(c.reasons.size(), 1u);
  EXPECT_NE(c.reasons[0].find("carries fleet's tag " + kRepo + ":sha256-"), std::string::npos)
      << c.reasons[0];
  EXPECT_NE(c.reasons[0].find("`fleet state adopt image.vllm@a` records it (by registry digest"),
            std::string::npos)
      << c.reasons[0];
  EXPECT_TRUE(diff("a", {"image.vllm@a"}).reasons.empty());  // recorded: nothing said
  EXPECT_TRUE(diff("b", none).reasons.empty());  // the operator's own image: nothing said
}

TEST(ImageUnrecordedTest, AdoptRecordsAPresentImageAndRefusesAMissingOne) {
  Fixture f(kRepo + "@" + kD, "peers",
            {{"a", Tagged(kD, kC) + Staged(kD, kC) + HasByDigest()},
             {"b", Tagged(kD, kC) + HasByFleetTag()},
             {"c", kMissing}});
  auto adopt = [&](const std::string& node) {
    for (const DesiredResource& r : f.desired)
      if (r.node == node)
        return f.p.Adopt(r, f.actual[r.address],
                         DiffContext{f.facts[node], &f.facts, &f.actual, &f.m}, nullptr);
    return Result<nlohmann::json>::Error("no resource");
  };
  Result<nlohmann::json> a = adopt("a");
  ASSERT_TRUE(a.ok()) << a.status().message();
  const ImageRecord ra = a->get<ImageRecord>();
  EXPECT_EQ(ra.image_id, kC);
  EXPECT_EQ(ra.digest, kD);
  EXPECT_EQ(ra.via, kViaAdopted);  // fleet's tag: fleet staged it, --purge may remove it
  // b: found by fleet's tag, its config digest checked against a's.
  Result<nlohmann::json> b = adopt("b");
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_EQ(b->get<ImageRecord>().found, "by fleet's tag");
  EXPECT_EQ(b->get<ImageRecord>().via, kViaPresent);  // tagged, but not staged by fleet
  Result<nlohmann::json> c = adopt("c");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("the plan would copy from"), std::string::npos)
      << c.status().message();
}

TEST(ImageUnrecordedTest, AFleetTaggedImageNothingDeclaresIsNamedAndPurged) {
  const std::string kOld = "sha256:" + std::string(64, 'a');
  const std::string kOldId = std::string(64, 'b');
  Fixture f(kRepo + "@" + kD, "registry",
            {{"a", Tagged(kD, kC) + Tagged(kOld, kOldId, "r/old") + Staged(kOld, kOldId, "r/old") +
                       Tagged(kX, std::string(64, 'f'), "r/found") + HasByDigest()},
             {"b", kMissing},
             {"c", kMissing}});
  std::set<std::string> recorded;
  DiffContext ctx{f.facts["a"], &f.facts, &f.actual, &f.m, false, nullptr, &recorded};
  std::vector<PlanChange> found = f.p.DiffUnrecorded("a", ctx);
  ASSERT_EQ(found.size(), 2u);  // not the declared one
  EXPECT_EQ(found[0].address, "image.found-eeeeeeeeeeee@a");
  EXPECT_NE(found[0].reasons[0].find("fleet found it in place"), std::string::npos)
      << found[0].reasons[0];
  EXPECT_EQ(found[1].address, "image.old-aaaaaaaaaaaa@a");
  EXPECT_EQ(found[1].action, Action::kNoop);
  EXPECT_NE(found[1].reasons[0].find("fleet staged it, and `fleet apply --purge` removes it"),
            std::string::npos)
      << found[1].reasons[0];
  ctx.purge = true;
  found = f.p.DiffUnrecorded("a", ctx);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].action, Action::kNoop);  // not staged by fleet: never removed
  EXPECT_EQ(found[1].action, Action::kDelete);
  EXPECT_EQ(found[1].detail.get<ImageStep>().image_id, "sha256:" + kOldId);
  // The state knows that image under another name (a record of another
  // digest's resource): not unknown.
  ResourceRecord under_other_name;
  under_other_name.address = "image.vllm-old@a";
  under_other_name.type = "image";
  under_other_name.node = "a";
  ImageRecord known;
  known.image_id = "sha256:" + kOldId;
  under_other_name.attributes = known;
  const std::vector<ResourceRecord> records = {under_other_name};
  ctx.records = &records;
  found = f.p.DiffUnrecorded("a", ctx);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].address, "image.found-eeeeeeeeeeee@a");
  ctx.records = nullptr;
  recorded.insert("image.old-aaaaaaaaaaaa@a");  // a record: DiffOrphan's call
  recorded.insert("image.found-eeeeeeeeeeee@a");
  EXPECT_TRUE(f.p.DiffUnrecorded("a", ctx).empty());
  DiffContext b_ctx{f.facts["b"], &f.facts, &f.actual, &f.m, false, nullptr, &recorded};
  EXPECT_TRUE(f.p.DiffUnrecorded("b", b_ctx).empty());  // ctx.facts: the node's own
  // The node's image listing names fleet's images whatever the probes of
  // its declared images saw (a node may declare none).
  const NodeFacts b_facts =
      ListedFacts(Tagged(kOld, kOldId, "r/old") + Staged(kOld, kOldId, "r/old"));
  DiffContext on_b{b_facts, &f.facts, &f.actual, &f.m, true, nullptr, &recorded};
  found = f.p.DiffUnrecorded("b", on_b);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].address, "image.old-aaaaaaaaaaaa@b");
  EXPECT_EQ(found[0].action, Action::kDelete);
}

TEST(ImageProviderTest, DestroyKeepsImages) {
  Fixture f(kRepo + "@" + kD, "registry", {{"a", HasByDigest()}, {"b", kMissing}, {"c", kMissing}});
  DiffContext ctx{f.facts["a"], &f.facts, &f.actual, &f.m};
  PlanChange c = f.p.DiffDestroy(f.desired[0], f.actual["image.vllm@a"], nullptr, ctx);
  EXPECT_EQ(c.action, Action::kNoop);
  EXPECT_NE(c.summary.find("kept"), std::string::npos);
}

// ---- steps' parsing and the run argv

TEST(ImageStepsTest, ParsesWhatLoadSaysItLoaded) {
  EXPECT_EQ(ParseLoadedNames("Getting image source signatures\nLoaded image: sha256:" +
                             std::string(64, 'c') + "\n"),
            std::vector<std::string>{kC});
  EXPECT_EQ(ParseLoadedNames("Loaded image(s): a/b:1, c/d:2\n"),
            (std::vector<std::string>{"a/b:1", "c/d:2"}));
  EXPECT_EQ(ParseLoadedNames("Loaded image ID: " + kC + "\n"), std::vector<std::string>{kC});
  EXPECT_TRUE(ParseLoadedNames("Error: payload does not match\n").empty());
}

TEST(ImageStepsTest, NamesForCopy) {
  EXPECT_EQ(NamesForCopy(ParseImageRef(kRepo + "@" + kD)),
            std::vector<std::string>{kRepo + ":sha256-" + std::string(64, 'd')});
  EXPECT_EQ(NamesForCopy(ParseImageRef(kRepo + ":v1@" + kD)).size(), 2u);
  EXPECT_EQ(NamesForCopy(ParseImageRef(kRepo + ":v1")), std::vector<std::string>{kRepo + ":v1"});
}

TEST(CliErrorTest, KeepsTheCauseNotTheProgress) {
  EXPECT_EQ(CliErrorText("Trying to pull r@sha256:x...\n"
                         "Error: initializing source docker://r: pinging container registry "
                         "127.0.0.1:5000: connect: connection refused\n"),
            "Error: initializing source docker://r: pinging container registry 127.0.0.1:5000: "
            "connect: connection refused");
  EXPECT_EQ(CliErrorText("Error: payload does not match any of the supported image formats:\n"
                         " * oci: open index.json: not a directory\n"
                         " * docker-archive: unexpected EOF\n"),
            "Error: payload does not match any of the supported image formats: / * oci: open "
            "index.json: not a directory / * docker-archive: unexpected EOF");
  // ENOSPC first, wherever podman's format guesses put it (a full image storage).
  EXPECT_EQ(CliErrorText("Error: payload does not match any of the supported image formats:\n"
                         " * oci: open index.json: not a directory\n"
                         " * docker-archive: writing blob: ApplyLayer stderr: write /payload: no "
                         "space left on device exit status 1\n"
                         " * dir: open manifest.json: not a directory\n"),
            "no space left on device: docker-archive: writing blob: ApplyLayer stderr: write "
            "/payload: no space left on device exit status 1");
  EXPECT_TRUE(ContainsNoSpace("write /x: No space left on device"));
  EXPECT_FALSE(ContainsNoSpace("no space left"));
  // docker 20.10's load on a full data root, and its tag (tests/faults/disk.sh).
  EXPECT_EQ(CliErrorText("Error processing tar file(exit status 1): write /payload: no space left "
                         "on device\n"),
            "no space left on device: Error processing tar file(exit status 1): write /payload: "
            "no space left on device");
  EXPECT_EQ(NoSpaceFix("Error response from daemon: write /d/image/overlay2/"
                       ".tmp-repositories.json1: no space left on device",
                       "docker", "dgx3"),
            "; the image storage of docker on dgx3 is full: free space there and apply again");
  EXPECT_EQ(NoSpaceFix("Error: no such image", "podman", "dgx3"), "");
  EXPECT_EQ(CliErrorText("a\nb\nc\nd\n"), "b / c / d");
  EXPECT_EQ(CliErrorText(std::string(1000, 'x'), 10), "xxxxxxxxxx...");
  EXPECT_EQ(CliErrorText(""), "");
}

TEST(RunArgsTest, NeverPulls) {
  std::vector<std::string> argv =
      RunArgsNoPull("docker", {"--pull=always", "-d", "--pull", "missing", "--name", "q"}, kC,
                    {"serve", "--port", "30000"});
  EXPECT_EQ(argv, (std::vector<std::string>{"docker", "run", "--pull=never", "-d", "--name", "q",
                                            kC, "serve", "--port", "30000"}));
  EXPECT_EQ(RunArgsNoPull("podman", {}, kC, {}),
            (std::vector<std::string>{"podman", "run", "--pull=never", kC}));
}

}  // namespace
}  // namespace fleet
