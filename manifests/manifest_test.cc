#include "manifests/manifest.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "tests/support/expect_diag.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kTestdata[] = FLEET_MANIFESTS_TESTDATA;
constexpr char kDigest[] = "8d13908715809a2c974703ebdef73a03f3e854ceee241693788453a614abadc3";
constexpr char kRevision[] = "f751b8828ef23efd613b30602303a90e4e09e42d";

using testing_support::Dump;

// A scratch manifests repo with the valid fixture's recipes.
class TempRepo {
 public:
  TempRepo() : tmp_("fleet-manifest-test") {
    fs::copy(fs::path(kTestdata) / "valid" / "recipes", fs::path(dir()) / "recipes",
             fs::copy_options::recursive);
  }
  const std::string& dir() const { return tmp_.path(); }
  void Write(const std::string& relative, const std::string& text) const {
    tmp_.Write(relative, text);
  }

 private:
  testing_support::TempDir tmp_;
};

struct Loaded {
  bool ok = false;
  Manifest manifest;
  Diagnostics diags;
};

Loaded LoadYaml(const std::string& yaml) {
  TempRepo repo;
  repo.Write("fleet.yaml", yaml);
  Loaded out;
  out.ok = LoadManifest(repo.dir(), &out.manifest, &out.diags);
  return out;
}

// A minimal valid manifest; tests append to it (line numbers are noted).
constexpr char kBase[] =
    "version: 1\n"              // 1
    "fleet: lab\n"              // 2
    "nodes:\n"                  // 3
    "  dgx1:\n"                 // 4
    "    address: dgx1.lan\n"   // 5
    "  dgx2:\n"                 // 6
    "    address: dgx2.lan\n";  // 7

TEST(ManifestTest, BaseIsValid) {
  const Loaded l = LoadYaml(kBase);
  EXPECT_TRUE(l.ok) << Dump(l.diags);
  EXPECT_TRUE(l.diags.empty()) << Dump(l.diags);
}

TEST(ManifestTest, ValidRepoLoadsEveryField) {
  setenv("HOME", "/home/tester", 1);
  const std::string root = std::string(kTestdata) + "/valid";
  Manifest m;
  Diagnostics diags;
  ASSERT_TRUE(LoadManifest(root, &m, &diags)) << Dump(diags);
  EXPECT_TRUE(diags.empty()) << Dump(diags);

  EXPECT_EQ(m.root_dir, root);
  EXPECT_EQ(m.version, 1);
  EXPECT_EQ(m.fleet, "spark-lab");
  EXPECT_EQ(m.state.backend, "local");
  EXPECT_EQ(m.state.path, root + "/.fleet/state.json");
  EXPECT_EQ(m.ssh.user, "kilork");
  EXPECT_EQ(m.ssh.identity, "/home/tester/.ssh/id_ed25519");
  EXPECT_EQ(m.ssh.known_hosts, root + "/keys/known_hosts");
  EXPECT_EQ(m.ssh.port, 22);
  EXPECT_EQ(m.ssh.connect_timeout_s, 15);
  EXPECT_TRUE(m.power.present);
  EXPECT_EQ(m.power.kind, "home-assistant");
  EXPECT_EQ(m.power.url, "https://ha.lan:8123");
  EXPECT_EQ(m.power.token_env, "HA_TOKEN");
  EXPECT_EQ(m.power.loc.ToString(), "fleet.yaml:7:1");

  ASSERT_EQ(m.nodes.size(), 5u);
  const NodeSpec& dgx1 = m.nodes.at("dgx1");
  EXPECT_EQ(dgx1.name, "dgx1");
  EXPECT_EQ(dgx1.address, "dgx1.lan");
  // The node's ssh block overrides user and port; the rest is the fleet's.
  EXPECT_EQ(dgx1.ssh.user, "ops");
  EXPECT_EQ(dgx1.ssh.port, 2222);
  EXPECT_EQ(dgx1.ssh.identity, "/home/tester/.ssh/id_ed25519");
  EXPECT_EQ(dgx1.ssh.known_hosts, root + "/keys/known_hosts");
  EXPECT_EQ(dgx1.ssh.connect_timeout_s, 15);
  EXPECT_EQ(dgx1.hostname, "dgx1");
  EXPECT_TRUE(dgx1.power.present);
  EXPECT_EQ(dgx1.power.switch_entity, "switch.dgx1");
  EXPECT_EQ(dgx1.power.state, "on");
  EXPECT_EQ(dgx1.power.loc.ToString(), "fleet.yaml:13:5");
  EXPECT_EQ(dgx1.container_cli, "docker");
  EXPECT_EQ(dgx1.display_ram, "default");
  EXPECT_EQ(dgx1.hf_cache, "/home/kilork/hf-local/hub");
  EXPECT_EQ(dgx1.sysfs, "/sys");
  EXPECT_EQ(dgx1.dev, "/dev");
  EXPECT_EQ(dgx1.poweroff_command, "sudo -n systemctl poweroff");
  EXPECT_EQ(dgx1.loc.ToString(), "fleet.yaml:9:3");

  const NodeSpec& dgx2 = m.nodes.at("dgx2");
  EXPECT_EQ(dgx2.address, "10.0.0.2");
  EXPECT_EQ(dgx2.ssh.user, "kilork");
  EXPECT_EQ(dgx2.ssh.port, 22);
  EXPECT_EQ(dgx2.hostname, "");
  EXPECT_EQ(dgx2.power.state, "on");
  EXPECT_EQ(dgx2.container_cli, "podman");
  EXPECT_EQ(dgx2.display_ram, "unlocked");
  // Node-side paths keep `~`: it is the node user's home, not ours.
  EXPECT_EQ(dgx2.hf_cache, "~/.cache/huggingface/hub");
  const NodeSpec& dgx5 = m.nodes.at("dgx5");
  EXPECT_EQ(dgx5.hf_cache, "~/hf-local/hub");
  EXPECT_EQ(dgx5.poweroff_command, "sudo -n /sbin/poweroff");
  EXPECT_EQ(m.nodes.at("dgx3").power.state, "off");
  const NodeSpec& ctl = m.nodes.at("ctl");
  EXPECT_EQ(ctl.address, "local");
  EXPECT_FALSE(ctl.power.present);

  ASSERT_EQ(m.stores.size(), 1u);
  const StoreSpec& nas = m.stores.at("nas");
  EXPECT_EQ(nas.path, "/mnt/nas/ai/huggingface/hub");
  EXPECT_EQ(nas.nodes, (std::vector<std::string>{"dgx1", "dgx2"}));

  ASSERT_EQ(m.images.size(), 2u);
  const ImageSpec& b12x = m.images.at("b12x");
  EXPECT_EQ(b12x.ref, std::string("eugr/spark-vllm-b12x@sha256:") + kDigest);
  EXPECT_EQ(b12x.source, "registry");
  EXPECT_FALSE(b12x.allow_floating);
  EXPECT_TRUE(b12x.nodes.empty());
  const ImageSpec& exl3 = m.images.at("exl3");
  EXPECT_EQ(exl3.source, "node:dgx1");
  EXPECT_EQ(exl3.nodes, std::vector<std::string>{"ctl"});

  ASSERT_EQ(m.models.size(), 2u);
  const ModelSpec& qwen = m.models.at("qwen38");
  EXPECT_EQ(qwen.repo, "azampatti/Qwen3.8-Flash-Next-125B-A5B-INT4-AutoRound");
  EXPECT_EQ(qwen.revision, kRevision);
  EXPECT_EQ(qwen.store, "local");
  EXPECT_EQ(qwen.source, "node:dgx5");
  EXPECT_EQ(qwen.nodes, std::vector<std::string>{"dgx1"});
  const ModelSpec& dsv41 = m.models.at("dsv41");
  EXPECT_EQ(dsv41.store, "nas");
  EXPECT_EQ(dsv41.source, "hub");

  ASSERT_EQ(m.deployments.size(), 2u);
  const DeploymentSpec& q = m.deployments.at("qwen38");
  EXPECT_EQ(q.recipe_path, "recipes/qwen38-flash-next-int4.toml");
  EXPECT_EQ(q.recipe.file, root + "/recipes/qwen38-flash-next-int4.toml");
  EXPECT_EQ(q.recipe.model, "");
  ASSERT_FALSE(q.recipe.args.empty());
  EXPECT_EQ(q.recipe.args[0], "/workspace/flashnext/model");
  EXPECT_EQ(q.recipe.env.at("VLLM_MARLIN_USE_ATOMIC_ADD"), "1");
  EXPECT_EQ(q.recipe.extra_mounts.size(), 2u);
  EXPECT_EQ(q.nodes, std::vector<std::string>{"dgx5"});
  EXPECT_EQ(q.image, "b12x");
  EXPECT_EQ(q.model, "qwen38");
  EXPECT_EQ(q.display_ram, "default");
  EXPECT_EQ(q.port, 30000);
  EXPECT_EQ(q.health.path, "/v1/models");
  EXPECT_EQ(q.health.timeout_s, 1800);
  const DeploymentSpec& e = m.deployments.at("exl3");
  EXPECT_EQ(e.nodes, (std::vector<std::string>{"dgx1", "dgx2"}));
  EXPECT_EQ(e.display_ram, "unlocked");
  EXPECT_EQ(e.health.path, "/health");  // default
  EXPECT_EQ(e.health.timeout_s, 7200);
  EXPECT_EQ(e.recipe.cpus, "6");
}

