// Smoke checks of a serve, from the client's side (the log's "smoke: math
// OK, tools OK, 45K-token needle OK"): what a serve answers can be wrong while
// its health URL says 200 (a garbling engine, a client address that reaches
// another box).
//
// A run against one serve goes in this order, each step a SmokeResult:
//   identity  the client address reaches the container fleet started on the
//             node: a TCP connection is opened to it from here, and over SSH
//             the node is asked which process holds the other end (the
//             container's, by its PID namespace; for a root daemon's
//             container, which the node user cannot see, the engine is asked
//             through `exec` among the container's own processes) and what
//             labels it carries;
//   model     /v1/models lists the deployment's served model name;
//   <checks>  the deployment's `smoke:` list, each through /v1/chat/completions
//             (streamed: time to first token and decode tokens/s); a
//             fresh_context check sends a prompt of random words no cache
//             can hold, then the same prompt again (fresh and cached TTFT).
// A check the controller could not make for a reason of its own (no file
// descriptor for a socket, its own network down: own_fault.h) is
// "unchecked": no evidence about the serve, never a reason to heal it.
// A check whose reply was cut by max_tokens is "cut" (finish_reason length,
// content null), not "fail": the engine may be right and the budget short;
// no path counts it as a failure (apply keeps the serve, `fleet check`
// exits 0, a watch does not heal it).
// A streamed check's stall counts only from the first token on; before it,
// the check waits for the prompt's prefill (PrefillAllowanceSeconds).
// A check that answered right but under its speed floors (min_decode_tps,
// max_ttft) is "fail" like a wrong answer, its detail starting "slow:".
#ifndef FLEET_PROVIDERS_SHARED_SERVING_SMOKE_CHECK_H_
#define FLEET_PROVIDERS_SHARED_SERVING_SMOKE_CHECK_H_

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/serving/deployment_spec.h"
#include "src/openai_client.h"
#include "src/provider.h"
#include "src/transport.h"

