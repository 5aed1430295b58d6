// A plan error as a struct: what it is about, what is wrong, what to do.
//
// Modelled on Terraform's tfdiags (a subject, a summary, a detail): code
// keys on the address, the operator reads the summary and the detail, and
// nobody takes the text apart again to learn which resource it was about.
#ifndef FLEET_SRC_PLAN_DIAGNOSTIC_H_
#define FLEET_SRC_PLAN_DIAGNOSTIC_H_

#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

namespace fleet {

struct PlanDiagnostic {
  // The resource ("deployment.p@dgx1", "node.dgx3") or --target the error is
  // about; "" when it is about the plan as a whole (a dependency cycle).
  std::string address;
  // One line that names what it is about and says what is wrong, as the
  // operator reads it after "Error: ".
  std::string summary;
  // What to do about it; "" when the summary says all. Shown after the
  // summary in parentheses.
  std::string detail;

  // "<summary>" or "<summary> (<detail>)": the line `fleet plan` prints.
  std::string ToString() const;
  bool operator==(const PlanDiagnostic&) const = default;
};

// The lines the operator reads, one per diagnostic, in order.
std::vector<std::string> DiagnosticLines(const std::vector<PlanDiagnostic>& diagnostics);

// {"address", "summary", "detail"}, each a string.
void to_json(nlohmann::json& j, const PlanDiagnostic& d);
// Throws nlohmann::json::exception when a member is not a string.
void from_json(const nlohmann::json& j, PlanDiagnostic& d);

// For test failure messages.
std::ostream& operator<<(std::ostream& out, const PlanDiagnostic& d);

}  // namespace fleet

#endif  // FLEET_SRC_PLAN_DIAGNOSTIC_H_
