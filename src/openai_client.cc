#include "src/openai_client.h"

#include <curl/curl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <mutex>

#include "manifests/own_fault.h"
#include "src/clock.h"
#include "src/json_number.h"

namespace fleet {
namespace {

using SteadyClock = std::chrono::steady_clock;

void InitCurl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t Append(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

// What one call to the API read, whatever its shape.
struct Transfer {
  CURLcode rc = CURLE_OK;
  int socket_errno = 0;    // socket() failed in OpenSocket with this
  long connect_errno = 0;  // CURLINFO_OS_ERRNO
  bool own_fault = false;  // CurlFailureIsOwn
  long status = 0;
  std::string body;
  std::string served_by;  // the gateway's x-fleet-served-by header
};

// Keeps the one response header fleet reads: which serve a gateway chose.
size_t Header(char* data, size_t size, size_t n, void* out) {
  static const std::string kName = "x-fleet-served-by:";
  std::string line(data, size * n);
  if (line.size() > kName.size() &&
      std::equal(kName.begin(), kName.end(), line.begin(),
                 [](char a, char b) { return a == std::tolower(static_cast<unsigned char>(b)); })) {
    line = line.substr(kName.size());
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t\r\n") + 1);
    *static_cast<std::string*>(out) = line;
  }
  return size * n;
}

// Opens libcurl's sockets itself to keep socket()'s errno: libcurl turns a
// socket() that failed with EMFILE into CURLE_COULDNT_CONNECT, the same code
// as a refused connection, and a watch once healed healthy serves for it.
curl_socket_t OpenSocket(void* transfer, curlsocktype, curl_sockaddr* a) {
  const curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  if (fd == CURL_SOCKET_BAD) static_cast<Transfer*>(transfer)->socket_errno = errno;
  return fd;
}

// The clocks of a streamed request, read by libcurl's progress callback:
// before the first token only the prefill allowance runs; after it, a
// silence of stall_s is a stall. CURLOPT_LOW_SPEED_TIME cannot say this: it
// counts the silence of a prefill as a stall too, and failed every long
// needle (issue 42).
struct Watchdog {
  SteadyClock::time_point start;
  int stall_s = 0;              // 0: none
  int first_token_s = 0;        // 0: none
  const int* tokens = nullptr;  // the stream's token count so far
  curl_off_t last_bytes = -1;
  SteadyClock::time_point last_byte;
  bool stalled = false, no_first_token = false;

  static int Check(void* self_ptr, curl_off_t, curl_off_t dlnow, curl_off_t, curl_off_t) {
    Watchdog* w = static_cast<Watchdog*>(self_ptr);
    const auto now = RealClock()->SteadyNow();
    if (dlnow != w->last_bytes) {
      w->last_bytes = dlnow;
      w->last_byte = now;
    }
    if (*w->tokens == 0) {
      w->no_first_token =
          w->first_token_s > 0 && now - w->start >= std::chrono::seconds(w->first_token_s);
      return w->no_first_token ? 1 : 0;
    }
    w->stalled = w->stall_s > 0 && now - w->last_byte >= std::chrono::seconds(w->stall_s);
    return w->stalled ? 1 : 0;
  }
};

// The key of the live BearerScope of this thread, "" when none.
thread_local std::string bearer_key;

// One request; `sink` gets the body as it arrives (stream) when set, and
// `watchdog` (stream only) may end it early.
Transfer Perform(const std::string& url, const std::string* post, int timeout_s, int stall_s,
                 size_t (*sink)(char*, size_t, size_t, void*), void* sink_data,
                 Watchdog* watchdog = nullptr) {
  InitCurl();
  Transfer t;
  CURL* curl = curl_easy_init();
  if (curl == nullptr) {
    t.rc = CURLE_FAILED_INIT;
    t.own_fault = true;
    NoteOwnFault();
    return t;
  }
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  headers = curl_slist_append(headers, (std::string(kFleetOwnHeader) + ": 1").c_str());
  if (!bearer_key.empty())
    headers = curl_slist_append(headers, ("Authorization: Bearer " + bearer_key).c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, static_cast<long>(timeout_s));
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");  // a serve is reached directly
  if (watchdog != nullptr) {
    watchdog->start = watchdog->last_byte = RealClock()->SteadyNow();
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, Watchdog::Check);
    curl_easy_setopt(curl, CURLOPT_XFERINFODATA, watchdog);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
  } else if (stall_s > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(stall_s));
  }
  if (post != nullptr) {
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post->c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(post->size()));
  }
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink ? sink : Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, sink ? sink_data : &t.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, Header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t.served_by);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, OpenSocket);
  curl_easy_setopt(curl, CURLOPT_OPENSOCKETDATA, &t);
  t.rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t.status);
  curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &t.connect_errno);
  t.own_fault = CurlFailureIsOwn(t.rc, t.socket_errno, t.connect_errno);
  if (t.own_fault) NoteOwnFault();
  curl_slist_free_all(headers);
  curl_easy_cleanup(curl);
  return t;
}

