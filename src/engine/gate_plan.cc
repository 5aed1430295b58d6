#include "src/engine/gate_plan.h"

#include <algorithm>
#include <cstdio>
#include <set>

#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/deployment_spec.h"
#include "src/provider.h"
#include "src/resource.h"

namespace fleet {
namespace {

std::string PercentText(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g%%", v);
  return buf;
}

// What of the spec changed that the gate is about ("" when nothing: a
// replacement for health, a quarantine, a port).
std::string GatedDifference(const PlanChange& c) {
  if (!c.before.is_object() || !c.after.is_object()) return "";
  std::optional<DeploymentRecord> before = DeploymentRecordFrom(c.before);
  if (!before) return "";
  const ContainerShown& was = before->want.shown;
  const ContainerShown now = c.after.get<DeploymentWant>().shown;
  std::vector<std::string> what;
  if (was.image != now.image) what.push_back("image " + was.image + " -> " + now.image);
  if (was.model != now.model)
    what.push_back("model " + was.model.value_or("-") + " -> " + now.model.value_or("-"));
  if (was.command != now.command || was.env != now.env || was.env_from != now.env_from ||
      was.options != now.options || was.gpus != now.gpus)
    what.push_back("recipe");
  std::string out;
  for (const std::string& w : what) out += (out.empty() ? "" : ", ") + w;
  return out;
}

std::string ModelAddressOn(const Manifest& m, const DeploymentSpec& d, const std::string& node) {
  auto it = m.models.find(d.model);
  if (it == m.models.end()) return "";
  const std::string& store = it->second.store;
  if (store.empty() || store == "local") return ResourceAddress("model", d.model, node);
  auto s = m.stores.find(store);
  if (s == m.stores.end() ||
      std::find(s->second.nodes.begin(), s->second.nodes.end(), node) == s->second.nodes.end())
    return "-";  // a shared store this node does not mount: no candidate
  return ResourceAddress("model", d.model, store);
}

// A node no deployment or gateway declares, where the plan stages the
// deployment's image (and model): "" when there is none.
std::string FreeNode(const Manifest& m, const DeploymentSpec& d, const Plan& plan) {
  std::set<std::string> used;
  for (const auto& [_, dep] : m.deployments) used.insert(dep.nodes.begin(), dep.nodes.end());
  for (const auto& [_, g] : m.gateways) used.insert(g.nodes.begin(), g.nodes.end());
  for (const auto& [name, node] : m.nodes) {
    if (used.count(name)) continue;
    const PlanChange* image = plan.Find(ResourceAddress("image", d.image, name));
    if (image == nullptr || image->action == Action::kDelete) continue;
    if (!d.model.empty()) {
      const std::string model = ModelAddressOn(m, d, name);
      const PlanChange* staged = model == "-" ? nullptr : plan.Find(model);
      if (staged == nullptr || staged->action == Action::kDelete) continue;
    }
    return name;
  }
  return "";
}

void AddDependency(PlanChange* c, const std::string& address) {
  if (std::find(c->depends_on.begin(), c->depends_on.end(), address) == c->depends_on.end())
    c->depends_on.push_back(address);
}

// The gated change `gated`: its candidate, what it waits for, its reasons.
void Gate(const Manifest& m, const DeploymentSpec& d, const std::string& changed, Plan* plan,
          PlanChange* gated) {
  const PromotePolicy& p = *d.promote;
  GateSpec g;
  g.deployment = d.name;
  g.profile = p.profile;
  g.max_regression_pct = p.max_regression_pct;
  g.min_quality_last = p.min_quality_last;
  g.min_quality_pct = p.min_quality_pct;
  g.candidate = FreeNode(m, d, *plan);
  const std::string policy = "promote: profile " + g.profile + ", max_regression " +
                             PercentText(g.max_regression_pct) + ", min_quality " +
                             (g.min_quality_last ? "last" : PercentText(g.min_quality_pct));
  if (!g.candidate.empty()) {
    AddDependency(gated, ResourceAddress("image", d.image, g.candidate));
    if (!d.model.empty()) AddDependency(gated, ModelAddressOn(m, d, g.candidate));
    if (plan->Find(NodeAddress(g.candidate))) AddDependency(gated, NodeAddress(g.candidate));
    gated->summary += " (gated: benched beside the old serve on " + g.candidate + " first)";
    gated->reasons.push_back(
        "gated (" + changed + "; " + policy + "): the new spec starts on " + g.candidate +
        ", a free node, and is benched there; within " + PercentText(g.max_regression_pct) +
        " of the last good run the gateways send " + d.name + " to it while " + gated->node +
        " is replaced, then back; otherwise it is removed and the old serve keeps the route");
  } else {
    gated->summary += " (gated: in place, the old container kept for the rollback)";
    gated->reasons.push_back(
        "gated (" + changed + "; " + policy + "): no free node has " + d.image +
        (d.model.empty() ? "" : " and " + d.model) +
        " staged, so the new spec starts in place, the old container kept stopped beside "
        "it, and is benched; refused, the old container is put back and started (the model "
        "has no serve meanwhile)");
  }
  gated->gate = g;
  // Beside, the gateways route to the candidate while the node is replaced:
  // their "answers 503 ... replaced in place" is not so.
  if (!g.candidate.empty())
    for (PlanChange& c : plan->changes)
      if (RoleOf(c.type) == Role::kGateway)
        std::erase_if(c.reasons, [&](const std::string& r) {
          return r.find("while " + gated->address + " is replaced in place") != std::string::npos;
        });
  // No image is removed from the gated node or the candidate under the gate.
  for (PlanChange& c : plan->changes) {
    if (RoleOf(c.type) != Role::kImage || c.action != Action::kDelete) continue;
    if (c.node != gated->node && c.node != g.candidate) continue;
    AddDependency(&c, gated->address);
    c.reasons.push_back("after the gate of " + gated->address +
                        " (an image is not removed while a gate may still need it)");
  }
}

}  // namespace

std::string GateOutcomeKey(const std::string& deployment, const std::string& spec) {
  return deployment + " " + spec;
}

std::map<std::string, GateOutcome> LastGateOutcomes(const std::vector<nlohmann::json>& events) {
  std::map<std::string, GateOutcome> out;
  for (const nlohmann::json& e : events) {
    if (!e.is_object() || e.value("event", "") != "gate") continue;
    auto str = [&](const char* k) {
      return e.contains(k) && e[k].is_string() ? e[k].get<std::string>() : std::string();
    };
    out[GateOutcomeKey(str("deployment"), str("spec"))] =
        GateOutcome{str("outcome"), str("spec"), str("run"), str("time"), str("detail")};
  }
  return out;
}

void MarkGatedChanges(const Manifest& m, const std::map<std::string, GateOutcome>& last, bool retry,
                      Plan* plan) {
  if (plan->destroy) return;
  for (const auto& [name, d] : m.deployments) {
    if (!d.promote) continue;
    // This deployment's gated changes, in its nodes' order.
    std::vector<PlanChange*> gated;
    std::string changed;
    for (const std::string& node : d.nodes) {
      PlanChange* c = nullptr;
      for (PlanChange& x : plan->changes)
        if (x.address == ResourceAddress("deployment", name, node)) c = &x;
      if (c == nullptr || c->action != Action::kReplace) continue;
      const std::string what = GatedDifference(*c);
      if (what.empty()) continue;
      if (changed.empty()) changed = what;
      gated.push_back(c);
    }
    if (gated.empty()) continue;
    if (IsGroupRecipe(d.recipe)) {
      plan->warnings.push_back("deployment." + name +
                               ": promote gates serves of one node or replicas; this one runs one "
                               "engine across its nodes, so its change is not gated");
      continue;
    }
    const std::string spec = gated.front()->after.get<DeploymentWant>().shown.spec;
    auto held = last.find(GateOutcomeKey(name, spec));
    if (!retry && held != last.end() && held->second.outcome == "refused" &&
        held->second.spec == spec) {
      const std::string why = "held: the gate refused this spec (" + spec.substr(0, 12) + ") on " +
                              held->second.time + ", run " + held->second.run +
                              "; the old spec keeps serving. `fleet apply --retry-gate` tries it "
                              "again; a new spec is gated anew";
      for (PlanChange* c : gated) {
        c->action = Action::kNoop;
        c->reasons = {why};
      }
      plan->warnings.push_back("deployment." + name + ": " + why);
      continue;
    }
    Gate(m, d, changed, plan, gated.front());
    for (size_t i = 1; i < gated.size(); ++i) {
      AddDependency(gated[i], gated.front()->address);
      gated[i]->reasons.push_back("after the gate of " + gated.front()->address +
                                  " (replicas follow the first node's gate)");
    }
  }
}

}  // namespace fleet