TEST(ManifestTest, UnknownKeyWithDidYouMean) {
  const Loaded l = LoadYaml(std::string(kBase) + "  dgx3:\n    adress: dgx3.lan\n");
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:5: error: unknown key 'adress' in node 'dgx3'; did "
              "you mean "
              "'address'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:3: error: node 'dgx3' has no 'address' (required: "
              "a host name, an IP "
              "or local)");
}

TEST(ManifestTest, UnknownKeyWithoutCloseNameListsExpected) {
  const Loaded l = LoadYaml(std::string(kBase) + "frobnicate: 1\nstroes: {}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:1: error: unknown key 'frobnicate' in the top "
              "level; expected one of: "
              "version, fleet, state, ssh, power, hub, nodes, stores, images, "
              "models, deployments, defaults, sync, gateways, bench");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:1: error: unknown key 'stroes' in the top level; "
              "did you mean "
              "'stores'?");
  EXPECT_EQ(l.diags.size(), 2u) << Dump(l.diags);
}

TEST(ManifestTest, AllErrorsAreCollected) {
  const Loaded l = LoadYaml(
      "version: 1\n"
      "fleet: lab\n"
      "nodes:\n"
      "  dgx1: {adress: a, container_cli: dokcer}\n"
      "  dgx2: {address: b, display_ram: locked, ssh: {prot: 22}}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_EQ(l.diags.size(), 5u) << Dump(l.diags);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:4:10: error: unknown key 'adress' in node 'dgx1'; "
              "did you mean "
              "'address'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:4:36: error: 'container_cli' in node 'dgx1' must be "
              "docker or podman, "
              "got 'dokcer'; did you mean 'docker'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:5:35: error: 'display_ram' in node 'dgx2' must be "
              "default or unlocked, "
              "got 'locked'; did you mean 'unlocked'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:5:49: error: unknown key 'prot' in node 'dgx2' ssh; "
              "did you mean "
              "'port'?");
}

TEST(ManifestTest, WrongTypes) {
  const Loaded l = LoadYaml(
      "version: 1\n"
      "fleet: lab\n"
      "ssh: {port: abc, connect_timeout: soon}\n"
      "nodes:\n"
      "  dgx1: dgx1.lan\n"
      "  dgx2:\n"
      "    address: [a, b]\n"
      "    ssh: {port: 70000}\n"
      "stores:\n"
      "  nas: {path: /nas, nodes: dgx2}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:3:13: error: 'port' in ssh must be an integer "
              "1-65535, got the string "
              "'abc'");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:3:35: error: 'connect_timeout' in ssh must be a "
              "duration such as 10s "
              "or 1m (a plain number is seconds), got 'soon'");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:5:9: error: node 'dgx1' must be a map (key: value "
              "pairs), got the "
              "string 'dgx1.lan'");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:7:14: error: 'address' in node 'dgx2' must be a "
              "string, got a list");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:17: error: 'port' in node 'dgx2' ssh 70000 is out "
              "of range 1-65535");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:10:28: error: 'nodes' in store 'nas' must be a list, "
              "got the string "
              "'dgx2'; write [dgx2]");
}

TEST(ManifestTest, MissingRequiredFields) {
  const Loaded l = LoadYaml("nodes:\n  dgx1:\n    address:\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:1:1: error: fleet.yaml has no 'version' (required: "
              "version: 1)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:1:1: error: the top level has no 'fleet' (required: "
              "the fleet's name)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:3:5: error: 'address' in node 'dgx1' is empty "
              "(required: a host name, "
              "an IP or local)");
  const Loaded v = LoadYaml(std::string(kBase) + "version: 2\n");
  EXPECT_DIAG(v.diags,
              "fleet.yaml:8:1: error: duplicate key 'version' in the top level "
              "(first at "
              "fleet.yaml:1:1); YAML keeps only one of them: remove one");
  const Loaded v2 = LoadYaml("version: 2\nfleet: x\nnodes: {a: {address: a}}\n");
  EXPECT_DIAG(v2.diags,
              "fleet.yaml:1:10: error: version 2 is not supported; this fleet "
              "reads version: 1");
}

TEST(ManifestTest, DuplicateKeys) {
  const Loaded l =
      LoadYaml(std::string(kBase) + "    address: other.lan\n  dgx1:\n    address: x\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:5: error: duplicate key 'address' in node 'dgx2' (first at "
              "fleet.yaml:7:5); YAML keeps only one of them: remove one");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:3: error: duplicate key 'dgx1' in nodes (first at "
              "fleet.yaml:4:3); "
              "YAML keeps only one of them: remove one");
  EXPECT_EQ(l.manifest.nodes.at("dgx2").address, "dgx2.lan");  // the first one
}

constexpr char kDeployBase[] =
    "version: 1\n"                                     // 1
    "fleet: lab\n"                                     // 2
    "nodes:\n"                                         // 3
    "  dgx1: {address: dgx1.lan}\n"                    // 4
    "  dgx2: {address: dgx2.lan}\n"                    // 5
    "stores:\n"                                        // 6
    "  nas: {path: /mnt/nas, nodes: [dgx1, dgx2]}\n";  // 7

std::string Image(const std::string& name, const std::string& ref, const std::string& extra = "") {
  return "  " + name + ": {ref: \"" + ref + "\"" + extra + "}\n";
}

TEST(ManifestTest, DanglingReferencesWithDidYouMean) {
  const std::string yaml = std::string(kDeployBase) + "images:\n"  // 8
                           + Image("b12x", std::string("eugr/b12x@sha256:") + kDigest,
                                   ", nodes: [dgx3]") +  // 9
                           Image("exl3", std::string("x/exl3@sha256:") + kDigest,
                                 ", source: node:dgx7") +  // 10
                           "models:\n"                     // 11
                           "  qwen38: {repo: a/q, revision: " +
                           kRevision +
                           ", store: nsa}\n"  // 12
                           "  dsv41: {repo: a/d, revision: " +
                           kRevision +
                           ", source: store:nsa}\n"                             // 13
                           "deployments:\n"                                     // 14
                           "  qwen38:\n"                                        // 15
                           "    recipe: recipes/qwen38-flash-next-int4.toml\n"  // 16
                           "    nodes: [dgx1, dgx9]\n"                          // 17
                           "    image: b12y\n"                                  // 18
                           "    model: qwen83\n"                                // 19
                           "    port: 30000\n";                                 // 20
  const Loaded l = LoadYaml(yaml);
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:108: error: image 'b12x': node 'dgx3' is not "
              "defined under nodes: "
              "(defined: dgx1, dgx2)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:10:105: error: 'source' in image 'exl3': node 'dgx7' "
              "is not defined "
              "under nodes: (defined: dgx1, dgx2)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:12:82: error: 'store' in model 'qwen38': store 'nsa' "
              "is not defined "
              "under stores:; did you mean 'nas'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:13:82: error: 'source' in model 'dsv41': store 'nsa' "
              "is not defined "
              "under stores:; did you mean 'nas'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:17:19: error: deployment 'qwen38': node 'dgx9' is "
              "not defined under "
              "nodes: (defined: dgx1, dgx2)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:18:12: error: deployment 'qwen38': image 'b12y' is "
              "not defined under "
              "images:; did you mean 'b12x'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:19:12: error: deployment 'qwen38': model 'qwen83' is "
              "not defined under "
              "models:; did you mean 'qwen38'?");
}

