#include "src/plan.h"

#include "src/json_number.h"

namespace fleet {

namespace {
constexpr const char* kActionNames[] = {"noop", "create", "update", "replace", "delete"};
}  // namespace

const char* ActionName(Action a) { return kActionNames[static_cast<int>(a)]; }

bool ParseAction(const std::string& s, Action* out) {
  for (int i = 0; i < 5; ++i) {
    if (s == kActionNames[i]) {
      *out = static_cast<Action>(i);
      return true;
    }
  }
  return false;
}

nlohmann::json CopyRoute::ToJson() const {
  nlohmann::json j = {{"what", what}, {"from", from}, {"to", to}, {"direct", direct}};
  if (direct) {
    j["fabric"] = fabric;
    if (!to_address.empty()) j["to_address"] = to_address;
  } else {
    j["why_not"] = why_not;
  }
  for (const Hop& h : chain) j["chain"].push_back({{"node", h.node}, {"address", h.address}});
  return j;
}

std::string CopyRoute::ChainKey() const {
  std::string key = what + " " + from;
  for (const Hop& h : chain) key += " -> " + h.node;
  return key;
}

Result<CopyRoute> CopyRoute::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Result<CopyRoute>::Error("copy is not a JSON object");
  try {
    CopyRoute r;
    r.what = j.at("what").get<std::string>();
    r.from = j.at("from").get<std::string>();
    r.to = j.at("to").get<std::string>();
    r.direct = j.at("direct").get<bool>();
    r.fabric = j.value("fabric", "");
    r.why_not = j.value("why_not", "");
    r.to_address = j.value("to_address", "");
    for (const nlohmann::json& h : j.value("chain", nlohmann::json::array()))
      r.chain.push_back({h.at("node").get<std::string>(), h.at("address").get<std::string>()});
    return r;
  } catch (const nlohmann::json::exception& e) {
    return Result<CopyRoute>::Error(std::string("malformed copy: ") + e.what());
  }
}

nlohmann::json GateSpec::ToJson() const {
  nlohmann::json j = {
      {"deployment", deployment},
      {"profile", profile},
      {"max_regression_pct", max_regression_pct},
      {"min_quality", min_quality_last ? nlohmann::json("last") : nlohmann::json(min_quality_pct)},
      {"candidate", candidate}};
  return j;
}

Result<GateSpec> GateSpec::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return Result<GateSpec>::Error("gate is not a JSON object");
  try {
    GateSpec g;
    g.deployment = j.at("deployment").get<std::string>();
    g.profile = j.at("profile").get<std::string>();
    g.max_regression_pct = j.at("max_regression_pct").get<double>();
    const nlohmann::json& q = j.at("min_quality");
    g.min_quality_last = q.is_string();
    if (!g.min_quality_last) g.min_quality_pct = q.get<double>();
    g.candidate = j.value("candidate", "");
    return g;
  } catch (const nlohmann::json::exception& e) {
    return Result<GateSpec>::Error(std::string("malformed gate: ") + e.what());
  }
}

bool Plan::HasChanges() const {
  for (const PlanChange& c : changes)
    if (c.action != Action::kNoop) return true;
  return false;
}

std::map<std::string, int> Plan::Summary() const {
  std::map<std::string, int> s;
  for (const char* name : kActionNames) s[name] = 0;
  for (const PlanChange& c : changes) ++s[ActionName(c.action)];
  return s;
}

const PlanChange* Plan::Find(const std::string& address) const {
  for (const PlanChange& c : changes)
    if (c.address == address) return &c;
  return nullptr;
}

