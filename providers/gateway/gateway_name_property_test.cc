// Property test for the served names that reach a gateway's HAProxy config
// (issue 44: a recipe's `--served-model-name "0 } || TRUE #"` became an ACL
// that sent every request to one serve). Random names (HAProxy's and
// JSON's special characters, spaces, control bytes, non-UTF-8) go the whole
// way: into a recipe's --served-model-name (the lint accepts exactly the
// safe ones), into routes, into the config RenderHaproxyConfig writes, and
// through Debian's `haproxy -c`. Every config must be accepted, and its
// meaning must be the intended one: read with HAProxy's own word rules,
// each routed model appears once as an ACL value and once as a use_backend
// value, exactly the safe names are routed, and a refused name leaves no
// trace (the config is byte for byte the one for the safe routes alone). Some configs are also run:
// a request for each safe name is answered by its own serve, one for a refused name gets the
// gateway's 404, and a path outside /v1/ never reaches a serve.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "manifests/recipe.h"
#include "manifests/served_name.h"
#include "providers/gateway/gateway_config.h"
#include "tests/support/loopback_port.h"
#include "tests/support/temp_dir.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr int kTrials = 150;
constexpr int kLiveEvery = 15;  // every 15th config is also run

// Pieces HAProxy's config, its ACLs, JSON and TOML care about, drawn more
// often than random bytes.
const std::vector<std::string> kHostile = {
    "}",  "{",       "#",     " ",       "\t",
    "\n", "\r",      "'",     "\"",      "\\",
    "$",  "${HOME}", "%",     ",",       ";",
    "||", "!",       "-",     "-m",      "TRUE",
    "if", "unless",  "\\x41", "str",     std::string("\0", 1),
    ".",  "/",       ":",     "@",       "+",
    "_",  "\x80",    "\xff",  "\xc3\xa9"};
const char kSafe[] = "abcXYZ019";

std::string RandomName(std::mt19937* rng) {
  auto pick = [rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(*rng); };
  std::string s;
  // A third of the names are made of safe pieces only (so that configs
  // route something), the others mix in hostile ones.
  const bool hostile = pick(3) != 0;
  for (size_t parts = 1 + pick(5); parts > 0; --parts) {
    switch (hostile ? pick(3) : 2) {
      case 0:
        s += kHostile[pick(kHostile.size())];
        break;
      case 1:
        s += static_cast<char>(pick(256));
        break;
      default:
        for (size_t n = 1 + pick(6); n > 0; --n) s += kSafe[pick(sizeof(kSafe) - 1)];
        if (pick(2) == 0) s += "._:/@+-"[pick(7)];
    }
  }
  return s;
}

// A TOML basic string that reads back as exactly these bytes where TOML
// can say them; a name it cannot say (not UTF-8) is left out.
bool TomlQuoted(const std::string& s, std::string* out) {
  *out = "\"";
  for (unsigned char c : s) {
    if (c >= 0x80) return false;
    if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\u%04x", c);
      *out += buf;
    } else {
      *out += static_cast<char>(c);
    }
  }
  *out += "\"";
  return true;
}

// A config's lines split into words as HAProxy 2.6 does (cfgparse's
// parse_line): blanks separate, '#' outside quotes starts a comment, a
// backslash escapes the next character, '...' keeps everything, "..."
// keeps everything but escapes. Comment lines give no words.
std::vector<std::vector<std::string>> HaproxyWords(const std::string& config) {
  std::vector<std::vector<std::string>> lines;
  std::istringstream in(config);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> words;
    std::string word;
    bool in_word = false;
    char quote = 0;
    for (size_t i = 0; i < line.size(); ++i) {
      const char c = line[i];
      if (quote == '\'') {
        if (c == '\'')
          quote = 0;
        else
          word += c;
      } else if (c == '\\' && i + 1 < line.size()) {
        word += line[++i];
        in_word = true;
      } else if (quote == '"') {
        if (c == '"')
          quote = 0;
        else
          word += c;
      } else if (c == '\'' || c == '"') {
        quote = c;
        in_word = true;
      } else if (c == '#') {
        break;
      } else if (c == ' ' || c == '\t') {
        if (in_word) words.push_back(word);
        word.clear();
        in_word = false;
      } else {
        word += c;
        in_word = true;
      }
    }
    if (in_word) words.push_back(word);
    if (!words.empty()) lines.push_back(words);
  }
  return lines;
}

// What the config routes, read back from its words: the models its
// `acl fleet_routed` lines accept and the backend each use_backend line
// sends a model to. Any line that mentions the model variable in another
// shape is a failure.
struct Routing {
  std::set<std::string> accepted;
  std::map<std::string, std::string> backend;  // model -> backend
};

