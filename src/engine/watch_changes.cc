#include "src/engine/watch_changes.h"

namespace fleet {

WatchStates WatchStatesOf(const nlohmann::json& line, const WatchStates& before) {
  WatchStates s;
  // Unknown this round: as it was (a check first unchecked stays absent,
  // which reads as passing).
  auto keep = [&](const std::string& key) {
    auto b = before.find(key);
    if (b != before.end()) s[key] = b->second;
  };
  for (const auto& c : line.value("checks", nlohmann::json::array())) {
    const std::string key =
        c.value("deployment", "") + "@" + c.value("node", "") + "/" + c.value("check", "");
    if (c.value("result", "") == "unchecked")
      keep(key);
    else
      s[key] = c;
  }
  if (line.contains("controller")) {
    s["controller"] = {{"result", "error"}, {"detail", line["controller"].value("error", "")}};
    // The checks it did not reach are as they were too.
    for (const auto& [key, state] : before)
      if (key != "drift" && key != "controller" && !s.count(key)) s[key] = state;
    keep("drift");
    return s;
  }
  s["controller"] = {{"result", "pass"}};
  const nlohmann::json drift = line.value("drift", nlohmann::json::object());
  const bool error = line.contains("error") || drift.contains("error") ||
                     !drift.value("errors", nlohmann::json::array()).empty();
  const std::string result = error ? "error" : drift.value("changes", 0) > 0 ? "drift" : "pass";
  s["drift"] = {{"result", result},
                {"detail", line.contains("error") ? line["error"].dump() : drift.dump()}};
  return s;
}

nlohmann::json WatchChanges(const WatchStates& before, const WatchStates& now) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, r] : now) {
    auto b = before.find(key);
    const std::string was = b == before.end() ? "pass" : b->second.value("result", "");
    const std::string is = r.value("result", "");
    if (was == is) continue;
    nlohmann::json c = {{"key", key}, {"from", was}, {"to", is}};
    for (const char* k : {"detail", "prompt", "reply"})
      if (r.contains(k)) c[k] = r[k];
    out.push_back(c);
  }
  for (const auto& [key, r] : before)
    if (!now.count(key) && r.value("result", "") != "pass")
      out.push_back({{"key", key}, {"from", r.value("result", "")}, {"to", "gone"}});
  return out;
}

}  // namespace fleet