TEST(ManifestTest, StoreNodeThatDoesNotExist) {
  const Loaded l =
      LoadYaml(std::string(kBase) + "stores:\n  nas: {path: /nas, nodes: [dgx1, dgx11]}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:35: error: store 'nas': node 'dgx11' is not "
              "defined under nodes:; "
              "did you mean 'dgx1'?");
}

TEST(ManifestTest, FloatingImageRef) {
  const std::string yaml =
      std::string(kBase) + "images:\n  b12x: {ref: eugr/spark-vllm-b12x:latest}\n";
  const Loaded l = LoadYaml(yaml);
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:15: error: image 'b12x': ref "
              "'eugr/spark-vllm-b12x:latest' floats (a "
              "tag can change under you); pin it: "
              "eugr/spark-vllm-b12x@sha256:<digest> (get it "
              "with `podman image inspect --format '{{index .RepoDigests 0}}'` "
              "or `docker buildx "
              "imagetools inspect`), or set allow_floating: true");
  // With allow_floating the same ref is a warning and the manifest loads.
  const Loaded w = LoadYaml(std::string(kBase) +
                            "images:\n  b12x: {ref: eugr/spark-vllm-b12x:latest, allow_floating: "
                            "true}\n");
  EXPECT_TRUE(w.ok) << Dump(w.diags);
  ASSERT_EQ(w.diags.size(), 1u) << Dump(w.diags);
  EXPECT_EQ(w.diags[0].severity, Diagnostic::Severity::kWarning);
  EXPECT_EQ(w.diags[0].loc.ToString(), "fleet.yaml:9:15");
  EXPECT_EQ(w.manifest.images.at("b12x").ref, "eugr/spark-vllm-b12x:latest");
}

TEST(ManifestTest, ImageRefForms) {
  const std::string sha = std::string("@sha256:") + kDigest;
  // A registry port is not a tag.
  const Loaded port =
      LoadYaml(std::string(kBase) + "images:\n  a: {ref: localhost:5000/lab/b12x}\n");
  ASSERT_EQ(port.diags.size(), 1u);
  EXPECT_NE(port.diags[0].message.find("pin it: localhost:5000/lab/b12x@sha256:<digest>"),
            std::string::npos)
      << port.diags[0].message;
  // repo:tag@digest is pinned; so is a registry with a port.
  const Loaded pinned = LoadYaml(std::string(kBase) + "images:\n  a: {ref: \"eugr/x:nightly" + sha +
                                 "\"}\n  b: {ref: \"localhost:5000/x" + sha + "\"}\n");
  EXPECT_TRUE(pinned.ok) << Dump(pinned.diags);
  const Loaded bad =
      LoadYaml(std::string(kBase) + "images:\n  a: {ref: \"eugr/x@sha256:C9E22735\"}\n");
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:9:12: error: image 'a': ref 'eugr/x@sha256:C9E22735' "
              "has a malformed "
              "digest; expected eugr/x@sha256:<64 lowercase hex digits>");
  const Loaded source = LoadYaml(std::string(kBase) + "images:\n  a: {ref: \"eugr/x" + sha +
                                 "\", source: regsitry}\n");
  EXPECT_DIAG(source.diags,
              "fleet.yaml:9:102: error: 'source' in image 'a' must be "
              "registry, peers or "
              "node:<name>, got 'regsitry'; did you mean 'registry'?");
}

TEST(ManifestTest, FloatingModelRevision) {
  const Loaded l = LoadYaml(
      std::string(kBase) + "models:\n  qwen38:\n    repo: azampatti/Qwen3.8\n    revision: main\n");
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:11:15: error: model 'qwen38': revision 'main' floats "
              "(a branch or tag "
              "moves with every push to azampatti/Qwen3.8); pin the 40-hex "
              "commit id (the hub's "
              "\"Files and versions\" history, or `cat "
              "<hf_cache>/models--azampatti--Qwen3.8/refs/main` on a node that "
              "has it), or set "
              "allow_floating: true");
  const Loaded w = LoadYaml(std::string(kBase) +
                            "models:\n  qwen38:\n    repo: azampatti/Qwen3.8\n    revision: main\n"
                            "    allow_floating: true\n");
  EXPECT_TRUE(w.ok) << Dump(w.diags);
  ASSERT_EQ(w.diags.size(), 1u);
  EXPECT_EQ(w.diags[0].severity, Diagnostic::Severity::kWarning);
  EXPECT_EQ(w.manifest.models.at("qwen38").revision, "main");

  const Loaded upper = LoadYaml(std::string(kBase) +
                                "models:\n  m: {repo: a/b, revision: "
                                "DBA1BE0A40AA45A94AD051997016DB3960A90277}\n");
  EXPECT_DIAG(upper.diags,
              "fleet.yaml:9:28: error: 'revision' in model 'm' must be lowercase "
              "hex, as the hub writes it: "
              "dba1be0a40aa45a94ad051997016db3960a90277");
  const Loaded bad =
      LoadYaml(std::string(kBase) + "models:\n  m: {repo: a/b, revision: 'dba1 be0a'}\n");
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:9:28: error: 'revision' in model 'm' must be a commit id "
              "(40 lowercase hex digits), got 'dba1 be0a'");
}

TEST(ManifestTest, ModelVerifyMode) {
  const std::string rev = "dba1be0a40aa45a94ad051997016db3960a90277";
  const Loaded deflt =
      LoadYaml(std::string(kBase) + "models:\n  m: {repo: a/b, revision: " + rev + "}\n");
  EXPECT_TRUE(deflt.ok) << Dump(deflt.diags);
  EXPECT_EQ(deflt.manifest.models.at("m").verify, "sizes");
  const Loaded deep = LoadYaml(std::string(kBase) + "models:\n  m: {repo: a/b, revision: " + rev +
                               ", verify: deep}\n");
  EXPECT_TRUE(deep.ok) << Dump(deep.diags);
  EXPECT_EQ(deep.manifest.models.at("m").verify, "deep");
  EXPECT_FALSE(deep.manifest.models.at("m").verify_now);  // only --verify=deep sets it
  const Loaded bad = LoadYaml(std::string(kBase) + "models:\n  m: {repo: a/b, revision: " + rev +
                              ", verify: sha}\n");
  EXPECT_FALSE(bad.ok);
}

constexpr char kPowerBase[] =
    "version: 1\n"                                                         // 1
    "fleet: lab\n"                                                         // 2
    "power: {kind: home-assistant, url: https://ha.lan, token_env: HA}\n"  // 3
    "nodes:\n"                                                             // 4
    "  dgx3:\n"                                                            // 5
    "    address: dgx3.lan\n"                                              // 6
    "    power:\n"                                                         // 7
    "      switch: switch.dgx3\n"                                          // 8
    "  dgx4:\n"                                                            // 9
    "    address: dgx4.lan\n"                                              // 10
    "    power:\n"                                                         // 11
    "      switch: switch.dgx3\n";                                         // 12