Routing ReadRouting(const std::string& config) {
  Routing r;
  for (const std::vector<std::string>& w : HaproxyWords(config)) {
    const bool mentions = std::any_of(w.begin(), w.end(), [](const std::string& x) {
      return x.find("txn.model") != std::string::npos;
    });
    if (!mentions) continue;
    if (w.size() == 6 && w[0] == "acl" && w[1] == "fleet_routed" && w[2] == "var(txn.model)" &&
        w[3] == "-m" && w[4] == "str") {
      EXPECT_TRUE(r.accepted.insert(w[5]).second) << "twice: " << w[5];
    } else if (w.size() == 9 && w[0] == "use_backend" && w[2] == "if" && w[3] == "{" &&
               w[4] == "var(txn.model)" && w[5] == "-m" && w[6] == "str" && w[8] == "}") {
      EXPECT_TRUE(r.backend.emplace(w[7], w[1]).second) << "twice: " << w[7];
    } else if (w.size() == 3 && w[0] == "http-request" && w[1] == "set-var(txn.model)") {
      EXPECT_EQ(w[2], "req.body,json_query($.model)");
    } else {
      ADD_FAILURE() << "a line of another shape mentions the model: "
                    << ::testing::PrintToString(w);
    }
  }
  return r;
}

int FreePort() { return testing_support::UnusedLoopbackPort(); }

// One HTTP/1.0 exchange with 127.0.0.1:port; the whole answer, or "" when
// nothing answered.
std::string Exchange(int port, const std::string& method, const std::string& path,
                     const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string answer;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string request = method + " " + path +
                                " HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                                std::to_string(body.size()) + "\r\n\r\n" + body;
    if (write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char buf[4096];
      for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) answer.append(buf, n);
    }
  }
  close(fd);
  return answer;
}

// The status code of an HTTP answer ("HTTP/1.1 404 Not Found": 404), or 0.
int StatusOf(const std::string& answer) {
  if (answer.rfind("HTTP/1.", 0) != 0 || answer.size() < 12) return 0;
  return std::atoi(answer.c_str() + 9);
}

