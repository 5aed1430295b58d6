// A small client of the OpenAI-compatible API a serve exposes (vLLM, sglang,
// llama.cpp): GET /v1/models and POST /v1/chat/completions, through libcurl,
// streamed (SSE) or not. Measures what an operator watches for: wall time,
// time to the first token, decode tokens/s. Never throws; a transport error,
// an HTTP error and a body that is not the API's JSON are all in the reply.
#ifndef FLEET_SRC_OPENAI_CLIENT_H_
#define FLEET_SRC_OPENAI_CLIENT_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/status.h"

namespace fleet {

// Every request of this client carries `x-fleet-own: 1`: fleet's own
// traffic (smoke checks, bench), which a gateway's wake listener never
// counts as demand (src/engine/wake_listener.h).
inline constexpr const char* kFleetOwnHeader = "x-fleet-own";

// The model names /v1/models lists, in order. `base_url` is
// "http://host:port" (no trailing slash). A failure the controller caused
// itself is a Status::OwnFault.
Result<std::vector<std::string>> ListServedModels(const std::string& base_url, int timeout_s);

struct ChatRequest {
  std::string model;
  std::string prompt;    // one user message
  nlohmann::json tools;  // an array of tool definitions, or null
  int max_tokens = 256;
  bool stream = true;
  int timeout_s = 120;  // the whole request
  // No byte for this long once the first token came: a stall. Before the
  // first token it does not count: vLLM and SGLang send nothing while they
  // prefill (a 132K-token prompt at ~1.9K tokens/s: ~70 s of silence).
  int stall_s = 30;
  // The longest wait for the first token (the prefill allowance); 0: the
  // timeout alone bounds it. A streamed reply only: a whole reply comes in
  // one piece after its decode, and only the timeout bounds it.
  int first_token_s = 0;
};

struct ChatReply {
  std::string error;  // transport error, HTTP error or unparsable body; "" when answered
  // The error is the controller's own (no descriptor for a socket, its own
  // network down: CurlFailureIsOwn), not the serve's answer or silence.
  bool own_fault = false;
  int http_status = 0;
  std::string model;         // the "model" the reply names
  std::string content;       // the answer, reasoning aside
  bool content_null = true;  // the API gave no content at all (the log's content=null)
  std::string reasoning;     // reasoning_content / reasoning, when the engine has a channel
  std::string finish_reason;
  nlohmann::json tool_calls = nlohmann::json::array();  // merged across stream chunks
  int completion_tokens = 0;                            // usage, else the number of content chunks
  // usage.prompt_tokens as the engine counted them; -1 when it did not say
  // (fleet bench divides them by the TTFT: the prefill rate).
  int prompt_tokens = -1;
  double wall_s = 0;
  double ttft_s = -1;      // streaming only: to the first content/reasoning/tool chunk
  double decode_tps = -1;  // streaming only, with 2 or more tokens
  bool stalled = false;    // the stream stopped sending before it finished
  // No token came within first_token_s: a hung serve, or one slower to
  // prefill than the allowance assumed.
  bool no_first_token = false;
  std::string raw;  // the body's first 2000 bytes (a sample for a failure)
  // Behind a gateway: the serve it sent the request to ("<deployment>_<node>",
  // its x-fleet-served-by header); "" otherwise.
  std::string served_by;
};

ChatReply Chat(const std::string& base_url, const ChatRequest& request);

// While one lives, every request of this thread (ListServedModels, Chat)
// sends `Authorization: Bearer <key>`: the checks fleet runs through a
// gateway with API keys (src/engine/gateway_checks.cc) carry a key of the
// gateway's own keys file without each kind of check passing it along.
// The key stays in this process: never on a command line, in a log or a
// file. Scopes do not nest.
class BearerScope {
 public:
  explicit BearerScope(std::string key);
  ~BearerScope();
  BearerScope(const BearerScope&) = delete;
  BearerScope& operator=(const BearerScope&) = delete;
};

// Whether a failed request is the controller's own failure (own_fault.h)
// rather than evidence about the serve. libcurl reports CURLE_COULDNT_CONNECT
// both for a serve that refused and for a socket() that failed here, so the
// callers pass what it cannot say: `socket_errno`, the errno of a socket()
// that failed in the open-socket callback (0: none failed), and
// `connect_errno`, CURLINFO_OS_ERRNO. `curl_code` is the CURLcode.
bool CurlFailureIsOwn(int curl_code, int socket_errno, long connect_errno);

// The first tool call of a reply, as the API's JSON gave it.
struct ToolCall {
  bool present = false;   // tool_calls[0] exists and is an object
  std::string name;       // function.name
  std::string arguments;  // function.arguments: JSON text, not checked here
};
ToolCall FirstToolCall(const ChatReply& reply);

}  // namespace fleet

#endif  // FLEET_SRC_OPENAI_CLIENT_H_