TEST(ManifestTest, CopyPastedSwitchEntity) {
  // The log: the 1node-4 entity was switch.dgx3 (copy-paste).
  const Loaded l = LoadYaml(kPowerBase);
  EXPECT_FALSE(l.ok);
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:12:15: error: switch.dgx3 is used by nodes dgx3 "
            "(fleet.yaml:8:15) and "
            "dgx4 (fleet.yaml:12:15); each node needs its own switch");
}

TEST(ManifestTest, BytesThatAreNotUtf8AreRefused) {
  // Found by the manifest fuzz target: a switch entity holding byte 0xCB
  // loaded, then Home Assistant's request body (JSON) threw in dump().
  const Loaded l =
      LoadYaml(std::string(kBase) + "    power: {switch: switch.d\xCBx3, state: off}\n");
  EXPECT_FALSE(l.ok);
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:8:29: error: byte 0xCB is not UTF-8: fleet.yaml must be UTF-8 text "
            "(save it as UTF-8)");
  // A first line, and UTF-8 before the byte (columns count bytes).
  const Loaded first = LoadYaml("fleet: caf\xC3\xA9\xFF\n");
  ASSERT_EQ(first.diags.size(), 1u) << Dump(first.diags);
  EXPECT_EQ(first.diags[0].loc.ToString(), "fleet.yaml:1:13");
  EXPECT_TRUE(LoadYaml(std::string(kBase) + "    hostname: caf\xC3\xA9\n").ok);
}

TEST(ManifestTest, ControlCharactersAreRefused) {
  // YAML's c-printable set leaves out C0 controls but tab, LF and CR; DEL;
  // C1 controls but NEL. A NUL in a value reached yaml-cpp's escape reader.
  const Loaded l = LoadYaml(std::string(kBase) + "    hostname: dgx\x16" + "2\n");
  EXPECT_FALSE(l.ok);
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:8:18: error: U+0016 is a control character: fleet.yaml must not hold one "
            "(a stray byte from a paste?)");
  for (const std::string bad : {std::string("\0", 1), std::string("\x7F"), std::string("\xC2\x80"),
                                std::string("\xEF\xBF\xBE")}) {
    const Loaded one = LoadYaml(std::string(kBase) + "    hostname: dgx" + bad + "2\n");
    ASSERT_EQ(one.diags.size(), 1u) << Dump(one.diags);
    EXPECT_EQ(one.diags[0].loc.ToString(), "fleet.yaml:8:18") << Dump(one.diags);
  }
  EXPECT_TRUE(LoadYaml(std::string(kBase) + "    hostname: \"dgx\xC2\xA0" + "2\"\n").ok);
}

TEST(ManifestTest, EscapesThatDecodeToControlCharactersAreRefused) {
  // Found by the manifest fuzz target: yaml-cpp decodes "\N" to the lone
  // byte 0x85 (not UTF-8), and a model's repo holding it loaded; then the
  // resource's attributes threw in dump().
  const Loaded l = LoadYaml(std::string(kBase) + "    hostname: \"dgx\\N2\"\n");
  EXPECT_FALSE(l.ok);
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:8:15: error: an escape in this string decodes to text fleet cannot use: "
            "byte 0x85 is not UTF-8 (yaml-cpp decodes \\N and \\_ to lone bytes; \\u0085 and "
            "\\u00A0 are their UTF-8); write the string without it");
  const Loaded nbsp = LoadYaml(std::string(kBase) + "    hostname: \"dgx\\_2\"\n");
  ASSERT_EQ(nbsp.diags.size(), 1u) << Dump(nbsp.diags);
  EXPECT_NE(nbsp.diags[0].message.find("byte 0xA0 is not UTF-8 (yaml-cpp decodes"),
            std::string::npos)
      << Dump(nbsp.diags);
  EXPECT_TRUE(LoadYaml(std::string(kBase) + "    hostname: \"dgx\\u00A02\"\n").ok);
  const Loaded nul = LoadYaml(std::string(kBase) + "    hostname: \"dgx\\0\"\n");
  ASSERT_EQ(nul.diags.size(), 1u) << Dump(nul.diags);
  EXPECT_EQ(nul.diags[0].ToString(),
            "fleet.yaml:8:15: error: an escape in this string decodes to text fleet cannot use: "
            "U+0000 is a control character; write the string without it");
  // Keys too, and each string once however many aliases name it, at
  // whatever depth.
  const Loaded key = LoadYaml(std::string(kBase) + "  \"dg\\x7Fx3\":\n    address: &a \"x\\a\"\n" +
                              "  dgx4:\n    address: *a\nx: [[*a], {k: [*a]}]\n");
  EXPECT_EQ(std::count_if(
                key.diags.begin(), key.diags.end(),
                [](const Diagnostic& d) { return d.message.find("U+0007") != std::string::npos; }),
            1)
      << Dump(key.diags);
  EXPECT_DIAG(key.diags,
              "fleet.yaml:8:3: error: an escape in this string decodes to text fleet cannot use: "
              "U+007F is a control character; write the string without it");
  EXPECT_DIAG(key.diags,
              "fleet.yaml:9:14: error: an escape in this string decodes to text fleet cannot use: "
              "U+0007 is a control character; write the string without it");
  EXPECT_TRUE(LoadYaml(std::string(kBase) + "    hostname: \"caf\\u00e9\"\n").ok);
}

TEST(ManifestTest, AliasesAreCheckedOnceNotOncePerUse) {
  // Ten levels of ten aliases name 10^10 strings: the check of decoded
  // strings must visit each node once, or this load takes hours.
  std::string yaml = std::string(kBase) + "x0: &x0 [a, a, a, a, a, a, a, a, a, a]\n";
  for (int level = 1; level < 10; ++level) {
    const std::string below = "*x" + std::to_string(level - 1);
    yaml += "x" + std::to_string(level) + ": &x" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", " : "") + below;
    yaml += "]\n";
  }
  const Loaded l = LoadYaml(yaml);
  EXPECT_FALSE(l.ok);  // x0...x9 are not keys of fleet.yaml
  EXPECT_DIAG(
      l.diags,
      "fleet.yaml:8:1: error: unknown key 'x0' in the top level; expected one of: version, "
      "fleet, state, ssh, power, hub, nodes, stores, images, models, deployments, defaults, "
      "sync, gateways, bench");
  // A chain of 20,000 aliases, each one level deeper than the one it names:
  // visited once per depth, that is 2 * 10^8 visits and as deep a
  // recursion; visited once per node, 20,000.
  std::string chain = std::string(kBase) + "c0: &c0 [a]\n";
  for (int i = 1; i < 20000; ++i)
    chain += "c" + std::to_string(i) + ": &c" + std::to_string(i) + " [*c" + std::to_string(i - 1) +
             "]\n";
  const Loaded long_chain = LoadYaml(chain);
  EXPECT_FALSE(long_chain.ok);
  EXPECT_DIAG(
      long_chain.diags,
      "fleet.yaml:8:1: error: unknown key 'c0' in the top level; expected one of: version, "
      "fleet, state, ssh, power, hub, nodes, stores, images, models, deployments, defaults, "
      "sync, gateways, bench");
}

TEST(ManifestTest, NodePowerWithoutController) {
  const Loaded l = LoadYaml(std::string(kBase) + "    power: {switch: switch.dgx2, state: of}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:5: error: node 'dgx2' has power: but the fleet has "
              "no power "
              "controller; add one at the top level: power: {kind: "
              "home-assistant, url: ..., "
              "token_env: ...}");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:41: error: 'state' in node 'dgx2' power must be on, "
              "off or on_demand, got 'of'");
}

