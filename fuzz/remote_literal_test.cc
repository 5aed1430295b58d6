// Property: hostile bytes fleet puts into remote commands reach a real node
// literally and never execute. A simulated node (tests/sim/fleet-sim, real
// sshd, real login shell) runs the commands fleet builds, with a stand-in
// container CLI (/srv/bin/podman, first on the node's PATH) that echoes back
// the argv it was given. Random words made of quotes, newlines, $(),
// backticks, globs, leading dashes, `~`, control and non-UTF-8 bytes are
// used as
//   - paths and env values (ShellCommand, as every provider builds commands),
//   - recipe args, env values and mount paths (RunArgsNoPull: `podman run`),
//   - image refs (the image probe fragment, ImageProbeScript),
//   - model file names and the hub cache path (the model probe fragment,
//     HubProbeScript, whose listing must name every file exactly);
// every $() and backtick in them would create a canary file on the node.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "providers/shared/hub_cache.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "providers/shared/run_args.h"
#include "src/local_transport.h"
#include "src/shell_quote.h"
#include "src/transport.h"

namespace fleet {
namespace {

constexpr int kTrials = 200;

// Words that would run something if a shell read them unquoted: each
// creates $HOME/pwned on the node.
const std::vector<std::string>& Pieces() {
  static const std::vector<std::string> pieces = {"'",
                                                  "\"",
                                                  "$(touch ~/pwned)",
                                                  "`touch ~/pwned`",
                                                  "$(touch$IFS$HOME/pwned)",
                                                  ";touch ~/pwned;",
                                                  "|touch ~/pwned",
                                                  "&&touch ~/pwned",
                                                  "\ntouch ~/pwned\n",
                                                  "*",
                                                  "?",
                                                  "[a-z]",
                                                  "/*",
                                                  "~",
                                                  "~root",
                                                  "-",
                                                  "--",
                                                  "-rf",
                                                  "\n",
                                                  " ",
                                                  "\t",
                                                  "\\",
                                                  "${HOME}",
                                                  "$0",
                                                  "#",
                                                  "!",
                                                  "%s",
                                                  "=",
                                                  ":",
                                                  "@",
                                                  "\xff",
                                                  "\xc3\xa9",
                                                  "\x80",
                                                  "\x01",
                                                  "\r",
                                                  "{a,b}",
                                                  ">x",
                                                  "<x",
                                                  "a"};
  return pieces;
}

// A random hostile word: pieces, random bytes (never NUL: no argv holds
// one), sometimes a leading dash. Never empty when `nonempty`.
std::string HostileWord(std::mt19937* rng, bool nonempty = false) {
  auto pick = [rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(*rng); };
  std::string w = pick(4) == 0 ? "-" : "";
  for (size_t n = pick(8) + (nonempty ? 1 : 0); n > 0; --n) {
    if (pick(3) == 0)
      w.push_back(static_cast<char>(1 + pick(255)));
    else
      w += Pieces()[pick(Pieces().size())];
  }
  return w;
}

// A file name (no '/', not "." or ".."), else hostile. `framing`: also
// without newline and tab, which the hub cache listing uses as separators
// (a known limit: such names are misread; see docs/testing.md).
std::string HostileFileName(std::mt19937* rng, bool framing = false) {
  std::string w;
  while (w.empty() || w == "." || w == "..") {
    w = HostileWord(rng, true);
    std::erase(w, '/');
    if (framing) std::erase_if(w, [](char c) { return c == '\n' || c == '\t'; });
  }
  return w.size() > 200 ? w.substr(0, 200) : w;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Echoes its argv to ~/argv.log (argc, then each argument, each followed by
// NUL) and answers
// like podman asked about an image it does not hold.
constexpr char kFakePodman[] =
    "#!/bin/sh\n"
    "{ printf '%s\\0' \"$#\"; for a in \"$@\"; do printf '%s\\0' \"$a\"; done; } "
    ">>\"$HOME/argv.log\"\n"
    "echo \"Error: $1: image not known\" >&2\n"
    "exit 125\n";

class RemoteLiteralTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (geteuid() != 0) {
      why_ = "needs root (fleet-sim creates node users)";
      return;
    }
    char tmpl[] = "/tmp/fleet-remote-literal.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) {
      why_ = "mkdtemp failed";
      return;
    }
    dir_ = tmpl;
    SshEndpoint here;
    here.node = "test-host";
    here.address = "local";
    LocalTransport local(here);
    auto r = local.Run(
        ShellCommand({FLEET_SOURCE_ROOT "/tests/sim/fleet-sim", "start", dir_, "--nodes", "1"}));
    if (!r.ok() || r->exit_code != 0) {
      why_ = "fleet-sim start failed: " + (r.ok() ? r->err : r.status().message());
      return;
    }
    nlohmann::json sim = nlohmann::json::parse(ReadFileOrEmpty(dir_ + "/sim.json"), nullptr, false);
    if (sim.is_discarded() || sim["nodes"].empty()) {
      why_ = "cannot read " + dir_ + "/sim.json";
      return;
    }
    SshEndpoint e;
    e.node = sim["nodes"][0].value("name", "");
    e.address = "127.0.0.1";
    e.port = sim["nodes"][0].value("port", 0);
    e.user = sim["nodes"][0].value("user", "");
    e.identity = sim.value("identity", "");
    e.known_hosts = sim.value("known_hosts", "");
    e.connect_timeout_s = 5;
    node_ = MakeTransport(e).release();
    Status s = node_->Connect();
    if (!s.ok()) why_ = "cannot connect to the simulated node: " + s.message();
    // The node's /srv is <dir>/nodes/<name>/root here (written as root).
    const std::string fake = dir_ + "/nodes/" + e.node + "/root/bin/podman";
    std::ofstream(fake, std::ios::trunc) << kFakePodman;
    if (chmod(fake.c_str(), 0755) != 0) why_ = "cannot install the stand-in podman at " + fake;
  }