// curl's words, and the errno that made it an own failure.
std::string FailureText(const Transfer& t) {
  std::string text = curl_easy_strerror(t.rc);
  if (t.socket_errno != 0)
    text += " (socket(): " + ErrnoText(t.socket_errno) + ")";
  else if (t.connect_errno != 0)
    text += " (" + ErrnoText(static_cast<int>(t.connect_errno)) + ")";
  return text;
}

std::string Str(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Merges a streamed tool_calls delta into `calls` (by index: the name comes
// once, the arguments in pieces).
void MergeToolCalls(const nlohmann::json& delta, nlohmann::json* calls) {
  for (const auto& d : delta) {
    const size_t i = d.value("index", static_cast<int>(calls->size()));
    while (calls->size() <= i)
      calls->push_back({{"type", "function"}, {"function", {{"name", ""}, {"arguments", ""}}}});
    nlohmann::json& c = (*calls)[i];
    if (d.contains("id")) c["id"] = d["id"];
    if (d.contains("function")) {
      const nlohmann::json& f = d["function"];
      c["function"]["name"] = c["function"]["name"].get<std::string>() + Str(f, "name");
      c["function"]["arguments"] =
          c["function"]["arguments"].get<std::string>() + Str(f, "arguments");
    }
  }
}

// The SSE reader: "data: {json}" events, one delta each.
struct Stream {
  SteadyClock::time_point start;
  SteadyClock::time_point first, last;
  int chunks = 0;
  std::string pending;
  ChatReply* reply = nullptr;

  void Event(const std::string& data) {
    if (data == "[DONE]") return;
    nlohmann::json j = nlohmann::json::parse(data, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      if (reply->error.empty()) reply->error = "a stream event is not JSON: " + data.substr(0, 200);
      return;
    }
    if (reply->model.empty()) reply->model = Str(j, "model");
    if (j.contains("usage") && j["usage"].is_object()) {
      reply->completion_tokens = j["usage"].value("completion_tokens", reply->completion_tokens);
      reply->prompt_tokens = IntegerOr(j["usage"], "prompt_tokens", reply->prompt_tokens);
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const nlohmann::json& c = j["choices"][0];
    if (c.contains("finish_reason") && c["finish_reason"].is_string())
      reply->finish_reason = c["finish_reason"];
    if (!c.contains("delta") || !c["delta"].is_object()) return;
    const nlohmann::json& d = c["delta"];
    bool token = false;
    if (d.contains("content") && d["content"].is_string()) {
      reply->content += d["content"].get<std::string>();
      reply->content_null = false;
      token = true;
    }
    for (const char* k : {"reasoning_content", "reasoning"})
      if (d.contains(k) && d[k].is_string()) {
        reply->reasoning += d[k].get<std::string>();
        token = true;
      }
    if (d.contains("tool_calls") && d["tool_calls"].is_array()) {
      MergeToolCalls(d["tool_calls"], &reply->tool_calls);
      token = true;
    }
    if (!token) return;
    const auto now = RealClock()->SteadyNow();
    if (chunks++ == 0) first = now;
    last = now;
  }

  static size_t Write(char* data, size_t size, size_t n, void* self_ptr) {
    Stream* self = static_cast<Stream*>(self_ptr);
    if (self->reply->raw.size() < 2000)
      self->reply->raw.append(data, std::min(size * n, 2000 - self->reply->raw.size()));
    self->pending.append(data, size * n);
    size_t eol;
    while ((eol = self->pending.find('\n')) != std::string::npos) {
      std::string line = self->pending.substr(0, eol);
      self->pending.erase(0, eol + 1);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.rfind("data:", 0) != 0) continue;
      line.erase(0, 5);
      if (!line.empty() && line[0] == ' ') line.erase(0, 1);
      self->Event(line);
    }
    return size * n;
  }
};

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

// A whole (non-streamed) chat.completion body into `reply`.
void ParseCompletion(const std::string& body, ChatReply* reply) {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("choices") || !j["choices"].is_array() ||
      j["choices"].empty() || !j["choices"][0].is_object()) {
    reply->error = "the reply is not a chat.completion";
    return;
  }
  reply->model = Str(j, "model");
  const nlohmann::json& c = j["choices"][0];
  reply->finish_reason = Str(c, "finish_reason");
  const nlohmann::json m = c.value("message", nlohmann::json::object());
  if (m.contains("content") && m["content"].is_string()) {
    reply->content = m["content"];
    reply->content_null = false;
  }
  reply->reasoning = Str(m, "reasoning_content") + Str(m, "reasoning");
  if (m.contains("tool_calls") && m["tool_calls"].is_array()) reply->tool_calls = m["tool_calls"];
  if (j.contains("usage") && j["usage"].is_object()) {
    reply->completion_tokens = IntegerOr(j["usage"], "completion_tokens", 0);
    reply->prompt_tokens = IntegerOr(j["usage"], "prompt_tokens", -1);
  }
}

}  // namespace