class GatewayNameProperty : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v haproxy >/dev/null 2>&1") != 0) GTEST_SKIP() << "no haproxy";
    ASSERT_NE(dir_, "");
  }

  bool HaproxyAccepts(const std::string& config) {
    const fs::path path = fs::path(dir_) / "check.cfg";
    std::ofstream(path, std::ios::trunc) << config;
    return std::system(("haproxy -c -q -f " + path.string() + " >/dev/null 2>&1").c_str()) == 0;
  }

  // Runs `config` with a stand-in serve on each route's port (a frontend of
  // the same HAProxy that answers its deployment's name) and checks what
  // reaches which serve.
  void CheckLive(const GatewayWant& w, const std::vector<std::string>& refused) {
    std::string config = RenderHaproxyConfig(w);
    for (const GatewayRoute& r : w.routes)
      config += "frontend serve_" + r.deployment + "\n  bind 127.0.0.1:" + std::to_string(r.port) +
                "\n  http-request return status 200 content-type text/plain string served-by-" +
                r.deployment + "\n\n";
    const fs::path path = fs::path(dir_) / "live.cfg";
    std::ofstream(path, std::ios::trunc) << config;
    const pid_t pid = fork();
    if (pid == 0) {
      freopen("/dev/null", "w", stderr);
      execlp("haproxy", "haproxy", "-db", "-q", "-f", path.c_str(), nullptr);
      _exit(127);
    }
    ASSERT_GT(pid, 0);
    for (int i = 0; i < 100 && Exchange(w.port, "GET", "/health", "").empty(); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (const GatewayRoute& r : w.routes) {
      const std::string body = nlohmann::json{{"model", r.model}}.dump();
      // A server counts as down until its first health check.
      std::string answer;
      for (int i = 0; i < 60; ++i) {
        answer = Exchange(w.port, "POST", "/v1/chat/completions", body);
        if (StatusOf(answer) != 503) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      EXPECT_NE(answer.find("served-by-" + r.deployment), std::string::npos) << r.model << ":\n"
                                                                             << answer;
      // Outside the OpenAI API nothing reaches a serve, whatever the body.
      for (const char* path : {"/fault", "/v1/../fault", "/v1/%2e%2e/fault", "/admin/x"}) {
        const std::string other = Exchange(w.port, "POST", path, body);
        EXPECT_EQ(StatusOf(other), 404) << path << ":\n" << other;
        EXPECT_EQ(other.find("served-by-"), std::string::npos) << path << ":\n" << other;
      }
    }
    for (const std::string& name : refused) {
      const std::string body = nlohmann::json{{"model", name}}.dump(
          -1, ' ', false, nlohmann::json::error_handler_t::replace);
      const std::string answer = Exchange(w.port, "POST", "/v1/chat/completions", body);
      EXPECT_NE(answer.find("model_not_found"), std::string::npos) << name << ":\n" << answer;
    }
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
  }

  const testing_support::TempDir tmp_{"fleet-gw-name"};
  const std::string dir_ = tmp_.path();
};

TEST_F(GatewayNameProperty, NoNameChangesTheMeaningOfTheGatewayConfig) {
  std::mt19937 rng(20261205);
  int routed = 0, refused_total = 0, live = 0;
  for (int trial = 0; trial < kTrials && !HasFailure(); ++trial) {
    GatewayWant w;
    w.gateway = "lab";
    w.port = FreePort();
    std::set<std::string> safe;
    std::vector<std::string> refused;
    const int n = 1 + trial % 4;
    for (int i = 0; i < n; ++i) {
      std::string name = RandomName(&rng);
      while (safe.count(name)) name = RandomName(&rng);  // one serve per model
      // The recipe lint accepts the name exactly when it is safe.
      std::string quoted;
      if (name.find('{') == std::string::npos && TomlQuoted(name, &quoted)) {
        Recipe recipe;
        Diagnostics diags;
        const bool ok = ParseRecipe("args = [\"--served-model-name\", " + quoted + "]\n",
                                    "recipes/r.toml", &recipe, &diags);
        EXPECT_EQ(ok, IsSafeServedName(name)) << quoted;
        if (!ok) {
          ASSERT_FALSE(diags.empty());
          EXPECT_EQ(diags.front().loc.line, 1);
          EXPECT_EQ(diags.front().loc.column, 32) << diags.front().ToString();
        }
      }
      const std::string deployment = "d" + std::to_string(i);
      w.routes.push_back(
          {name, deployment, "n" + std::to_string(i), "127.0.0.1", FreePort(), "/health"});
      // Names are the subject here, not sizes: a small buffer keeps each
      // HAProxy start cheap (meson's MALLOC_PERTURB_ fills every buffer
      // HAProxy allocates at start; 4 MiB ones made this test 170 s).
      w.routes.back().max_request = uint64_t{64} << 10;
      if (IsSafeServedName(name))
        safe.insert(name);
      else
        refused.push_back(name);
    }
    std::sort(w.routes.begin(), w.routes.end());
    SealGatewayWant(&w);
    const std::string config = RenderHaproxyConfig(w);  // never throws (non-UTF-8 included)

    // The meaning, read as HAProxy reads words: exactly the safe names.
    const Routing routing = ReadRouting(config);
    EXPECT_EQ(routing.accepted, safe) << config;
    std::set<std::string> sent;
    for (const auto& [model, unused] : routing.backend) sent.insert(model);
    EXPECT_EQ(sent, safe) << config;
    // The route comments carry who serves where, not the check or size
    // settings: those read back as their defaults.
    std::vector<GatewayRoute> kept, read_back;
    for (const GatewayRoute& r : w.routes)
      if (safe.count(r.model)) {
        kept.push_back(r);
        read_back.push_back(r);
        read_back.back().max_request = GatewayRoute{}.max_request;
      }
    EXPECT_EQ(ParseConfigRoutes(config), read_back);
    // A refused name leaves no trace: the config is the one written for the
    // safe routes alone (with the same config hash).
    GatewayWant only_safe = w;
    only_safe.routes = kept;
    EXPECT_EQ(RenderHaproxyConfig(only_safe), config);

    // HAProxy accepts every config fleet writes.
    EXPECT_TRUE(HaproxyAccepts(config)) << config;
    routed += safe.size();
    refused_total += refused.size();

    if (trial % kLiveEvery == 0) {
      std::erase_if(w.routes, [&](const GatewayRoute& r) { return !safe.count(r.model); });
      CheckLive(w, refused);
      ++live;
    }
  }
  RecordProperty("routed", routed);
  RecordProperty("refused", refused_total);
  std::printf("%d configs (%d run), %d names routed, %d refused\n", kTrials, live, routed,
              refused_total);
  EXPECT_GT(routed, 40);
  EXPECT_GT(refused_total, 40);
}

// Many models with long names: HAProxy holds at most 64 words a line, so
// each routed model is an ACL line of its own, and the model list fits.
TEST_F(GatewayNameProperty, ManyLongNamesStillMakeAConfigHaproxyAccepts) {
  GatewayWant w;
  w.gateway = "lab";
  w.port = 8000;
  for (int i = 0; i < 80; ++i) {
    std::string name = "org/model-" + std::to_string(i) + "@";
    name += std::string(kMaxServedNameLength - name.size(), 'x');
    w.routes.push_back({name, "d" + std::to_string(i), "n1", "10.0.0.1", 30000 + i, "/health"});
  }
  std::sort(w.routes.begin(), w.routes.end());
  SealGatewayWant(&w);
  const std::string config = RenderHaproxyConfig(w);
  EXPECT_EQ(ReadRouting(config).accepted.size(), 80u);
  EXPECT_TRUE(HaproxyAccepts(config));
}

}  // namespace
}  // namespace fleet
