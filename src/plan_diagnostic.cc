#include "src/plan_diagnostic.h"

namespace fleet {

std::string PlanDiagnostic::ToString() const {
  return detail.empty() ? summary : summary + " (" + detail + ")";
}

std::vector<std::string> DiagnosticLines(const std::vector<PlanDiagnostic>& diagnostics) {
  std::vector<std::string> lines;
  lines.reserve(diagnostics.size());
  for (const PlanDiagnostic& d : diagnostics) lines.push_back(d.ToString());
  return lines;
}

void to_json(nlohmann::json& j, const PlanDiagnostic& d) {
  j = {{"address", d.address}, {"summary", d.summary}, {"detail", d.detail}};
}

void from_json(const nlohmann::json& j, PlanDiagnostic& d) {
  d.address = j.value("address", "");
  d.summary = j.at("summary").get<std::string>();
  d.detail = j.value("detail", "");
}

std::ostream& operator<<(std::ostream& out, const PlanDiagnostic& d) {
  return out << "{" << d.address << "} " << d.ToString();
}

}  // namespace fleet
