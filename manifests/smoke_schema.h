// The `smoke:` list of a deployment in fleet.yaml:
//
//   smoke:
//     - {name: math,  chat: "What is 127*89? Reply with the number only.", expect: "11303",
//     timeout: 2m, min_decode_tps: 40}
//     - {name: paris, chat: "What is the capital of France? One word.",   expect: "(?i)paris"}
//     - {name: tools, tools: true, timeout: 2m}
//     - {name: needle, needle_tokens: 45000, timeout: 10m}
//     - {name: prefill, fresh_context: {tokens: 4000}, max_ttft: 3s}
//
// Keys: name (required, unique in the deployment), chat, expect, tools,
// needle_tokens, fresh_context, timeout (a duration, default 2m),
// max_tokens (the reply's whole budget: a thinking model's reasoning counts
// against it before the content), min_decode_tps (a number > 0), max_ttft (a
// duration), prefill_tps (prompt tokens/s: the slowest prefill to wait for
// before the first token), stall (a duration, default 30s: the longest
// silence once the first token came). A check
// is one kind: chat (expect required), tools (chat optional: the question
// that should call the tool), needle_tokens (1000..1000000) or
// fresh_context ({tokens: 1000..1000000}; max_ttft required: it is all the
// check judges). The floors min_decode_tps and max_ttft may be on any kind.
// Errors name file:line:column.
#ifndef FLEET_MANIFESTS_SMOKE_SCHEMA_H_
#define FLEET_MANIFESTS_SMOKE_SCHEMA_H_

#include <regex>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "manifests/yaml_schema.h"

namespace fleet {

// Reads the list under `entry` (the deployment's `smoke` key); `what` names
// the deployment in messages. Problems go to `reporter`; bad checks are left out.
std::vector<SmokeCheck> ReadSmokeChecks(yaml_schema::Reporter* reporter,
                                        const yaml_schema::Entry& entry, const std::string& what);

// Compiles an `expect` pattern: ECMAScript syntax, with a leading "(?i)"
// (as Python and PCRE write it) meaning case insensitive. False with
// `error` set when it does not compile.
bool CompileExpect(const std::string& pattern, std::regex* out, std::string* error);

// A rate above 0 and at most 1000000 ("40", "12.5"): no sign, exponent,
// hex, inf or nan (strtod takes all of those). False when `text` is not one.
bool ParseRate(const std::string& text, double* out);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_SMOKE_SCHEMA_H_
