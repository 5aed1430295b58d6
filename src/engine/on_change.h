// `fleet watch --on-change CMD`: runs CMD with `sh -c`, the event (one JSON
// line) on its stdin. The command gets a minimal environment (PATH, HOME,
// LANG) and the variables the operator names with --on-change-env, never
// the watch's whole environment: that holds the power switch's and the
// Hub's tokens (issue 44), and a notification script needs neither.
#ifndef FLEET_SRC_ENGINE_ON_CHANGE_H_
#define FLEET_SRC_ENGINE_ON_CHANGE_H_

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fleet {

// The command's environment ("NAME=value" entries) from `env` (the
// watch's, NULL-terminated): PATH (a default when unset), HOME and LANG when
// set, then each of `names` that is set, in that order, each name once.
std::vector<std::string> OnChangeEnvironment(const std::vector<std::string>& names,
                                             char* const* env);

// Runs `cmd` with that environment and `event` on stdin; a failure to start
// it or a non-zero exit is reported on stderr (the watch goes on).
void RunOnChange(const std::string& cmd, const std::vector<std::string>& env_names,
                 const nlohmann::json& event);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_ON_CHANGE_H_
