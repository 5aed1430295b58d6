#include "providers/shared/serving/smoke_check.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <random>
#include <regex>
#include <vector>

#include "manifests/own_fault.h"
#include "manifests/served_name.h"
#include "manifests/smoke_schema.h"
#include "providers/shared/engine_api.h"
#include "providers/shared/serving/connection_owner_sh.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

std::string NowIso(Clock* clock) {
  const auto now = clock->WallNow();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = static_cast<int>(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

// A sample for a report: long prompts keep their start and end.
std::string Shorten(const std::string& s, size_t max = 600) {
  if (s.size() <= max) return s;
  return s.substr(0, max / 2) + " […" + std::to_string(s.size() - max) + " chars…] " +
         s.substr(s.size() - max / 2);
}

// max_tokens of a chat, tools or needle check that declares none.
constexpr int kDefaultChatMaxTokens = 1024;

// A check the controller could not make (result "unchecked") says so first.
const std::string kOwnFault = "the controller could not check (its own failure): ";

SmokeResult Begin(const SmokeTarget& t, const std::string& check, Clock* clock) {
  SmokeResult r;
  r.time = NowIso(clock);
  r.deployment = t.deployment;
  r.node = t.node;
  r.check = check;
  return r;
}

// A TCP connection to the client address, held open while the node is
// asked who accepted it. -1 with `error` set when it cannot connect.
// *own is set when the failure is the controller's (own_fault.h): no
// socket, no resolver, its own network.
int ConnectTo(const std::string& host, int port, int* local_port, std::string* error, bool* own) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *error = "cannot resolve " + host + ": " +
             (rc == EAI_SYSTEM ? ErrnoText(errno) : std::string(gai_strerror(rc)));
    *own = true;  // the controller's resolver: nothing about the serve
    NoteOwnFault();
    return -1;
  }
  int fd = -1;
  for (addrinfo* a = res; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      *error = "cannot open a socket: " + ErrnoText(errno);
      *own = true;
      continue;
    }
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      *own = IsOwnErrno(errno);
      *error = "cannot connect to " + host + ":" + std::to_string(port) + ": " + ErrnoText(errno);
      close(fd);
      fd = -1;
    }
  }
  if (fd < 0 && *own) NoteOwnFault();
  freeaddrinfo(res);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
  *local_port = ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                               : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

std::map<std::string, std::string> KeyValues(const std::string& out) {
  std::map<std::string, std::string> kv;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t eol = out.find('\n', pos);
    if (eol == std::string::npos) eol = out.size();
    const std::string line = out.substr(pos, eol - pos);
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
    pos = eol + 1;
  }
  return kv;
}

SmokeResult CheckIdentity(const SmokeTarget& t, Transport* node, const ConnectionLocator& locate,
                          Clock* clock) {
  SmokeResult r = Begin(t, "identity", clock);
  const auto start = clock->SteadyNow();
  int client_port = 0;
  std::string error;
  bool own = false;
  const int fd = ConnectTo(t.host, t.port, &client_port, &error, &own);
  if (fd < 0) {
    r.result = own ? "unchecked" : "error";
    r.detail = (own ? kOwnFault : "") + "client address " + t.BaseUrl() + ": " + error;
    return r;
  }
  Result<CommandResult> out =
      node->Run(ConnectionOwnerScript(t.cli, t.container, t.port, client_port, node->LocalPort()));
  std::string elsewhere;
  std::map<std::string, std::string> kv;
  if (out.ok()) kv = KeyValues(out->out);
  const std::string owner = kv["owner"];
  const bool seen = !kv["inode"].empty() && kv["inode"] != "0";
  if (out.ok() && owner != "container" && locate) elsewhere = locate(client_port);
  close(fd);
  r.wall_s = std::chrono::duration<double>(clock->SteadyNow() - start).count();
  const std::string who = "deployment." + t.deployment + "@" + t.node;
  if (!out.ok()) {
    r.result = "error";
    r.detail = "cannot ask " + t.node + " who holds the connection: " + out.status().message();
  } else if (owner == "container" && kv["label"] == t.deployment) {
    r.result = "pass";
    if (!kv["via_nat"].empty())
      r.detail = "the source port was rewritten on the way (NAT): matched by the address " +
                 t.node + " sees the controller at, " + kv["via_nat"];
  } else if (owner == "stopped") {
    r.result = "fail";
    r.detail = t.container + " is not running on " + t.node + ", yet a process there answers " +
               "the client address " + t.BaseUrl() + " of " + who;
  } else if (owner == "unknown" && seen) {
    // The node sees the connection but cannot tell its process (a root
    // daemon's container): as far as it can be checked, it is this node.
    r.result = "pass";
    r.detail = t.node + " holds the connection; its process is not visible to the node user";
  } else {
    r.result = "fail";
    r.detail = "the client address " + t.BaseUrl() + " of " + who + " does not reach " +
               t.container + " on " + t.node + ": " +
               (seen ? "on " + t.node + " another process holds the connection"
                     : t.node + " holds no connection from it") +
               (elsewhere.empty() ? std::string(" (another box answers there)")
                                  : "; it reaches " + elsewhere + " instead");
  }
  return r;
}