Result<std::vector<std::string>> ListServedModels(const std::string& base_url, int timeout_s) {
  using R = Result<std::vector<std::string>>;
  Transfer t = Perform(base_url + "/v1/models", nullptr, timeout_s, 0, nullptr, nullptr);
  if (t.own_fault)
    return R(
        Status::OwnFault(base_url + "/v1/models: the controller's own failure: " + FailureText(t)));
  if (t.rc != CURLE_OK)
    return R(Status::Unreachable(base_url + "/v1/models: " + curl_easy_strerror(t.rc)));
  if (t.status != 200)
    return R::Error(base_url + "/v1/models answered HTTP " + std::to_string(t.status));
  nlohmann::json j = nlohmann::json::parse(t.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    return R::Error(base_url + "/v1/models is not a model list: " + t.body.substr(0, 200));
  std::vector<std::string> names;
  for (const auto& m : j["data"])
    if (m.is_object()) names.push_back(Str(m, "id"));
  return names;
}

ChatReply Chat(const std::string& base_url, const ChatRequest& request) {
  ChatReply reply;
  nlohmann::json body = {{"model", request.model},
                         {"messages", {{{"role", "user"}, {"content", request.prompt}}}},
                         {"max_tokens", request.max_tokens},
                         {"temperature", 0},
                         {"stream", request.stream}};
  if (request.stream) body["stream_options"] = {{"include_usage", true}};
  if (request.tools.is_array()) body["tools"] = request.tools;
  const std::string post = body.dump();
  const std::string url = base_url + "/v1/chat/completions";
  Stream stream;
  stream.reply = &reply;
  stream.start = RealClock()->SteadyNow();
  Watchdog watchdog;
  watchdog.stall_s = request.stall_s;
  watchdog.first_token_s = request.first_token_s;
  watchdog.tokens = &stream.chunks;
  // A whole reply: nothing comes before the last token, so only the timeout
  // bounds it (a stall limit would fire during the prefill and the decode).
  Transfer t = request.stream ? Perform(url, &post, request.timeout_s, request.stall_s,
                                        Stream::Write, &stream, &watchdog)
                              : Perform(url, &post, request.timeout_s, 0, nullptr, nullptr);
  reply.wall_s = Seconds(RealClock()->SteadyNow() - stream.start);
  reply.http_status = static_cast<int>(t.status);
  reply.served_by = t.served_by;
  if (!request.stream) reply.raw = t.body.substr(0, 2000);
  reply.own_fault = t.own_fault;
  if (t.own_fault) {
    reply.error = "the controller's own failure: " + FailureText(t);
    return reply;
  }
  if (t.rc != CURLE_OK) {
    const bool aborted = t.rc == CURLE_ABORTED_BY_CALLBACK;
    reply.stalled = aborted && watchdog.stalled;
    reply.no_first_token = aborted && watchdog.no_first_token;
    // The timeout ending a silence after tokens came is a stall too (a
    // check whose timeout is shorter than its stall limit).
    const double silent_s = Seconds(RealClock()->SteadyNow() - watchdog.last_byte);
    if (!reply.stalled && t.rc == CURLE_OPERATION_TIMEDOUT && stream.chunks > 0 && silent_s >= 1) {
      reply.stalled = true;
      reply.error = "the stream stalled mid-reply after " + std::to_string(stream.chunks) +
                    " tokens (no byte for " + std::to_string(static_cast<int>(silent_s)) +
                    " s, until the timeout of " + std::to_string(request.timeout_s) + " s)";
    } else if (reply.stalled)
      reply.error = "the stream stalled mid-reply after " + std::to_string(stream.chunks) +
                    " tokens (no byte for " + std::to_string(request.stall_s) + " s)";
    else if (reply.no_first_token)
      reply.error = "no token within the prefill allowance of " +
                    std::to_string(request.first_token_s) +
                    " s (the serve sent nothing: hung, or slower to prefill than allowed)";
    else if (t.rc == CURLE_OPERATION_TIMEDOUT)
      reply.error = "no complete reply within the timeout of " + std::to_string(request.timeout_s) +
                    " s (" +
                    (stream.chunks == 0 ? std::string("no token came")
                                        : std::to_string(stream.chunks) + " tokens came") +
                    ")";
    else
      reply.error = std::string(curl_easy_strerror(t.rc)) + " after " +
                    std::to_string(static_cast<int>(reply.wall_s)) + " s";
    return reply;
  }
  if (t.status != 200) {
    reply.error = "HTTP " + std::to_string(t.status) + ": " +
                  (request.stream ? reply.raw : t.body).substr(0, 300);
    return reply;
  }
  if (!request.stream) {
    ParseCompletion(t.body, &reply);
    return reply;
  }
  if (stream.chunks > 0) {
    reply.ttft_s = Seconds(stream.first - stream.start);
    const int tokens = reply.completion_tokens > 0 ? reply.completion_tokens : stream.chunks;
    if (reply.completion_tokens == 0) reply.completion_tokens = stream.chunks;
    const double decode = Seconds(stream.last - stream.first);
    if (tokens >= 2 && decode > 0) reply.decode_tps = (tokens - 1) / decode;
  }
  if (reply.finish_reason.empty() && reply.error.empty())
    reply.error = "the stream ended without a finish_reason";
  return reply;
}

bool CurlFailureIsOwn(int curl_code, int socket_errno, long connect_errno) {
  switch (static_cast<CURLcode>(curl_code)) {
    case CURLE_OK:
      return false;
    // Nothing was sent: libcurl itself could not start (memory, its
    // resolver thread's socketpair), or the name did not resolve here.
    case CURLE_FAILED_INIT:
    case CURLE_OUT_OF_MEMORY:
    case CURLE_COULDNT_RESOLVE_HOST:
      return true;
    case CURLE_COULDNT_CONNECT:
      // A socket() that failed here is never the serve's doing; a connect()
      // is the serve's unless its errno is the controller's own.
      return socket_errno != 0 || IsOwnErrno(static_cast<int>(connect_errno));
    default:
      return socket_errno != 0;
  }
}

ToolCall FirstToolCall(const ChatReply& reply) {
  ToolCall call;
  const nlohmann::json& calls = reply.tool_calls;
  if (!calls.is_array() || calls.empty() || !calls[0].is_object()) return call;
  call.present = true;
  const nlohmann::json f = calls[0].value("function", nlohmann::json::object());
  if (!f.is_object()) return call;
  call.name = f.value("name", "");
  call.arguments = f.value("arguments", "");
  return call;
}

BearerScope::BearerScope(std::string key) { bearer_key = std::move(key); }

BearerScope::~BearerScope() { bearer_key.clear(); }

}  // namespace fleet
