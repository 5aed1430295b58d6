// The one check of a served model name: the name clients ask a gateway for.
//
// A served name is written into the gateway's HAProxy config (an ACL value,
// a comment line fleet reads back) and into the JSON it answers. HAProxy's
// quoting does not protect an ACL: a quoted '}' still closes the `{ ... }`
// of an anonymous ACL, so `--served-model-name "0 } || TRUE #"` became a
// rule that sent every request to one serve (issue 44). No escaping is
// therefore trusted; a name is letters, digits and . _ : / @ + -, starts
// with a letter, digit or '/' (never '-', which HAProxy reads as a flag),
// and is at most kMaxServedNameLength bytes. Every source of the name
// passes this check: `served_model` in fleet.yaml, a recipe's
// --served-model-name or --model, and the recipe's `model` (at validate,
// with file:line:column), the rendered name at plan, and the config writer
// once more (providers/gateway/gateway_config.cc).
#ifndef FLEET_MANIFESTS_SERVED_NAME_H_
#define FLEET_MANIFESTS_SERVED_NAME_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fleet {

// Long enough for an org/repo@revision, short enough that HAProxy's config
// lines that list every model stay far below its line limit.
inline constexpr size_t kMaxServedNameLength = 200;

// "" when `name` is a safe served name, else why not, for a diagnostic:
// "must be letters, digits and . _ : / @ + -, got ' ' at byte 5".
std::string ServedNameProblem(std::string_view name);
inline bool IsSafeServedName(std::string_view name) { return ServedNameProblem(name).empty(); }

// Where a serve's command names the model it answers to, as vLLM and
// SGLang read it: --served-model-name wins over --model wherever they
// stand, each as "--flag value" or "--flag=value".
struct ServedNameArg {
  size_t index = 0;   // the element of `args` holding the value
  std::string value;  // the name (after '=' in the joined form)
};
std::optional<ServedNameArg> FindServedNameArg(const std::vector<std::string>& args);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_SERVED_NAME_H_