// hub: the Hub token's variable and the nodes' hub CLI; errors at the
// value's line and column, never the token's text.
TEST(ManifestTest, HubBlock) {
  const Loaded ok =
      LoadYaml(std::string(kBase) + "hub: {token_env: HF_TOKEN, cli: ~/.local/bin/hf}\n");  // 8
  ASSERT_TRUE(ok.ok) << Dump(ok.diags);
  EXPECT_TRUE(ok.manifest.hub.present);
  EXPECT_EQ(ok.manifest.hub.token_env, "HF_TOKEN");
  EXPECT_EQ(ok.manifest.hub.cli, "~/.local/bin/hf");
  EXPECT_EQ(ok.manifest.hub.loc.line, 8);
  const Loaded none = LoadYaml(kBase);
  ASSERT_TRUE(none.ok) << Dump(none.diags);
  EXPECT_FALSE(none.manifest.hub.present);
  EXPECT_EQ(none.manifest.hub.token_env, "");

  const Loaded bad = LoadYaml(std::string(kBase) +
                              "hub: {token_env: hf_abcdefghijklmnopQRSTUV123456, cli: hf, "
                              "tokn: x}\n");
  EXPECT_FALSE(bad.ok);
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:8:18: error: 'token_env' in hub holds what looks like the token "
              "itself; the manifest must never hold secrets: export the token in an "
              "environment variable (e.g. HF_TOKEN) and write its name here; revoke the "
              "token if it was ever committed");
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:8:56: error: 'cli' in hub must be the absolute path of the hub CLI "
              "on the nodes (e.g. /usr/local/bin/hf or ~/.local/bin/hf), got 'hf'");
  for (const Diagnostic& d : bad.diags)
    EXPECT_EQ(d.message.find("hf_abcdefghijklmnop"), std::string::npos) << "leaks the token";
  bool unknown = false;
  for (const Diagnostic& d : bad.diags) unknown |= d.message.find("tokn") != std::string::npos;
  EXPECT_TRUE(unknown) << Dump(bad.diags);
}

TEST(ManifestTest, PowerDurations) {
  const std::string power =
      "version: 1\nfleet: lab\n"
      "power: {kind: home-assistant, url: https://ha.lan, token_env: HA}\n"
      "nodes:\n"
      "  dgx1:\n    address: dgx1.lan\n    power: {switch: switch.dgx1}\n"  // 7
      "  dgx2:\n    address: dgx2.lan\n";                                   // 8, 9
  const Loaded defaults = LoadYaml(power);
  ASSERT_TRUE(defaults.ok) << Dump(defaults.diags);
  const NodePower& p = defaults.manifest.nodes.at("dgx1").power;
  EXPECT_EQ(p.boot_timeout_s, 600);
  EXPECT_EQ(p.shutdown_timeout_s, 300);
  EXPECT_EQ(p.halt_wait_s, 30);  // a real OS may write for a while after sshd stops

  const Loaded set = LoadYaml(power +
                              "    power: {switch: switch.dgx2, boot_timeout: 5m, "
                              "shutdown_timeout: 90s, halt_wait: 0s}\n");
  ASSERT_TRUE(set.ok) << Dump(set.diags);
  const NodePower& q = set.manifest.nodes.at("dgx2").power;
  EXPECT_EQ(q.boot_timeout_s, 300);
  EXPECT_EQ(q.shutdown_timeout_s, 90);
  EXPECT_EQ(q.halt_wait_s, 0);  // cut as soon as SSH stops: allowed, never a default

  const Loaded bad = LoadYaml(power +
                              "    power: {switch: switch.dgx2, shutdown_timeout: 0s, "
                              "halt_wait: -5s}\n");
  EXPECT_FALSE(bad.ok);
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:10:52: error: 'shutdown_timeout' in node 'dgx2' power must be a "
              "duration such as 10m or 90s, got '0s'");
  EXPECT_DIAG(bad.diags,
              "fleet.yaml:10:67: error: 'halt_wait' in node 'dgx2' power must be a duration "
              "(0s or more) such as 10m or 90s, got '-5s'");
}

// An https controller's trust: a CA file resolved against the repo, or an
// explicit insecure: true; neither on http, never both.
TEST(ManifestTest, PowerTls) {
  auto load = [](const std::string& power, bool with_ca) {
    TempRepo repo;
    if (with_ca) repo.Write("certs/ha-ca.pem", "-----BEGIN CERTIFICATE-----\n");
    repo.Write("fleet.yaml", std::string(kBase) + power);  // power: line 8
    Loaded out;
    out.ok = LoadManifest(repo.dir(), &out.manifest, &out.diags);
    return out;
  };
  const std::string head = "power: {kind: home-assistant, token_env: HA, ";
  Loaded ca = load(head + "url: https://ha.lan:8123, ca_file: certs/ha-ca.pem}\n", true);
  ASSERT_TRUE(ca.ok) << Dump(ca.diags);
  EXPECT_EQ(ca.manifest.power.ca_file, ca.manifest.root_dir + "/certs/ha-ca.pem");
  EXPECT_FALSE(ca.manifest.power.insecure);

  Loaded system = load(head + "url: https://ha.lan:8123}\n", false);
  ASSERT_TRUE(system.ok) << Dump(system.diags);
  EXPECT_EQ(system.manifest.power.ca_file, "");  // the system's CAs
  EXPECT_FALSE(system.manifest.power.insecure);

  Loaded insecure = load(head + "url: https://ha.lan:8123, insecure: true}\n", false);
  ASSERT_TRUE(insecure.ok) << Dump(insecure.diags);
  EXPECT_TRUE(insecure.manifest.power.insecure);

  Loaded missing = load(head + "url: https://ha.lan:8123, ca_file: certs/ha-ca.pem}\n", false);
  EXPECT_FALSE(missing.ok);
  EXPECT_NE(Dump(missing.diags).find("fleet.yaml:8:"), std::string::npos) << Dump(missing.diags);
  EXPECT_NE(Dump(missing.diags).find("'ca_file' in power: cannot read "), std::string::npos);

  Loaded both =
      load(head + "url: https://ha.lan:8123, ca_file: certs/ha-ca.pem, insecure: true}\n", true);
  EXPECT_FALSE(both.ok);
  EXPECT_NE(Dump(both.diags).find("both 'ca_file' and 'insecure: true'"), std::string::npos);

  Loaded http = load(head + "url: http://ha.lan:8123, insecure: true}\n", false);
  EXPECT_FALSE(http.ok);
  EXPECT_NE(Dump(http.diags).find("'insecure' in power needs an https:// url"), std::string::npos)
      << Dump(http.diags);
}

TEST(ManifestTest, DisplayManagerStop) {
  const Loaded stop = LoadYaml(std::string(kBase) + "    display_manager: stop\n");  // 8
  ASSERT_TRUE(stop.ok) << Dump(stop.diags);
  EXPECT_TRUE(stop.manifest.nodes.at("dgx2").display_manager_stop);
  EXPECT_FALSE(stop.manifest.nodes.at("dgx1").display_manager_stop);  // absent: refuse
  const Loaded bad = LoadYaml(std::string(kBase) + "    display_manager: stopp\n");
  EXPECT_FALSE(bad.ok);
  EXPECT_NE(Dump(bad.diags).find("fleet.yaml:8:22: error: 'display_manager'"), std::string::npos)
      << Dump(bad.diags);
}

TEST(ManifestTest, NoTokensInTheManifest) {
  const Loaded l = LoadYaml(std::string(kBase) +
                            "power:\n"                                                  // 8
                            "  kind: home-assistant\n"                                  // 9
                            "  url: https://ha.lan:8123\n"                              // 10
                            "  token: eyJhbGciOiJIUzI1NiJ9.eyJpc3MiOiJ4In0.abc123\n");  // 11
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:11:3: error: 'token' in power: the manifest must "
              "never hold secrets (it "
              "is committed and shared); export the token in an environment "
              "variable and set "
              "token_env to its name (e.g. token_env: HA_TOKEN); this value "
              "looks like a real "
              "token: revoke it if it was ever committed");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:1: error: power has no 'token_env' (required: the "
              "name of the "
              "environment variable holding the token)");
  for (const Diagnostic& d : l.diags) {
    EXPECT_EQ(d.message.find("eyJhbGciOiJIUzI1NiJ9"), std::string::npos) << "leaks the token";
  }
  const Loaded env = LoadYaml(std::string(kBase) +
                              "power: {kind: home-assistant, url: https://ha.lan, token_env: "
                              "ghp_abcdefghijklmnop1234}\n");
  EXPECT_DIAG(env.diags,
              "fleet.yaml:8:63: error: 'token_env' in power holds what looks "
              "like the token "
              "itself; the manifest must never hold secrets: export the token "
              "in an environment "
              "variable (e.g. HA_TOKEN) and write its name here; revoke the "
              "token if it was ever "
              "committed");
  const Loaded ssh = LoadYaml(std::string(kBase) + "    ssh: {password: hunter2}\n");
  EXPECT_DIAG(ssh.diags,
              "fleet.yaml:8:11: error: 'password' in node 'dgx2' ssh: the "
              "manifest must never "
              "hold secrets (it is committed and shared); use an identity key "
              "(identity: "
              "~/.ssh/id_ed25519) or ssh-agent");
}

