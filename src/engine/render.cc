#include "src/engine/render.h"

#include <set>

#include "src/engine/copy_routes.h"

namespace fleet {

namespace {

struct Style {
  bool on;
  std::string operator()(const char* code, const std::string& s) const {
    return on ? std::string("\033[") + code + "m" + s + "\033[0m" : s;
  }
};

const char* Symbol(Action a) {
  switch (a) {
    case Action::kCreate:
      return "+";
    case Action::kUpdate:
      return "~";
    case Action::kReplace:
      return "-/+";
    case Action::kDelete:
      return "-";
    default:
      return " ";
  }
}

const char* ColorOf(Action a) {
  switch (a) {
    case Action::kCreate:
      return "32";
    case Action::kUpdate:
      return "33";
    case Action::kReplace:
      return "35";
    case Action::kDelete:
      return "31";
    default:
      return "0";
  }
}

const char* Phrase(Action a) {
  switch (a) {
    case Action::kCreate:
      return "will be created";
    case Action::kUpdate:
      return "will be updated in-place";
    case Action::kReplace:
      return "must be replaced";
    case Action::kDelete:
      return "will be destroyed";
    default:
      return "has no changes";
  }
}

// Bytes a node printed that are not UTF-8 show as U+FFFD (a plain dump()
// throws on them, which ended `fleet plan`).
std::string Value(const nlohmann::json& v) {
  if (v.is_null()) return "(none)";
  return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// Attribute-level diff of before/after, one line per changed key.
void RenderAttributes(const PlanChange& c, const Style& style, std::string* out) {
  std::set<std::string> keys;
  if (c.before.is_object())
    for (auto it = c.before.begin(); it != c.before.end(); ++it) keys.insert(it.key());
  if (c.after.is_object())
    for (auto it = c.after.begin(); it != c.after.end(); ++it) keys.insert(it.key());
  for (const std::string& k : keys) {
    nlohmann::json b =
        c.before.is_object() && c.before.contains(k) ? c.before[k] : nlohmann::json();
    nlohmann::json a = c.after.is_object() && c.after.contains(k) ? c.after[k] : nlohmann::json();
    if (a == b) continue;
    if (b.is_null())
      *out += "      " + style("32", "+") + " " + k + " = " + Value(a) + "\n";
    else if (a.is_null() && c.action == Action::kDelete)
      *out += "      " + style("31", "-") + " " + k + " = " + Value(b) + "\n";
    else if (a.is_null())
      continue;  // after does not say: unchanged
    else
      *out += "      " + style("33", "~") + " " + k + " = " + Value(b) + " -> " + Value(a) + "\n";
  }
}

}  // namespace

std::string RenderPlan(const Plan& plan, const RenderOptions& options) {
  Style style{options.color};
  std::string out;
  for (const auto& [node, why] : plan.unreachable)  // a transport's reason names its node
    out += style("31;1", "Unreachable: ") + (why.rfind(node + " ", 0) == 0 ? "" : node + ": ") +
           why + "\n";
  for (const PlanDiagnostic& e : plan.errors) out += style("31;1", "Error: ") + e.ToString() + "\n";
  for (const std::string& w : plan.warnings) out += style("33;1", "Warning: ") + w + "\n";
  if (!plan.errors.empty()) {
    out += "\nPlan failed: " + std::to_string(plan.errors.size()) +
           " error(s); nothing will be applied.\n";
    return out;
  }
  // Unchanged resources can still have something to say (a floating tag's
  // digest on each node, a reboot that undid an unlock): show it.
  std::string notes;
  for (const PlanChange& c : plan.changes)
    if (c.action == Action::kNoop)
      for (const std::string& r : c.reasons) notes += "  " + c.address + ": " + r + "\n";
  if (!notes.empty()) notes = style("1", "Notes on unchanged resources:") + "\n" + notes + "\n";
  if (!plan.HasChanges()) {
    out += notes + "No changes. The fleet matches the manifests.\n";
    return out;
  }
  out += notes;
  out += "fleet will perform the following actions:\n\n";
  for (const PlanChange& c : plan.changes) {
    if (c.action == Action::kNoop) continue;
    out += "  " + style("1", "# " + c.address) + " " + Phrase(c.action);
    if (!c.summary.empty()) out += ": " + c.summary;
    out += "\n";
    out += "  " + style(ColorOf(c.action), Symbol(c.action)) + " " + c.address + "\n";
    for (const std::string& r : c.reasons) out += "      reason: " + r + "\n";
    RenderAttributes(c, style, &out);
    if (!c.depends_on.empty()) {
      out += "      after:";
      for (const std::string& d : c.depends_on) out += " " + d;
      out += "\n";
    }
    out += "\n";
  }
  const std::vector<std::string> routes = CopyRouteLines(plan);
  if (!routes.empty()) {
    out += style("1", "Copies between nodes, per source:") + "\n";
    for (const std::string& r : routes) out += "  " + r + "\n";
    out += "\n";
  }
  auto s = plan.Summary();
  out += style("1", "Plan:") + " " + std::to_string(s["create"]) + " to add, " +
         std::to_string(s["update"]) + " to change, " + std::to_string(s["replace"]) +
         " to replace, " + std::to_string(s["delete"]) + " to destroy (" +
         std::to_string(s["noop"]) + " unchanged).\n";
  return out;
}

std::string RenderApplyReport(const ApplyReport& r, bool destroy, const RenderOptions& options) {
  Style style{options.color};
  std::string out;
  auto list = [&](const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    out += std::string("  ") + title + ":\n";
    for (const std::string& i : items) out += "    " + i + "\n";
  };
  if (r.ok()) {
    out += style("32;1", destroy ? "Destroy complete!" : "Apply complete!") + " " +
           std::to_string(r.done.size()) + " change(s) applied.\n";
    return out;
  }
  out += style("31;1", destroy ? "Destroy failed." : "Apply failed.") + "\n";
  list("done", r.done);
  list("failed", r.failed);
  list("undone (rolled back)", r.undone);
  list("kept (done, not rolled back)", r.kept);
  list("not started (a dependency failed, or the state could not be written)", r.skipped);
  list("rollback failed", r.rollback_failed);
  return out;
}

std::string RenderState(const State& state) {
  std::string out = "lineage " + state.lineage + ", serial " + std::to_string(state.serial) + ", " +
                    std::to_string(state.resources.size()) + " resource(s)\n";
  for (const ResourceRecord& r : state.resources) {
    out += "\n" + r.address + "  (" + r.type + (r.node.empty() ? "" : " on " + r.node) +
           ", updated " + r.updated_at + ")\n";
    if (r.attributes.is_object())
      for (auto it = r.attributes.begin(); it != r.attributes.end(); ++it)
        out += "    " + it.key() + " = " +
               it.value().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  }
  return out;
}

}  // namespace fleet
