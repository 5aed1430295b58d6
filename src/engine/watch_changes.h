// What a round of `fleet watch` found, per key, and what changed since the
// round before: the events it announces and hands to --on-change.
#ifndef FLEET_SRC_ENGINE_WATCH_CHANGES_H_
#define FLEET_SRC_ENGINE_WATCH_CHANGES_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace fleet {

// By key: "<deployment>@<node>/<check>" (the check's JSON), "drift"
// ({"result": "pass" | "drift" | "error", "detail": ...}) and "controller"
// ({"result": "pass" | "error", "detail": ...}: the watch's own failures,
// line["controller"]).
using WatchStates = std::map<std::string, nlohmann::json>;

// The states of one round's JSON line ({"checks": [...], "drift": {...}}).
// What the round could not see because the controller failed itself (an
// "unchecked" check; the drift of a round with line["controller"]) keeps its
// state of `before`: an own failure is never a change of the fleet.
WatchStates WatchStatesOf(const nlohmann::json& line, const WatchStates& before = {});

// Each key whose result differs from `before`: {"key", "from", "to"} and
// the new result's detail, prompt and reply (the sample). A key absent
// before counts as passing (a first round that passes is silent); a key
// gone while failing is a change to "gone".
nlohmann::json WatchChanges(const WatchStates& before, const WatchStates& now);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_WATCH_CHANGES_H_