std::string Deployment(const std::string& name, const std::string& nodes, int port,
                       const std::string& extra = "") {
  return "  " + name + ": {recipe: recipes/qwen38-flash-next-int4.toml, nodes: [" + nodes +
         "], image: b12x, model: qwen38, port: " + std::to_string(port) + extra + "}\n";
}

std::string DeployRepo() {
  return std::string(kDeployBase) + "images:\n" +
         Image("b12x", std::string("eugr/b12x@sha256:") + kDigest) +  // 9
         "models:\n"                                                  // 10
         "  qwen38: {repo: a/q, revision: " +
         kRevision +
         "}\n"              // 11
         "deployments:\n";  // 12
}

TEST(ManifestTest, DeploymentPorts) {
  const Loaded l = LoadYaml(DeployRepo() + Deployment("a", "dgx1", 30000) +  // 13
                            Deployment("b", "dgx2, dgx1", 30000) +           // 14
                            Deployment("c", "dgx2", 70000) +                 // 15
                            "  d: {recipe: recipes/qwen38-flash-next-int4.toml, nodes: [dgx2], "
                            "image: b12x}\n");  // 16
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:14:107: error: deployments 'a' (fleet.yaml:13:101) and 'b' "
              "(fleet.yaml:14:107) both use port 30000 on node 'dgx1'; give each its "
              "own port");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:15:101: error: 'port' in deployment 'c' 70000 is out "
              "of range 1-65535");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:16:3: error: deployment 'd' has no 'port' (required: "
              "1-65535)");
}

TEST(ManifestTest, DeploymentFields) {
  const Loaded l =
      LoadYaml(DeployRepo() +
               Deployment("a", "dgx1", 1, ", display_ram: unlock, health: {timeout: 30 min}") +
               Deployment("b", "dgx2", 2, ", health: {path: v1/models, timout: 90s}"));
  EXPECT_DIAG(l.diags,
              "fleet.yaml:13:117: error: 'display_ram' in deployment 'a' must "
              "be default or "
              "unlocked, got 'unlock'; did you mean 'unlocked'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:13:143: error: 'timeout' in deployment 'a' health must be a "
              "duration "
              "such as 30m, 90s or 2h (a plain number is seconds), got '30 min'");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:14:119: error: 'path' in deployment 'b' health must "
              "be an HTTP path "
              "starting with '/', got 'v1/models'");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:14:130: error: unknown key 'timout' in deployment "
              "'b' health; did you "
              "mean 'timeout'?");
  const Loaded ok = LoadYaml(DeployRepo() + Deployment("a", "dgx1", 1, ", health: {timeout: 90}") +
                             Deployment("b", "dgx2", 2, ", health: {timeout: 1h30m}"));
  ASSERT_TRUE(ok.ok) << Dump(ok.diags);
  EXPECT_EQ(ok.manifest.deployments.at("a").health.timeout_s, 90);
  EXPECT_EQ(ok.manifest.deployments.at("b").health.timeout_s, 5400);
}

TEST(ManifestTest, DeploymentFabricEnv) {
  const Loaded ok = LoadYaml(DeployRepo() + Deployment("a", "dgx1", 1, ", fabric_env: true") +
                             Deployment("b", "dgx2", 2, ""));
  ASSERT_TRUE(ok.ok) << Dump(ok.diags);
  EXPECT_TRUE(ok.manifest.deployments.at("a").fabric_env);
  EXPECT_FALSE(ok.manifest.deployments.at("b").fabric_env);
  const Loaded bad = LoadYaml(DeployRepo() + Deployment("a", "dgx1", 1, ", fabric_env: yes-ish"));
  EXPECT_FALSE(bad.ok);
  EXPECT_FALSE(bad.diags.empty());
  EXPECT_NE(Dump(bad.diags).find("fabric_env"), std::string::npos) << Dump(bad.diags);
}

TEST(ManifestTest, Gateways) {
  const std::string deployments = DeployRepo() +
                                  Deployment("a", "dgx1", 30000, ", served_model: qwen3.8") +
                                  Deployment("b", "dgx2", 30001, ", gateway: false");
  const Loaded ok = LoadYaml(
      deployments + "gateways:\n  lab: {nodes: [dgx2], image: b12x, port: 8000, drain: 2m}\n");
  ASSERT_TRUE(ok.ok) << Dump(ok.diags);
  EXPECT_EQ(ok.manifest.deployments.at("a").served_model, "qwen3.8");
  EXPECT_TRUE(ok.manifest.deployments.at("a").routed);
  EXPECT_FALSE(ok.manifest.deployments.at("b").routed);
  const GatewaySpec& g = ok.manifest.gateways.at("lab");
  EXPECT_EQ(g.nodes, std::vector<std::string>{"dgx2"});
  EXPECT_EQ(g.port, 8000);
  EXPECT_EQ(g.drain_s, 120);
  // A gateway on a deployment's port, an unknown image, a served name that
  // would break HAProxy's config.
  const Loaded bad =
      LoadYaml(DeployRepo() + Deployment("a", "dgx1", 30000, ", served_model: \"q w\"") +
               "gateways:\n  lab: {nodes: [dgx1], image: nosuch, port: 30000}\n");
  EXPECT_FALSE(bad.ok);
  const std::string all = Dump(bad.diags);
  EXPECT_NE(all.find("gateway 'lab' and deployment 'a' both use port 30000 on node 'dgx1'"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("image 'nosuch' is not defined"), std::string::npos) << all;
  EXPECT_NE(all.find("'served_model' in deployment 'a' must be"), std::string::npos) << all;
}

// max_request and health.request_timeout reach the deployment; keys are a
// path outside the repo or a variable's name, never both.
TEST(ManifestTest, LongRequestsBusyChecksAndGatewayKeys) {
  const Loaded ok = LoadYaml(
      DeployRepo() +
      Deployment("a", "dgx1", 30000,
                 ", max_request: 16MiB, health: {request_timeout: 5m, grace: 4}") +
      Deployment("b", "dgx2", 30001) +
      "gateways:\n  lab: {nodes: [dgx2], image: b12x, port: 8000, keys: /etc/fleet/lab-keys}\n"
      "  env: {nodes: [dgx1], image: b12x, port: 8001, keys_env: LAB_GATEWAY_KEYS}\n");
  ASSERT_TRUE(ok.ok) << Dump(ok.diags);
  const DeploymentSpec& a = ok.manifest.deployments.at("a");
  EXPECT_EQ(a.max_request_bytes, uint64_t{16} << 20);
  EXPECT_EQ(a.health.request_timeout_s, 300);
  EXPECT_EQ(a.health.grace_rounds, 4);
  EXPECT_EQ(ok.manifest.deployments.at("b").max_request_bytes, uint64_t{4} << 20);
  EXPECT_EQ(ok.manifest.deployments.at("b").health.request_timeout_s, 5);
  EXPECT_EQ(ok.manifest.gateways.at("lab").keys_path, "/etc/fleet/lab-keys");
  EXPECT_EQ(ok.manifest.gateways.at("env").keys_env, "LAB_GATEWAY_KEYS");
  const Loaded bad =
      LoadYaml(DeployRepo() + Deployment("a", "dgx1", 30000, ", max_request: 1GiB") +
               Deployment("b", "dgx2", 30001, ", health: {request_timeout: soon}") +
               "gateways:\n  lab: {nodes: [dgx2], image: b12x, port: 8000, keys: lab-keys}\n"
               "  two: {nodes: [dgx1], image: b12x, port: 8001, keys: /k, keys_env: K}\n");
  EXPECT_FALSE(bad.ok);
  const std::string all = Dump(bad.diags);
  EXPECT_NE(all.find("'max_request' in deployment 'a' must be a size from 64KiB to 128MiB"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("'request_timeout' in"), std::string::npos) << all;
  EXPECT_NE(all.find("'keys' in gateway 'lab' must be an absolute or ~/ path"), std::string::npos)
      << all;
  EXPECT_NE(all.find("'keys' and 'keys_env' in gateway 'two' are two sources"), std::string::npos)
      << all;
}

TEST(ManifestTest, MissingRecipeFile) {
  const Loaded l = LoadYaml(DeployRepo() +
                            "  a: {recipe: recipes/qwen38-flash-next-int5.toml, nodes: [dgx1], "
                            "image: b12x, port: 1}\n");
  ASSERT_FALSE(l.ok);
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].loc.ToString(), "fleet.yaml:13:15");
  EXPECT_NE(l.diags[0].message.find("deployment 'a': recipe file "
                                    "'recipes/qwen38-flash-next-int5.toml' not found"),
            std::string::npos)
      << l.diags[0].message;
  EXPECT_NE(l.diags[0].message.find("did you mean 'recipes/qwen38-flash-next-int4.toml'?"),
            std::string::npos)
      << l.diags[0].message;
}