SmokeResult CheckModel(const SmokeTarget& t, Clock* clock) {
  SmokeResult r = Begin(t, "model", clock);
  const auto start = clock->SteadyNow();
  Result<std::vector<std::string>> names = ListServedModels(t.BaseUrl(), 30);
  r.wall_s = std::chrono::duration<double>(clock->SteadyNow() - start).count();
  if (!names.ok()) {
    r.result = names.status().own_fault() ? "unchecked" : "error";
    r.detail = names.status().message();
    return r;
  }
  std::string listed;
  for (const std::string& n : *names) listed += (listed.empty() ? "" : ", ") + n;
  r.reply = listed;
  const bool found = t.served_model.empty()
                         ? !names->empty()
                         : std::find(names->begin(), names->end(), t.served_model) != names->end();
  r.result = found ? "pass" : "fail";
  if (!found)
    r.detail = t.BaseUrl() + "/v1/models lists " +
               (listed.empty() ? "no model" : "'" + listed + "'") + ", not '" + t.served_model +
               "' (deployment." + t.deployment + ")";
  return r;
}

nlohmann::json WeatherTool() {
  return nlohmann::json::array({{{"type", "function"},
                                 {"function",
                                  {{"name", "get_weather"},
                                   {"description", "The current weather in a city"},
                                   {"parameters",
                                    {{"type", "object"},
                                     {"properties", {{"city", {{"type", "string"}}}}},
                                     {"required", {"city"}}}}}}}});
}

// "pass", "cut" or "fail" for a reply that came back (no transport error).
void Judge(const SmokeCheck& check, const std::string& expect, const ChatReply& reply,
           SmokeResult* r) {
  const bool cut = reply.finish_reason == "length";
  if (check.tools) {
    const ToolCall call = FirstToolCall(reply);
    if (!call.present) {
      r->result = cut ? "cut" : "fail";
      r->detail = cut ? "cut by max_tokens before a tool call" : "no tool call came back";
      return;
    }
    nlohmann::json args = nlohmann::json::parse(call.arguments, nullptr, false);
    if (call.name != "get_weather")
      r->detail = "the tool call names '" + call.name + "', not get_weather";
    else if (args.is_discarded() || !args.is_object())
      r->detail = "the tool call's arguments are not a JSON object: " + call.arguments;
    r->result = r->detail.empty() ? "pass" : "fail";
    return;
  }
  std::regex re;
  std::string why;
  CompileExpect(expect, &re, &why);
  if (!reply.content_null && std::regex_search(reply.content, re)) {
    r->result = "pass";
    return;
  }
  if (cut) {
    // Not a failure: the engine may be right and the budget short (the
    // log's content=null: max_tokens 50-80 against 105-145 tokens of
    // reasoning). Said plainly, with what the budget went on.
    const int budget = check.max_tokens > 0 ? check.max_tokens : kDefaultChatMaxTokens;
    r->result = "cut";
    r->detail = "the reply was cut by max_tokens " + std::to_string(budget) +
                " (finish_reason length) before it matched /" + expect + "/: " +
                (reply.content_null ? "the reasoning used the whole budget, content null"
                                    : std::string("the content was cut")) +
                (reply.reasoning.empty() ? std::string()
                                         : " (" + std::to_string(reply.reasoning.size()) +
                                               " characters of reasoning)") +
                "; raise max_tokens above the model's reasoning";
    return;
  }
  r->result = "fail";
  r->detail = reply.content_null ? "no content in the reply (content=null, finish_reason " +
                                       reply.finish_reason + ")"
                                 : "the reply does not match /" + expect + "/";
}

}  // namespace

