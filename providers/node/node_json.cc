#include "providers/node/node_json.h"

namespace fleet {

namespace {

// The string at `key`, or nullopt when absent or not a string.
std::optional<std::string> StringAt(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return std::nullopt;
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

void PutIfSet(nlohmann::json& j, const char* key, const std::optional<std::string>& v) {
  if (v) j[key] = *v;
}

}  // namespace

void to_json(nlohmann::json& j, const NodeWant& v) {
  j = {{"hostname", v.hostname}, {"endpoint", v.endpoint}, {"power", v.power}};
  PutIfSet(j, "switch", v.power_switch);
}

void from_json(const nlohmann::json& j, NodeWant& v) {
  v = NodeWant{};
  v.hostname = StringAt(j, "hostname").value_or("");
  v.endpoint = StringAt(j, "endpoint").value_or("");
  v.power = StringAt(j, "power").value_or(kPowerOn);
  v.power_switch = StringAt(j, "switch");
}

void to_json(nlohmann::json& j, const NodeRecord& v) {
  j = nlohmann::json::object();
  PutIfSet(j, "hostname", v.hostname);
  PutIfSet(j, "machine_id", v.machine_id);
  PutIfSet(j, "arch", v.arch);
  PutIfSet(j, "power", v.power);
  PutIfSet(j, "unreachable", v.unreachable);
}

void from_json(const nlohmann::json& j, NodeRecord& v) {
  v.hostname = StringAt(j, "hostname");
  v.machine_id = StringAt(j, "machine_id");
  v.arch = StringAt(j, "arch");
  v.power = StringAt(j, "power");
  v.unreachable = StringAt(j, "unreachable");
}

void PutPoweroffSudo(nlohmann::json& actual, const PoweroffSudo& v) {
  if (!v.checked) return;
  actual["poweroff_sudo"] = {{"allowed", v.allowed}, {"user", v.user}, {"command", v.command}};
}

PoweroffSudo PoweroffSudoOf(const nlohmann::json& actual) {
  PoweroffSudo v;
  if (!actual.is_object()) return v;
  auto it = actual.find("poweroff_sudo");
  if (it == actual.end() || !it->is_object()) return v;
  v.checked = true;
  auto allowed = it->find("allowed");
  v.allowed = allowed != it->end() && allowed->is_boolean() && allowed->get<bool>();
  v.user = StringAt(*it, "user").value_or("");
  v.command = StringAt(*it, "command").value_or("");
  return v;
}

void to_json(nlohmann::json& j, const NodeStep& v) { j = {{"op", v.op}}; }

void from_json(const nlohmann::json& j, NodeStep& v) {
  v.op = StringAt(j, "op").value_or(kOpAdopt);
}

}  // namespace fleet