nlohmann::json Plan::ToJson() const {
  nlohmann::json changes_json = nlohmann::json::array();
  for (const PlanChange& c : changes) {
    changes_json.push_back({{"address", c.address},
                            {"type", c.type},
                            {"node", c.node},
                            {"action", ActionName(c.action)},
                            {"summary", c.summary},
                            {"reasons", c.reasons},
                            {"before", c.before},
                            {"after", c.after},
                            {"depends_on", c.depends_on},
                            {"detail", c.detail}});
    if (c.copy) changes_json.back()["copy"] = c.copy->ToJson();  // copies only: additive
    if (c.gate) changes_json.back()["gate"] = c.gate->ToJson();  // gated changes only
  }
  nlohmann::json summary = nlohmann::json::object();
  for (const auto& [k, v] : Summary()) summary[k] = v;
  nlohmann::json j = {{"format_version", kFormatVersion},
                      {"lineage", lineage},
                      {"serial", serial},
                      {"destroy", destroy},
                      {"targets", targets},
                      {"changes", changes_json},
                      {"summary", summary},
                      {"errors", DiagnosticLines(errors)},
                      {"warnings", warnings},
                      {"sources", sources}};
  if (!unreachable.empty()) j["unreachable"] = unreachable;  // additive: older plans lack it
  if (!errors.empty()) j["diagnostics"] = errors;            // additive: older plans lack it
  return j;
}

Result<Plan> Plan::FromJson(const nlohmann::json& j) {
  try {
    if (!j.is_object()) return Result<Plan>::Error("plan is not a JSON object");
    if (j.value("format_version", "") != kFormatVersion)
      return Result<Plan>::Error("unsupported plan format_version '" +
                                 j.value("format_version", "") + "' (expected 1)");
    Plan p;
    p.lineage = j.at("lineage").get<std::string>();
    const nlohmann::json& serial_json = j.at("serial");
    const std::optional<uint64_t> serial = NonNegativeInteger(serial_json);
    if (!serial)
      return Result<Plan>::Error("plan serial: expected a non-negative integer, got " +
                                 serial_json.dump());
    p.serial = *serial;
    p.destroy = j.value("destroy", false);
    p.targets = j.value("targets", std::vector<std::string>{});
    if (j.contains("diagnostics")) {
      p.errors = j.at("diagnostics").get<std::vector<PlanDiagnostic>>();
    } else {
      // Saved before errors were structured: each line is a summary.
      for (std::string& line : j.value("errors", std::vector<std::string>{}))
        p.errors.push_back({"", std::move(line), ""});
    }
    p.warnings = j.value("warnings", std::vector<std::string>{});
    p.unreachable = j.value("unreachable", std::map<std::string, std::string>{});
    p.sources = j.value("sources", std::map<std::string, std::string>{});
    for (const auto& cj : j.at("changes")) {
      PlanChange c;
      c.address = cj.at("address").get<std::string>();
      c.type = cj.at("type").get<std::string>();
      c.node = cj.value("node", "");
      if (!ParseAction(cj.at("action").get<std::string>(), &c.action))
        return Result<Plan>::Error("unknown action in change " + c.address);
      c.summary = cj.value("summary", "");
      c.reasons = cj.value("reasons", std::vector<std::string>{});
      c.before = cj.value("before", nlohmann::json());
      c.after = cj.value("after", nlohmann::json());
      c.depends_on = cj.value("depends_on", std::vector<std::string>{});
      c.detail = cj.value("detail", nlohmann::json::object());
      if (cj.contains("gate")) {
        Result<GateSpec> gate = GateSpec::FromJson(cj["gate"]);
        if (!gate.ok())
          return Result<Plan>::Error("change " + c.address + ": " + gate.status().message());
        c.gate = *gate;
      }
      if (cj.contains("copy")) {
        Result<CopyRoute> copy = CopyRoute::FromJson(cj["copy"]);
        if (!copy.ok())
          return Result<Plan>::Error("change " + c.address + ": " + copy.status().message());
        c.copy = *copy;
      }
      p.changes.push_back(std::move(c));
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    return Result<Plan>::Error(std::string("malformed plan: ") + e.what());
  }
}

}  // namespace fleet