nlohmann::json SmokeResult::ToJson() const {
  nlohmann::json j = {{"time", time},
                      {"deployment", deployment},
                      {"node", node},
                      {"check", check},
                      {"result", result}};
  if (!detail.empty()) j["detail"] = detail;
  if (wall_s >= 0) j["wall_s"] = wall_s;
  if (ttft_s >= 0) j["ttft_s"] = ttft_s;
  if (tps >= 0) j["tps"] = tps;
  if (fresh_ttft_s >= 0) j["fresh_ttft_s"] = fresh_ttft_s;
  if (cached_ttft_s >= 0) j["cached_ttft_s"] = cached_ttft_s;
  if (min_decode_tps > 0) j["min_decode_tps"] = min_decode_tps;
  if (max_ttft_s > 0) j["max_ttft_s"] = max_ttft_s;
  if (!passed()) {
    j["prompt"] = prompt;
    j["reply"] = reply;
  }
  return j;
}

SmokeResult SmokeResult::FromJson(const nlohmann::json& j) {
  SmokeResult r;
  r.time = j.value("time", "");
  r.deployment = j.value("deployment", "");
  r.node = j.value("node", "");
  r.check = j.value("check", "");
  r.result = j.value("result", "");
  r.detail = j.value("detail", "");
  r.wall_s = j.value("wall_s", -1.0);
  r.ttft_s = j.value("ttft_s", -1.0);
  r.tps = j.value("tps", -1.0);
  r.fresh_ttft_s = j.value("fresh_ttft_s", -1.0);
  r.cached_ttft_s = j.value("cached_ttft_s", -1.0);
  r.min_decode_tps = j.value("min_decode_tps", -1.0);
  r.max_ttft_s = j.value("max_ttft_s", -1.0);
  r.prompt = j.value("prompt", "");
  r.reply = j.value("reply", "");
  return r;
}

std::string ExpectedServedModel(const Manifest& m, const ContainerSpec& spec) {
  const std::vector<std::string>& c = spec.command;
  // The same reading as the recipe lint's (manifests/served_name.h).
  if (auto arg = FindServedNameArg(c)) return arg->value;
  auto d = m.deployments.find(spec.deployment);
  if (d != m.deployments.end() && !d->second.recipe.model.empty() && !c.empty()) return c[0];
  return "";
}

SmokeTarget TargetFor(const Manifest& m, const ContainerSpec& spec) {
  SmokeTarget t;
  t.deployment = spec.deployment;
  t.node = spec.node;
  auto n = m.nodes.find(spec.node);
  t.host = n != m.nodes.end() ? n->second.address : spec.health_host;
  t.port = spec.port;
  t.cli = spec.cli;
  t.container = spec.container;
  t.served_model = ExpectedServedModel(m, spec);
  return t;
}

std::string ConnectionOwnerScript(const std::string& cli, const std::string& container, int port,
                                  int client_port, int ssh_port) {
  char local[16], remote[16];
  std::snprintf(local, sizeof local, ":%04X", port);
  std::snprintf(remote, sizeof remote, ":%04X", client_port);
  // The engine API's GET goes in as shell the script evaluates: the node
  // provider owns how the engine's socket is found and asked.
  const std::string api_get =
      EngineSocketScript(cli) +
      ProbeApiGetScript("co_out", "co_api", "/containers/" + container + "/json", {"200"});
  return "sh -c " + ShellQuote(std::string(kConnectionOwnerScript, kConnectionOwnerScriptSize)) +
         " fleet-connection-owner " + ShellQuote(local) + " " + ShellQuote(remote) + " " +
         ShellQuote(std::to_string(ssh_port)) + " " + ShellQuote(cli) + " " +
         ShellQuote(container) + " " + ShellQuote(kDeploymentLabel) + " " + ShellQuote(api_get) +
         "\n";
}

std::string NeedlePrompt(int tokens, std::string* answer, std::string* where) {
  static const char* kFiller[] = {
      "The grass is green. ",      "The sky is blue. ",
      "The sun is yellow. ",       "Here we go, there and back again. ",
      "A river runs to the sea. ", "Stones keep their shape for a long time. "};
  static const char* kWords[] = {"zebra", "harbor", "lantern", "quartz", "meadow", "falcon"};
  std::random_device rd;
  std::mt19937 rng(rd());
  const std::string word = kWords[rng() % 6];
  *answer = std::to_string(100000 + rng() % 900000);
  const size_t chars = static_cast<size_t>(tokens) * 4;  // ~4 characters a token
  const double depth = 0.05 + (rng() % 900) / 1000.0;
  std::string text;
  text.reserve(chars + 200);
  size_t i = 0;
  bool placed = false;
  while (text.size() < chars) {
    if (!placed && text.size() >= depth * chars) {
      text += "The magic number of " + word + " is " + *answer + ". ";
      placed = true;
    }
    text += kFiller[i++ % 6];
  }
  if (!placed) text += "The magic number of " + word + " is " + *answer + ". ";
  char d[32];
  std::snprintf(d, sizeof d, "%.0f%%", depth * 100);
  *where = d;
  return text + "\n\nWhat is the magic number of " + word + "? Reply with the number only.";
}