// A commit names what fleet reads: a recipe out of the repo (absolute, "..",
// or a link of the repo pointing out of it) is refused, its text unread and
// unquoted, and no "did you mean" lists files of another folder.
TEST(ManifestTest, RecipesOutsideTheRepoAreRefusedUnread) {
  const std::string outside = "/tmp/fleet-outside-recipe-" + std::to_string(getpid());
  fs::create_directories(outside);
  std::ofstream(outside + "/secret.toml") << "model = \"SECRET-LINE\"\n";
  for (const std::string path :
       {outside + "/secret.toml",
        std::string("../") + fs::path(outside).filename().string() + "/secret.toml",
        std::string("recipes/link.toml"), outside + "/secret.tom"}) {
    TempRepo repo;
    fs::create_symlink(outside + "/secret.toml", fs::path(repo.dir()) / "recipes" / "link.toml");
    repo.Write("fleet.yaml", DeployRepo() + "  a: {recipe: \"" + path +
                                 "\", nodes: [dgx1], image: b12x, port: 1}\n");
    Loaded l;
    l.ok = LoadManifest(repo.dir(), &l.manifest, &l.diags);
    ASSERT_FALSE(l.ok) << path;
    const std::string all = Dump(l.diags);
    EXPECT_NE(all.find("fleet.yaml:13:15: error: deployment 'a': recipe file '" + path +
                       "' is outside the manifests repo"),
              std::string::npos)
        << path << "\n"
        << all;
    EXPECT_EQ(all.find("SECRET"), std::string::npos) << all;
    EXPECT_EQ(all.find("did you mean"), std::string::npos) << all;
  }
  fs::remove_all(outside);
}

TEST(ManifestTest, RecipeErrorsAreReportedWithTheRecipeFile) {
  TempRepo repo;
  repo.Write("fleet.yaml", DeployRepo() +
                               "  a: {recipe: recipes/bad.toml, nodes: [dgx1], image: b12x, "
                               "model: qwen38, port: 1}\n"
                               "  b: {recipe: recipes/bad.toml, nodes: [dgx2], image: b12x, "
                               "model: qwen38, port: 1}\n");
  repo.Write("recipes/bad.toml",
             "model = \"\"\n[[extra_mounts]]\nhost = \"/a\"\ncontainer = "
             "\"/b\"\nargs = []\n");
  Manifest m;
  Diagnostics diags;
  EXPECT_FALSE(LoadManifest(repo.dir(), &m, &diags));
  // Loaded once although two deployments use it: reported once.
  ASSERT_EQ(diags.size(), 1u) << Dump(diags);
  EXPECT_EQ(diags[0].loc.ToString(), "recipes/bad.toml:5:1");
  EXPECT_NE(diags[0].message.find("'args' is inside [[extra_mounts]] (line 2)"), std::string::npos);
}

TEST(ManifestTest, ModelPathPlaceholderNeedsAModel) {
  const Loaded l = LoadYaml(DeployRepo() +
                            "  a: {recipe: recipes/qwen38-flash-next-int4.toml, nodes: [dgx1], "
                            "image: b12x, port: 1}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:13:3: error: deployment 'a' has no 'model', but its recipe "
              "recipes/qwen38-flash-next-int4.toml uses {model_path}; name the model "
              "it serves");
}

TEST(ManifestTest, ModelInAStoreTheNodeDoesNotMount) {
  const std::string yaml =
      "version: 1\nfleet: lab\nnodes:\n  dgx1: {address: dgx1.lan}\n  dgx3: "
      "{address: "
      "dgx3.lan}\nstores:\n  nas: {path: /mnt/nas, nodes: [dgx1]}\nimages:\n" +
      Image("b12x", std::string("eugr/b12x@sha256:") + kDigest) +  // 9
      "models:\n  m: {repo: a/q, revision: " + kRevision +
      ", store: nas}\n"  // 10-11
      "deployments:\n"   // 12
      "  a: {recipe: recipes/dsv41-flash-exl3-2x.toml, nodes: [dgx1, dgx3], "
      "image: b12x, "
      "model: m, port: 1}\n";  // 13
  const Loaded m = LoadYaml(yaml);
  EXPECT_DIAG(m.diags,
              "fleet.yaml:13:63: error: deployment 'a' runs on node 'dgx3', "
              "but its model 'm' "
              "lives in store 'nas', which node 'dgx3' does not mount; add the "
              "node to the "
              "store's nodes or use store: local");
  EXPECT_EQ(m.diags.size(), 1u) << Dump(m.diags);
}

TEST(ManifestTest, DeploymentOnAPoweredOffNode) {
  const Loaded l = LoadYaml(
      "version: 1\nfleet: lab\n"
      "power: {kind: home-assistant, url: https://ha.lan, token_env: HA}\n"
      "nodes:\n  dgx3: {address: dgx3.lan, power: {switch: switch.dgx3, state: "
      "off}}\n"
      "images:\n" +
      Image("b12x", std::string("eugr/b12x@sha256:") + kDigest) +
      "deployments:\n"
      "  a: {recipe: recipes/dsv41-flash-exl3-2x.toml, nodes: [dgx3], image: "
      "b12x, port: 1}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:9:57: error: deployment 'a' runs on node 'dgx3', whose power "
              "state is "
              "off (fleet.yaml:5:29); set its state: on or move the deployment");
}

TEST(ManifestTest, TwoNamesForOneMachine) {
  const Loaded l = LoadYaml(std::string(kBase) + "  dgx5:\n    address: dgx2.lan\n" +
                            "  sim1: {address: 127.0.0.1, ssh: {port: 2201}}\n"
                            "  sim2: {address: 127.0.0.1, ssh: {port: 2202}}\n");
  ASSERT_EQ(l.diags.size(), 1u) << Dump(l.diags);
  EXPECT_EQ(l.diags[0].ToString(),
            "fleet.yaml:8:3: error: nodes dgx2 (fleet.yaml:6:3) and dgx5 both "
            "point at "
            "dgx2.lan:22; each node must be its own machine");
}