  static void TearDownTestSuite() {
    delete node_;
    node_ = nullptr;
    if (dir_.empty()) return;
    SshEndpoint here;
    here.node = "test-host";
    here.address = "local";
    LocalTransport local(here);
    local.Run(ShellCommand({FLEET_SOURCE_ROOT "/tests/sim/fleet-sim", "stop", dir_, "--purge"}));
    local.Run(ShellCommand({"rm", "-rf", "--", dir_}));
  }

  void SetUp() override {
    if (!why_.empty() && geteuid() != 0) GTEST_SKIP() << why_;
    ASSERT_TRUE(why_.empty()) << why_;
    Run("rm -f ~/argv.log ~/pwned");
  }

  // Nothing in any word ran: the canary does not exist.
  void TearDown() override {
    if (node_ == nullptr || !why_.empty()) return;
    EXPECT_EQ(Run("test -e ~/pwned && echo EXECUTED || echo clean").out, "clean\n");
  }

  CommandResult Run(const std::string& command) {
    auto r = node_->Run(command);
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : CommandResult{};
  }

  // The argv of every call of the stand-in podman since the last call.
  std::vector<std::vector<std::string>> PodmanCalls() {
    std::string log = Run("cat ~/argv.log 2>/dev/null; rm -f ~/argv.log").out;
    std::vector<std::vector<std::string>> calls;
    std::vector<std::string> fields;
    for (size_t at = 0, nul; (nul = log.find('\0', at)) != std::string::npos; at = nul + 1)
      fields.push_back(log.substr(at, nul - at));
    for (size_t i = 0; i < fields.size();) {
      const size_t argc = std::stoul(fields[i++]);
      if (i + argc > fields.size()) break;
      calls.emplace_back(fields.begin() + i, fields.begin() + i + argc);
      i += argc;
    }
    return calls;
  }

  static std::string Visible(const std::string& s) { return nlohmann::json(s).dump(); }