int PrefillAllowanceSeconds(const SmokeCheck& check, size_t prompt_chars) {
  const double tps = check.prefill_tps > 0 ? check.prefill_tps : kDefaultPrefillTps;
  // ~4 characters a token, as NeedlePrompt builds them and engines count.
  const double tokens = static_cast<double>(prompt_chars) / 4;
  const double s = check.stall_s + std::ceil(tokens / tps);
  return static_cast<int>(std::min<double>(s, check.timeout_s));
}

std::string AllowanceText(const SmokeCheck& check, size_t prompt_chars) {
  char tps[32];
  std::snprintf(tps, sizeof tps, "%g",
                check.prefill_tps > 0 ? check.prefill_tps : kDefaultPrefillTps);
  return "the allowance: ~" + std::to_string(prompt_chars / 4) + " prompt tokens at " + tps +
         " tokens/s (prefill_tps" +
         (check.prefill_tps > 0 ? std::string() : std::string(", not declared: the default")) +
         ") + stall " + std::to_string(check.stall_s) + " s, at most the timeout " +
         std::to_string(check.timeout_s) + " s";
}

namespace {

// What came back, for a report: the tool calls, the raw body when the API
// gave no content, else the content.
std::string ReplySample(const ChatReply& reply) {
  return Shorten(!reply.tool_calls.empty()                   ? reply.tool_calls.dump()
                 : reply.content_null && reply.error.empty() ? reply.raw
                                                             : reply.content,
                 1000);
}

// A chat, tools or needle check: the reply judged.
void RunChatCheck(const std::string& base_url, const std::string& model, const SmokeCheck& check,
                  SmokeResult* r) {
  ChatRequest req;
  req.model = model;
  req.timeout_s = check.timeout_s;
  // A stall counts from the first token on: before it the engine prefills
  // and sends nothing, for as long as the prompt's allowance (below).
  req.stall_s = std::min(check.timeout_s, check.stall_s);
  req.max_tokens = check.max_tokens > 0 ? check.max_tokens : kDefaultChatMaxTokens;
  std::string expect = check.expect, where;
  if (check.needle_tokens > 0) {
    std::string answer;
    req.prompt = NeedlePrompt(check.needle_tokens, &answer, &where);
    expect = "\\b" + answer + "\\b";
  } else if (check.tools) {
    req.prompt =
        check.chat.empty() ? "What is the weather in Paris? Use the get_weather tool." : check.chat;
    req.tools = WeatherTool();
  } else {
    req.prompt = check.chat;
  }
  req.first_token_s = PrefillAllowanceSeconds(check, req.prompt.size());
  ChatReply reply = Chat(base_url, req);
  r->served_by = reply.served_by;
  r->wall_s = reply.wall_s;
  r->ttft_s = reply.ttft_s;
  r->tps = reply.decode_tps;
  r->prompt = Shorten(req.prompt);
  r->reply = ReplySample(reply);
  if (!reply.error.empty()) {
    r->result = reply.own_fault ? "unchecked" : "error";
    r->detail = reply.error;
    if (reply.no_first_token) r->detail += "; " + AllowanceText(check, req.prompt.size());
    if (r->reply.empty()) r->reply = Shorten(reply.raw, 1000);
    return;
  }
  Judge(check, expect, reply, r);
  if (check.needle_tokens > 0 && !r->passed())
    r->detail +=
        " (the needle was at " + where + " of ~" + std::to_string(check.needle_tokens) + " tokens)";
}

// A fresh_context check: the fresh prompt, then the same prompt again. Its
// reply is not judged (a short budget, any answer): only that tokens came
// back, and when (the floors, after). Timings are the fresh send's.
void RunFreshContext(const std::string& base_url, const std::string& model, const SmokeCheck& check,
                     Clock* clock, SmokeResult* r) {
  ChatRequest req;
  req.model = model;
  req.prompt = FreshContextPrompt(check.fresh_context_tokens);
  req.max_tokens = check.max_tokens > 0 ? check.max_tokens : 16;
  // A long prefill sends no byte until it ends: only the timeout bounds it
  // (its max_ttft judges it); a stall counts from the first token.
  req.timeout_s = check.timeout_s;
  req.stall_s = std::min(check.timeout_s, check.stall_s);
  r->prompt = Shorten(req.prompt);
  const auto start = clock->SteadyNow();
  const ChatReply fresh = Chat(base_url, req);
  ChatReply again;
  if (fresh.error.empty()) {
    req.timeout_s = std::max(1, check.timeout_s - static_cast<int>(fresh.wall_s));
    again = Chat(base_url, req);
  }
  r->wall_s = std::chrono::duration<double>(clock->SteadyNow() - start).count();
  r->ttft_s = r->fresh_ttft_s = fresh.ttft_s;
  r->cached_ttft_s = again.ttft_s;
  r->tps = fresh.decode_tps;
  r->reply = ReplySample(fresh.error.empty() && !again.error.empty() ? again : fresh);
  r->result = fresh.own_fault || again.own_fault ? "unchecked" : "error";
  if (!fresh.error.empty())
    r->detail = "the fresh prompt: " + fresh.error;
  else if (!again.error.empty())
    r->detail = "the same prompt again: " + again.error;
  else if (fresh.ttft_s < 0 || again.ttft_s < 0)
    r->detail = std::string("no token came back for ") +
                (fresh.ttft_s < 0 ? "the fresh prompt" : "the same prompt again") +
                " (finish_reason " + (fresh.ttft_s < 0 ? fresh : again).finish_reason + ")";
  else
    r->result = "pass";
}

// Seconds for a message: 1 decimal, more below 0.1 s.
std::string Secs(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", s >= 0.1 ? 1 : s >= 0.01 ? 2 : 3, s);
  return buf;
}

// `value` beside the floor it is compared with: 1 decimal, more when that
// would read as the floor itself (3.04 > 3, not 3.0 > 3).
std::string Beside(double value, double floor) {
  int digits = 1;
  for (double scale = 10; digits < 3 && std::llround(value * scale) == std::llround(floor * scale);
       scale *= 10)
    ++digits;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, value);
  return buf;
}

}  // namespace