namespace fleet {

struct SmokeTarget {
  std::string deployment;
  std::string node;
  std::string host;  // the client address's host: the node's manifest address
  int port = 0;
  std::string cli;           // the node's container CLI
  std::string container;     // fleet-<deployment>
  std::string served_model;  // expected name; "" when the recipe does not say
  std::string BaseUrl() const { return "http://" + host + ":" + std::to_string(port); }
};

struct SmokeResult {
  std::string time;  // UTC, ISO 8601, when the check started
  std::string deployment, node, check;
  std::string result;  // "pass", "fail", "cut", "error", "unchecked"
  std::string detail;  // why, for anything but a pass
  double wall_s = -1, ttft_s = -1, tps = -1;
  // fresh_context: the first token's wait for the fresh prompt (also
  // ttft_s) and for the same prompt sent again; -1 otherwise.
  double fresh_ttft_s = -1, cached_ttft_s = -1;
  // The check's speed floors as declared (min_decode_tps, max_ttft), -1
  // when not: in the JSON for whoever graphs them (watch log, gauges).
  double min_decode_tps = -1, max_ttft_s = -1;
  std::string prompt;  // samples, for a failure (shortened)
  std::string reply;
  // Asked through a gateway: the serve it chose, as its x-fleet-served-by
  // header says ("<deployment>_<node>"); "" otherwise. Not in the JSON.
  std::string served_by;
  // Through a gateway with keys, none of which may use the model: nothing
  // was sent (result "unchecked"). Not in the JSON.
  bool no_gateway_key = false;
  bool passed() const { return result == "pass"; }
  nlohmann::json ToJson() const;
  static SmokeResult FromJson(const nlohmann::json& j);
};

// Says which serve of the fleet holds the far end of a connection from local
// port `client_port` ("deployment.b@dgx2"), "" when none does: lets a failed
// identity check name both ends. May be empty.
using ConnectionLocator = std::function<std::string(int client_port)>;

// The name /v1/models should list for `spec`: --served-model-name, else
// --model, else the recipe's model; "" when none is given.
std::string ExpectedServedModel(const Manifest& m, const ContainerSpec& spec);

// The target of `spec` as clients reach it (the manifest's node address).
SmokeTarget TargetFor(const Manifest& m, const ContainerSpec& spec);

// sh that, on the node, prints inode=, pid=, label= and owner= for the
// accepted socket of a connection from `client_port` to the serve's `port`:
// owner is "container" (a process in the container's PID namespace holds
// it), "other" (another process of the node), "unknown" (the node sees the
// socket but cannot read the container's processes, a root daemon's, and
// `<cli> exec` could not look among them either: no shell in the image;
// when exec could, owner is "container" or "other" and via=engine),
// "stopped" (the container does not run, yet something answers) or
// "absent" (the node holds no such connection: another box answered).
// Behind NAT (the node's SSH_CONNECTION names another port than
// `ssh_port`, the controller's end of the session; 0: unknown, no NAT
// assumed) a connection to `port` from the address the node sees the
// session come from counts when none from `client_port` is there, and
// via_nat= names that address. The embedded connection_owner.sh with its
// values quoted once; read-only.
std::string ConnectionOwnerScript(const std::string& cli, const std::string& container, int port,
                                  int client_port, int ssh_port = 0);

// Runs identity, model and `checks` against `target`; `node` is its node's
// transport (connected). Stops after a failed identity or model step (the
// answers would be someone else's). Each result's time and wall_s are read
// from `clock` (the caller's: StepContext::clock, GlobalOptions::clock).
std::vector<SmokeResult> RunSmoke(const SmokeTarget& target, const std::vector<SmokeCheck>& checks,
                                  Transport* node, const ConnectionLocator& locate, Clock* clock);

// One check against a base URL (no identity), its speed floors applied:
// for tests and RunSmoke. Its time and a fresh-context check's wall_s are
// read from `clock` (a chat check's wall_s is the client's own measure).
SmokeResult RunOneCheck(const std::string& base_url, const std::string& model,
                        const SmokeCheck& check, Clock* clock);

// The speed floors' verdict on a check that answered right, from its
// result alone (floors and timings filled in): "" when within them or none
// is declared, else the failure's detail: "slow: 12.1 t/s < 40",
// "slow: TTFT 4.2 s > 3 s", "slow: fresh-context TTFT 6.1 s > 3 s (cached
// 0.2 s)", both floors' words joined by "; " when both fail. A floor the
// reply gave nothing to measure against (one token: no decode rate) fails
// too, saying so: a floor that is never checked would pass forever.
std::string SlowDetail(const SmokeResult& r);

// ~`tokens` tokens of common words in an order drawn from a fresh seed
// (after a random session id, so that not even its start was seen before),
// and a one-word question; no prefix cache holds any of it.
std::string FreshContextPrompt(int tokens);

// A needle prompt: ~`tokens` tokens of filler with "The magic number of
// <word> is <n>." at a random depth, and the question; `answer` gets <n>.
std::string NeedlePrompt(int tokens, std::string* answer, std::string* where);

// The prompt tokens/s a check allows for when neither it nor its deployment
// declares prefill_tps: below the slowest prefill of the operator's log (154
// tokens/s, a fresh context on the Aiden serve).
inline constexpr double kDefaultPrefillTps = 100;

// How long a check waits for the first token of a prompt of `prompt_chars`
// characters: ~chars/4 tokens at its prefill_tps (else kDefaultPrefillTps),
// plus its stall limit (the wait for the first token after the prefill), at
// most its timeout. vLLM and SGLang send no byte while they prefill, so
// their silence until then is no stall.
int PrefillAllowanceSeconds(const SmokeCheck& check, size_t prompt_chars);

// The allowance's terms, for a check that got no token within it.
std::string AllowanceText(const SmokeCheck& check, size_t prompt_chars);

// After a serve is healthy in apply: its smoke checks (none declared: OK
// without a request). An error when any fails; a check cut by max_tokens
// is reported (progress) and is not an error.
Status SmokeAfterHealthy(const StepContext& ctx, const ContainerSpec& spec);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_SMOKE_CHECK_H_
