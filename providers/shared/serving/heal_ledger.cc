#include "providers/shared/serving/heal_ledger.h"

#include "src/json_number.h"

namespace fleet {

bool HealLedger::Empty() const {
  return tries.empty() && failed_in_row == 0 && last_try_at == 0 && !unproven &&
         in_progress_since == 0 && !quarantined && free_before_start_bytes == 0;
}

void to_json(nlohmann::json& j, const HealLedger& v) {
  j = {{"tries", v.tries},
       {"failed_in_row", v.failed_in_row},
       {"last_try_at", v.last_try_at},
       {"unproven", v.unproven},
       {"in_progress_since", v.in_progress_since},
       {"last_reason", v.last_reason},
       {"quarantined", v.quarantined},
       {"quarantined_at", v.quarantined_at},
       {"quarantine", v.quarantine},
       {"free_before_start_bytes", v.free_before_start_bytes}};
}

void from_json(const nlohmann::json& j, HealLedger& v) {
  v = HealLedger{};
  if (!j.is_object()) return;
  if (auto t = j.find("tries"); t != j.end() && t->is_array())
    for (const auto& x : *t)
      if (auto at = JsonInteger<int64_t>(x)) v.tries.push_back(*at);
  v.failed_in_row = OptionalInteger<int>(j, "failed_in_row").value_or(0);
  v.last_try_at = OptionalInteger<int64_t>(j, "last_try_at").value_or(0);
  v.in_progress_since = OptionalInteger<int64_t>(j, "in_progress_since").value_or(0);
  v.quarantined_at = OptionalInteger<int64_t>(j, "quarantined_at").value_or(0);
  v.free_before_start_bytes = OptionalInteger<uint64_t>(j, "free_before_start_bytes").value_or(0);
  auto text = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  v.last_reason = text("last_reason");
  v.quarantine = text("quarantine");
  auto flag = [&](const char* key) {
    auto it = j.find(key);
    return it != j.end() && it->is_boolean() && it->get<bool>();
  };
  v.quarantined = flag("quarantined");
  v.unproven = flag("unproven");
}

}  // namespace fleet