std::string SlowDetail(const SmokeResult& r) {
  std::vector<std::string> slow;
  char floor[32] = "";
  if (r.max_ttft_s > 0) {
    std::snprintf(floor, sizeof floor, "%g s", r.max_ttft_s);
    const bool fresh = r.fresh_ttft_s >= 0;
    const std::string what = fresh ? "fresh-context TTFT" : "TTFT";
    if (r.ttft_s < 0)
      slow.push_back(what + " not measured (no token streamed back), max_ttft " + floor);
    else if (r.ttft_s > r.max_ttft_s)
      slow.push_back(what + " " + Beside(r.ttft_s, r.max_ttft_s) + " s > " + floor +
                     (fresh && r.cached_ttft_s >= 0 ? " (cached " + Secs(r.cached_ttft_s) + " s)"
                                                    : std::string()));
  }
  if (r.min_decode_tps > 0) {
    std::snprintf(floor, sizeof floor, "%g", r.min_decode_tps);
    if (r.tps < 0)
      slow.push_back(std::string("decode t/s not measured (a reply of fewer than 2 tokens), "
                                 "min_decode_tps ") +
                     floor + " needs a longer one");
    else if (r.tps < r.min_decode_tps)
      slow.push_back(Beside(r.tps, r.min_decode_tps) + " t/s < " + floor);
  }
  std::string out;
  for (const std::string& s : slow) out += (out.empty() ? "slow: " : "; ") + s;
  return out;
}