TEST(ManifestTest, PathsResolve) {
  setenv("HOME", "/home/tester", 1);
  TempRepo repo;
  repo.Write("fleet.yaml",
             "version: 1\nfleet: lab\n"
             "state: {path: ../shared/state.json}\n"
             "ssh: {identity: keys/id, known_hosts: ~/kh}\n"
             "nodes:\n"
             "  a: {address: local, ssh: {identity: /abs/id}, paths: "
             "{hf_cache: hub}}\n");
  Manifest m;
  Diagnostics diags;
  LoadManifest(repo.dir(), &m, &diags);
  const std::string parent = fs::path(repo.dir()).parent_path().string();
  EXPECT_EQ(m.state.path, parent + "/shared/state.json");
  EXPECT_EQ(m.ssh.identity, repo.dir() + "/keys/id");
  EXPECT_EQ(m.ssh.known_hosts, "/home/tester/kh");
  EXPECT_EQ(m.nodes.at("a").ssh.identity, "/abs/id");
  EXPECT_EQ(m.nodes.at("a").ssh.known_hosts, "/home/tester/kh");
  EXPECT_EQ(m.nodes.at("a").address, "local");
  EXPECT_DIAG(diags,
              "fleet.yaml:6:67: error: 'hf_cache' in node 'a' paths must be an "
              "absolute path on "
              "the node (or ~/... for the node user's home), got 'hub'");
  EXPECT_EQ(diags.size(), 1u) << Dump(diags);

  // Defaults: state next to the manifest, known_hosts in ~/.ssh.
  Manifest d;
  Diagnostics none;
  repo.Write("fleet.yaml", kBase);
  ASSERT_TRUE(LoadManifest(repo.dir() + "/", &d, &none)) << Dump(none);
  EXPECT_EQ(d.root_dir, repo.dir());
  EXPECT_EQ(d.state.path, repo.dir() + "/.fleet/state.json");
  EXPECT_EQ(d.ssh.known_hosts, "/home/tester/.ssh/known_hosts");
  EXPECT_EQ(d.nodes.at("dgx1").ssh.connect_timeout_s, 10);
}

TEST(ManifestTest, MalformedYamlIsLocatedNeverThrown) {
  struct Case {
    const char* name;
    const char* yaml;
    const char* location;
    const char* text;
  };
  const Case cases[] = {
      {"unbalanced bracket", "version: 1\nnodes: {dgx1: {address: a}\nfleet: x\n",
       "fleet.yaml:", "a '{' without its '}'"},
      {"unbalanced list", "version: 1\nfleet: x\nnodes: [a, b\n", "fleet.yaml:", "a '[' without"},
      {"tab indentation", "version: 1\nfleet: x\nnodes:\n  dgx1:\n\taddress: a\n",
       "fleet.yaml:", "line 5 is indented with a tab"},
      {"bare colon", "version: 1\nfleet: x\n:\n", "fleet.yaml:3:1", "empty key"},
      {"mapping in a scalar", "version: 1\nfleet: a: b\n", "fleet.yaml:2:", "YAML syntax error"},
  };
  for (const Case& c : cases) {
    Loaded l;
    EXPECT_NO_THROW(l = LoadYaml(c.yaml)) << c.name;
    EXPECT_FALSE(l.ok) << c.name;
    const auto found = std::find_if(l.diags.begin(), l.diags.end(), [&](const Diagnostic& d) {
      return d.message.find(c.text) != std::string::npos;
    });
    ASSERT_NE(found, l.diags.end()) << c.name << "\n" << Dump(l.diags);
    EXPECT_EQ(found->ToString().rfind(c.location, 0), 0u) << c.name << ": " << found->ToString();
    EXPECT_GT(found->loc.line, 0) << c.name << ": " << found->ToString();
  }
}

TEST(ManifestTest, EmptyAndMissingFiles) {
  const Loaded empty = LoadYaml("");
  ASSERT_EQ(empty.diags.size(), 1u);
  EXPECT_EQ(empty.diags[0].ToString(),
            "fleet.yaml: error: fleet.yaml is empty; expected at least "
            "version: 1, fleet: <name> "
            "and nodes:");
  const Loaded list = LoadYaml("- a\n- b\n");
  EXPECT_DIAG(list.diags,
              "fleet.yaml:1:1: error: the top level must be a map (key: value "
              "pairs), got a list");
  Manifest m;
  Diagnostics diags;
  EXPECT_FALSE(LoadManifest("/nonexistent/repo", &m, &diags));
  ASSERT_EQ(diags.size(), 1u);
  EXPECT_NE(diags[0].message.find("no fleet.yaml in /nonexistent/repo"), std::string::npos);
}

TEST(ManifestTest, NamesMustBeAddressable) {
  const Loaded l = LoadYaml(std::string(kBase) +
                            "  dgx.9: {address: x}\nstores:\n  local: {path: /x, nodes: [dgx1]}\n");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:3: error: node name 'dgx.9' must be letters, "
              "digits, '-' or '_' (it "
              "becomes part of addresses such as node.<name>)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:10:3: error: a store may not be named 'local': "
              "models use store: local "
              "for each node's own cache");
}

}  // namespace
}  // namespace fleet

namespace fleet {
namespace {

TEST(ManifestTest, PostgresStateBackend) {
  const Loaded l = LoadYaml(std::string(kBase) +
                            "state: {backend: postgres, conn_env: TEAM_PG, schema: lab_state}\n");
  EXPECT_TRUE(l.ok) << Dump(l.diags);
  EXPECT_EQ(l.manifest.state.backend, "postgres");
  EXPECT_EQ(l.manifest.state.conn_env, "TEAM_PG");
  EXPECT_EQ(l.manifest.state.schema, "lab_state");
  const Loaded d = LoadYaml(std::string(kBase) + "state: {backend: postgres}\n");
  EXPECT_TRUE(d.ok) << Dump(d.diags);
  EXPECT_EQ(d.manifest.state.conn_env, "FLEET_STATE_PG");
  EXPECT_EQ(d.manifest.state.schema, "fleet");
}

TEST(ManifestTest, PostgresStateErrorsAreLocated) {
  const Loaded l = LoadYaml(std::string(kBase) +
                            "state:\n"                                    // 8
                            "  backend: postgres\n"                       // 9
                            "  conn_env: \"host=db password=hunter2\"\n"  // 10
                            "  schema: Fleet-State\n"                     // 11
                            "  path: .fleet/state.json\n");               // 12
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:10:13: error: 'conn_env' in state must name an environment variable "
              "(such as FLEET_STATE_PG), not hold a connection string: the string may carry a "
              "password and the manifests repo is committed");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:11:11: error: 'schema' in state must be lower-case letters, digits or "
              "'_' (at most 63), got 'Fleet-State'");
  // Both places side by side, for `fleet state migrate`.
  const Loaded both =
      LoadYaml(std::string(kBase) + "state: {backend: local, path: s.json, schema: x}\n");
  EXPECT_TRUE(both.ok) << Dump(both.diags);
  const Loaded typo = LoadYaml(std::string(kBase) + "state: {backend: postgre}\n");
  EXPECT_FALSE(typo.ok);
}

}  // namespace
// sync: what fleet watch --sync applies by itself; destroying waits by default.
TEST(ManifestTest, SyncSettings) {
  Loaded l = LoadYaml(std::string(kBase));
  ASSERT_TRUE(l.ok);
  EXPECT_EQ(l.manifest.sync.allow, (std::vector<std::string>{"add", "change", "replace"}));
  EXPECT_FALSE(l.manifest.sync.destroy);
  l = LoadYaml(std::string(kBase) + "sync: {allow: [add], destroy: true}\n");
  ASSERT_TRUE(l.ok);
  EXPECT_EQ(l.manifest.sync.allow, (std::vector<std::string>{"add"}));
  EXPECT_TRUE(l.manifest.sync.destroy);
  l = LoadYaml(std::string(kBase) + "sync: {allow: [add, destroy, chnage], destory: true}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:21: error: 'allow' in sync lists 'destroy'; expected add, change or "
              "replace (destroying is `destroy: true`)");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:30: error: 'allow' in sync lists 'chnage'; expected add, change or "
              "replace; did you mean 'change'?");
  EXPECT_DIAG(l.diags,
              "fleet.yaml:8:39: error: unknown key 'destory' in sync; did you mean 'destroy'?");
}

}  // namespace fleet