  std::mt19937 rng_{20261130};
  static inline Transport* node_ = nullptr;
  static inline std::string dir_;
  static inline std::string why_;
};

// Paths and env values as argv words: every byte comes back.
TEST_F(RemoteLiteralTest, WordsComeBackByteForByte) {
  std::string script, expected;
  for (int i = 0; i < kTrials; ++i) {
    std::string w = HostileWord(&rng_);
    script += ShellCommand({"printf", "%s\\0", w}) + "\n";
    expected += w + '\0';
  }
  CommandResult r = Run(script);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(r.out == expected) << "the node printed something else";
}

// `podman run` of a deployment: recipe args, env values, a mount path.
TEST_F(RemoteLiteralTest, RunArgsReachTheContainerCliLiterally) {
  for (int i = 0; i < kTrials / 4; ++i) {
    std::vector<std::string> options = {"-e", "VAR=" + HostileWord(&rng_), "-v",
                                        "/srv/m" + HostileFileName(&rng_) + ":/model:ro"};
    std::vector<std::string> command = {HostileWord(&rng_), "--arg", HostileWord(&rng_),
                                        HostileWord(&rng_)};
    std::vector<std::string> argv =
        RunArgsNoPull("podman", options, "sha256:" + std::string(64, 'a'), command);
    Run(ShellCommand(argv));
    auto calls = PodmanCalls();
    ASSERT_EQ(calls.size(), 1u);
    std::vector<std::string> want(argv.begin() + 1, argv.end());
    EXPECT_EQ(calls[0], want) << "argv " << Visible(ShellCommand(argv));
  }
}

// The image probe asks the CLI about exactly the ref the manifest names.
TEST_F(RemoteLiteralTest, ImageRefsReachTheProbeLiterally) {
  for (int i = 0; i < kTrials / 4; ++i) {
    const std::string text = HostileWord(&rng_, true) + "@sha256:" + std::string(64, 'b');
    ImageRef ref = ParseImageRef(text);
    CommandResult r = Run(ImageProbeScript("podman", ref));
    auto calls = PodmanCalls();
    bool asked = false;
    for (const auto& call : calls)
      for (const auto& arg : call) asked = asked || arg == ref.Lookup();
    EXPECT_TRUE(asked) << "podman was never asked about " << Visible(ref.Lookup()) << "; probe "
                       << Visible(r.out);
    ImageProbe p = ParseImageProbe(r.out);
    EXPECT_FALSE(p.by_ref.found) << Visible(text);
  }
}

// Model files with hostile names in a hub cache at a hostile path: the
// probe lists every one by its exact name (names without newline or tab).
TEST_F(RemoteLiteralTest, ModelFileNamesComeBackExactly) {
  const std::string rev = "93d7ea55e731d3fe847a927d8a6a2853977d85d2";
  for (int i = 0; i < 10; ++i) {
    HubProbeTarget t;
    t.cache = Run("printf %s \"$HOME\"").out + "/c" + HostileFileName(&rng_, true);
    t.repo = "org/tiny";
    t.revision = rev;
    const std::string snap = t.cache + "/" + HubRepoDirName(t.repo) + "/snapshots/" + rev;
    std::vector<std::string> names;
    std::string make = ShellCommand({"mkdir", "-p", "--", snap});
    for (int n = 0; n < 8; ++n) {
      names.push_back(HostileFileName(&rng_, true));
      make += " && " + ShellCommand({"touch", "--", snap + "/" + names.back()});
    }
    CommandResult made = Run(make);
    ASSERT_EQ(made.exit_code, 0) << made.err;
    CommandResult r = Run(HubProbeScript(t));
    HubProbe p = ParseHubProbe(r.out);
    EXPECT_TRUE(p.snapshot) << "cache " << Visible(t.cache) << ": " << Visible(r.out);
    for (const std::string& name : names)
      EXPECT_NE(p.Find(name), nullptr)
          << "file " << Visible(name) << " not listed; probe printed " << Visible(r.out);
    Run(ShellCommand({"rm", "-rf", "--", t.cache}));
  }
}

}  // namespace
}  // namespace fleet