std::string FreshContextPrompt(int tokens) {
  // Common words, each about one token with its leading space.
  static const char* kWords[] = {
      "time",    "year",     "people", "way",    "day",     "man",     "thing",     "woman",
      "life",    "child",    "world",  "school", "state",   "family",  "group",     "country",
      "problem", "hand",     "part",   "place",  "case",    "week",    "company",   "system",
      "program", "question", "work",   "number", "night",   "point",   "home",      "water",
      "room",    "mother",   "area",   "money",  "story",   "fact",    "month",     "lot",
      "right",   "study",    "book",   "eye",    "job",     "word",    "business",  "issue",
      "side",    "kind",     "head",   "house",  "service", "friend",  "father",    "power",
      "hour",    "game",     "line",   "end",    "member",  "law",     "car",       "city",
      "name",    "team",     "minute", "idea",   "kid",     "body",    "back",      "parent",
      "face",    "others",   "level",  "office", "door",    "health",  "person",    "art",
      "war",     "history",  "party",  "result", "change",  "morning", "reason",    "research",
      "girl",    "guy",      "moment", "air",    "teacher", "force",   "education", "green",
      "blue",    "red"};
  constexpr size_t kCount = sizeof kWords / sizeof kWords[0];
  // The kernel's entropy alone: a seed from the clock would add nothing
  // random_device lacks on Linux, and a fake clock would repeat it.
  std::random_device rd;
  std::seed_seq seed{rd(), rd(), rd(), rd(), rd()};
  std::mt19937_64 rng(seed);
  char id[40];
  std::snprintf(id, sizeof id, "Session %016llx:", static_cast<unsigned long long>(rng()));
  std::string text = id;
  text.reserve(static_cast<size_t>(tokens) * 8 + 200);
  for (int i = 8; i < tokens; ++i) {
    text += ' ';
    text += kWords[rng() % kCount];
  }
  return text + "\n\nThe words above are random. Reply with the single word OK.";
}

SmokeResult RunOneCheck(const std::string& base_url, const std::string& model,
                        const SmokeCheck& check, Clock* clock) {
  SmokeResult r;
  r.time = NowIso(clock);
  r.check = check.name;
  if (check.fresh_context_tokens > 0)
    RunFreshContext(base_url, model, check, clock, &r);
  else
    RunChatCheck(base_url, model, check, &r);
  if (check.min_decode_tps > 0) r.min_decode_tps = check.min_decode_tps;
  if (check.max_ttft_s > 0) r.max_ttft_s = check.max_ttft_s;
  if (r.passed()) {
    const std::string slow = SlowDetail(r);
    if (!slow.empty()) {
      r.result = "fail";
      r.detail = slow;
    }
  }
  return r;
}

std::vector<SmokeResult> RunSmoke(const SmokeTarget& target, const std::vector<SmokeCheck>& checks,
                                  Transport* node, const ConnectionLocator& locate, Clock* clock) {
  std::vector<SmokeResult> out;
  out.push_back(CheckIdentity(target, node, locate, clock));
  if (!out.back().passed()) return out;
  out.push_back(CheckModel(target, clock));
  if (!out.back().passed()) return out;
  const std::string model = target.served_model.empty()
                                ? out.back().reply.substr(0, out.back().reply.find(','))
                                : target.served_model;
  for (const SmokeCheck& c : checks) {
    SmokeResult r = RunOneCheck(target.BaseUrl(), model, c, clock);
    r.deployment = target.deployment;
    r.node = target.node;
    out.push_back(std::move(r));
  }
  return out;
}

Status SmokeAfterHealthy(const StepContext& ctx, const ContainerSpec& spec) {
  // A worker's step comes before its head's: the head's step asks the API.
  if (spec.rank > 0) return Status::OK();
  auto d = ctx.manifest->deployments.find(spec.deployment);
  if (d == ctx.manifest->deployments.end() || d->second.smoke.empty()) return Status::OK();
  const SmokeTarget target = TargetFor(*ctx.manifest, spec);
  for (const SmokeResult& r :
       RunSmoke(target, d->second.smoke, ctx.transport, nullptr, ctx.clock)) {
    char line[256];
    std::snprintf(line, sizeof line, "smoke %s: %s (%.2f s)", r.check.c_str(), r.result.c_str(),
                  r.wall_s);
    if (ctx.progress) ctx.progress(line);
    if (r.passed()) continue;
    // A reply cut by max_tokens is no evidence against the serve (a
    // thinking model's budget spent on reasoning): the serve stays, and
    // what was cut is said.
    if (r.result == "cut") {
      if (ctx.progress) ctx.progress("smoke " + r.check + ": cut, not a failure: " + r.detail);
      continue;
    }
    std::string message =
        "smoke check '" + r.check + "' on " + target.BaseUrl() + ": " + r.result + ": " + r.detail;
    if (!r.prompt.empty()) message += "\n  prompt: " + r.prompt;
    if (!r.reply.empty()) message += "\n  reply:  " + r.reply;
    return Status::Error(message);
  }
  return Status::OK();
}

}  // namespace fleet
