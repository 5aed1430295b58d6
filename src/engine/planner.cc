#include "src/engine/planner.h"

#include <algorithm>
#include <set>

#include "src/engine/copy_chains.h"
#include "src/engine/create_before_destroy.h"
#include "src/engine/removal_order.h"

namespace fleet {

namespace {

const Provider* ProviderFor(const PlanContext& ctx, const std::string& type) {
  for (const auto& p : *ctx.providers)
    if (p->type() == type) return p.get();
  return nullptr;
}

// The provider of `type` when its resource is the node itself, else null.
const Provider* NodeItself(const PlanContext& ctx, const std::string& type) {
  const Provider* p = ProviderFor(ctx, type);
  return p != nullptr && p->IsNodeItself() ? p : nullptr;
}

// All addresses reachable from `roots` following `edges`.
std::set<std::string> Closure(const std::vector<std::string>& roots,
                              const std::map<std::string, std::vector<std::string>>& edges) {
  std::set<std::string> seen;
  std::vector<std::string> stack(roots.begin(), roots.end());
  while (!stack.empty()) {
    std::string a = stack.back();
    stack.pop_back();
    if (!seen.insert(a).second) continue;
    auto it = edges.find(a);
    if (it == edges.end()) continue;
    for (const std::string& d : it->second) stack.push_back(d);
  }
  return seen;
}

// A node declared off is a normal state: only the node itself is probed
// (is it really off?), nothing on it is read or changed.
std::set<std::string> DeclaredOffNodes(const PlanContext& ctx,
                                       const std::vector<DesiredResource>& desired) {
  std::set<std::string> off;
  for (const DesiredResource& r : desired)
    if (const Provider* p = NodeItself(ctx, r.type); p && p->PowerOf(r) == DeclaredPower::kOff)
      off.insert(r.node);
  return off;
}

// The nodes whose power follows demand (state: on_demand) that the plan
// found asleep: SSH does not answer and the switch reads off. Like a node
// declared off, nothing on them is read or changed: a request, idle_off or
// a schedule changes their power, never a plan.
std::set<std::string> AsleepNodes(const PlanContext& ctx,
                                  const std::vector<DesiredResource>& desired,
                                  const ProbeResult& probed) {
  std::set<std::string> asleep;
  for (const DesiredResource& r : desired) {
    const Provider* p = NodeItself(ctx, r.type);
    if (p == nullptr || p->PowerOf(r) != DeclaredPower::kOnDemand) continue;
    auto it = probed.facts.find(r.node);
    if (it != probed.facts.end() && !it->second.reachable && it->second.power_switch_state == "off")
      asleep.insert(r.node);
  }
  return asleep;
}

std::set<std::string> Union(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// The noop of a resource on a node declared off, or asleep.
PlanChange NotChecked(const DesiredResource& r, bool asleep = false) {
  PlanChange c;
  c.address = r.address;
  c.type = r.type;
  c.node = r.node;
  c.summary = "not checked: node " + r.node +
              (asleep ? " is asleep (power: on_demand; a request wakes it)" : " is declared off");
  c.depends_on = r.depends_on;
  return c;
}

// What the resource depends on, plus what its change found it must wait
// for (e.g. a deployment whose port an orphan removed in this plan holds).
void MergeDependsOn(const DesiredResource& r, PlanChange* c) {
  std::vector<std::string> extra = std::move(c->depends_on);
  c->depends_on = r.depends_on;
  for (std::string& d : extra)
    if (std::find(c->depends_on.begin(), c->depends_on.end(), d) == c->depends_on.end())
      c->depends_on.push_back(std::move(d));
}

// A dependency a diff added (beyond the declared ones) must be a change of
// this plan: a serve waiting for an orphan's removal that --target left out
// would wait for nothing.
void CheckAddedDependencies(const std::vector<PlanChange>& changes,
                            std::map<std::string, std::vector<std::string>>& deps,
                            const PlanOptions& options, std::vector<PlanDiagnostic>* errors) {
  std::set<std::string> planned;
  for (const PlanChange& c : changes)
    if (c.action != Action::kNoop) planned.insert(c.address);
  for (const PlanChange& c : changes)
    for (const std::string& d : c.depends_on) {
      const std::vector<std::string>& declared = deps[c.address];
      if (std::find(declared.begin(), declared.end(), d) == declared.end() && !planned.count(d))
        errors->push_back({c.address,
                           c.address + " must wait for " + d + ", which this plan does not change",
                           options.targets.empty() ? "" : "add it with --target"});
    }
}

// Destroy walks the graph backwards: a change waits for the changes of
// everything that depended on it.
void ReverseForDestroy(std::map<std::string, std::vector<std::string>>& dependents,
                       std::vector<PlanChange>* changes) {
  std::set<std::string> active;
  for (const PlanChange& c : *changes)
    if (c.action != Action::kNoop) active.insert(c.address);
  for (PlanChange& c : *changes) {
    c.depends_on.clear();
    for (const std::string& d : dependents[c.address])
      if (active.count(d)) c.depends_on.push_back(d);
  }
}

// The nodes whose inventory AddUnrecorded reads: every node probed in a
// whole plan, but those declared off.
std::set<std::string> InventoryNodes(const PlanContext& ctx,
                                     const std::vector<DesiredResource>& to_probe,
                                     const std::set<std::string>& declared_off,
                                     const PlanOptions& options) {
  std::set<std::string> nodes;
  if (options.destroy || !options.targets.empty()) return nodes;
  for (const DesiredResource& r : to_probe)
    if (NodeItself(ctx, r.type) && !declared_off.count(r.node)) nodes.insert(r.node);
  return nodes;
}

// What the nodes hold that neither the manifests nor the state know: each
// provider names it (or, with --purge, removes it). Only in a whole plan:
// --target and destroy leave it alone.
void AddUnrecorded(const std::vector<std::unique_ptr<Provider>>& providers,
                   const ProbeResult& probed, const std::map<std::string, NodeFacts>& all_facts,
                   const std::set<std::string>& skip_nodes, const std::set<std::string>& recorded,
                   const std::vector<ResourceRecord>& records, const Manifest* manifest,
                   const PlanOptions& options, std::vector<PlanChange>* changes) {
  if (options.destroy || !options.targets.empty()) return;
  for (const auto& [node, facts] : all_facts) {
    if (!facts.reachable || skip_nodes.count(node)) continue;
    DiffContext ctx{facts, &all_facts, &probed.actual, manifest, options.purge, changes, &recorded};
    ctx.records = &records;
    const auto inventory = probed.inventory.find(node);
    for (const auto& p : providers) {
      ctx.inventory = nullptr;
      if (inventory != probed.inventory.end())
        if (auto it = inventory->second.find(p->type()); it != inventory->second.end())
          ctx.inventory = &it->second;
      std::vector<PlanChange> found = p->DiffUnrecorded(node, ctx);
      changes->insert(changes->end(), std::make_move_iterator(found.begin()),
                      std::make_move_iterator(found.end()));
    }
  }
}

// Puts each node the probe could not reach into plan->unreachable (a node
// declared off is expected not to answer) and each other probe failure into
// plan->errors; returns the latter's nodes, which the plan leaves alone.
std::set<std::string> NodesThatFailed(const ProbeResult& probed,
                                      const std::set<std::string>& declared_off, Plan* plan) {
  for (const auto& [node, facts] : probed.facts)
    if (!facts.reachable && !probed.node_errors.count(node) && !declared_off.count(node))
      plan->unreachable[node] = facts.unreachable_reason;
  std::set<std::string> failed;
  for (const auto& [node, err] : probed.node_errors) {
    plan->errors.push_back({"node." + node, err, ""});
    failed.insert(node);
  }
  return failed;
}

// What a node the probe could not reach leaves unplanned is named on that
// node's line where its provider says it matters (a gateway: clients of the
// whole lab reach the serves through it).
void NameUnplannedOnUnreachable(const PlanContext& ctx, const std::vector<DesiredResource>& in_plan,
                                Plan* plan) {
  for (const DesiredResource& r : in_plan) {
    auto it = plan->unreachable.find(r.node);
    if (it == plan->unreachable.end()) continue;
    const Provider* p = ProviderFor(ctx, r.type);
    const std::string cost = p ? p->UnplannedCost(r) : "";
    if (!cost.empty()) it->second += "; " + r.address + " is not planned, and " + cost;
  }
}

}  // namespace

PlanScope ScopeOf(const PlanContext& ctx, const std::vector<DesiredResource>& desired,
                  const State& state, const PlanOptions& options) {
  PlanScope scope;
  std::map<std::string, std::vector<std::string>> deps, dependents;
  std::set<std::string> known;
  for (const DesiredResource& r : desired) {
    known.insert(r.address);
    deps[r.address] = r.depends_on;
    for (const std::string& d : r.depends_on) dependents[d].push_back(r.address);
  }
  for (const ResourceRecord& rec : state.resources) known.insert(rec.address);
  for (const std::string& t : options.targets)
    if (!known.count(t)) scope.errors.push_back({t, "--target " + t + ": no such resource", ""});
  if (!scope.errors.empty()) return scope;

  // Targets select themselves plus what they need (apply) or what needs them
  // (destroy: a node cannot go down under its deployments).
  std::set<std::string> selected;
  if (!options.targets.empty())
    selected = Closure(options.targets, options.destroy ? dependents : deps);
  auto in_scope = [&](const std::string& a) { return selected.empty() || selected.count(a); };

  scope.declared_off = DeclaredOffNodes(ctx, desired);
  for (const DesiredResource& r : desired) {
    if (!in_scope(r.address)) continue;
    scope.in_plan.push_back(r);
    if (NodeItself(ctx, r.type) || !scope.declared_off.count(r.node)) scope.to_probe.push_back(r);
  }
  scope.inventory_nodes = InventoryNodes(ctx, scope.to_probe, scope.declared_off, options);
  for (const ResourceRecord& rec : state.resources)
    if (!deps.count(rec.address) && in_scope(rec.address)) scope.orphans.insert(rec.address);
  return scope;
}

Plan PlanFrom(const PlanContext& ctx, const std::vector<DesiredResource>& desired,
              const ProbeResult& probed, const State& state, const PlanOptions& options) {
  Plan plan;
  plan.lineage = state.lineage;
  plan.serial = state.serial;
  plan.destroy = options.destroy;
  plan.targets = options.targets;

  PlanScope scope = ScopeOf(ctx, desired, state, options);
  plan.errors = std::move(scope.errors);
  if (!plan.errors.empty()) return plan;

  std::map<std::string, std::vector<std::string>> deps, dependents;
  for (const DesiredResource& r : desired) {
    deps[r.address] = r.depends_on;
    for (const std::string& d : r.depends_on) dependents[d].push_back(r.address);
  }
  std::set<std::string> recorded;
  for (const ResourceRecord& rec : state.resources) recorded.insert(rec.address);

  // The facts the diffs read: what the probe found, and for a node it did
  // not probe (a removed record's node outside the manifests), the facts
  // of a node that did not answer, added as a diff first asks for them.
  std::map<std::string, NodeFacts> facts = probed.facts;

  // Declared off or asleep: expected not to answer, nothing on them planned.
  const std::set<std::string>& declared_off = scope.declared_off;
  const std::set<std::string> quiet = Union(declared_off, AsleepNodes(ctx, scope.in_plan, probed));
  std::set<std::string> bad_nodes = NodesThatFailed(probed, quiet, &plan);
  NameUnplannedOnUnreachable(ctx, scope.in_plan, &plan);

  std::vector<PlanChange> changes;
  for (const DesiredResource& r : scope.in_plan) {
    if (bad_nodes.count(r.node)) continue;
    const Provider* p = ProviderFor(ctx, r.type);
    if (!p->IsNodeItself() && quiet.count(r.node)) {
      changes.push_back(NotChecked(r, !declared_off.count(r.node)));
      continue;
    }
    ActualResource actual;
    if (auto it = probed.actual.find(r.address); it != probed.actual.end()) actual = it->second;
    const ResourceRecord* rec = state.Find(r.address);
    DiffContext diff{facts[r.node], &facts,   &probed.actual, ctx.manifest,
                     options.purge, &changes, &recorded};
    diff.hub = ctx.hub;
    PlanChange c =
        options.destroy ? p->DiffDestroy(r, actual, rec, diff) : p->Diff(r, actual, rec, diff);
    MergeDependsOn(r, &c);
    if (!c.error.empty()) {
      plan.errors.push_back({c.address, c.error, ""});
      // Refuse to touch anything else on a node whose identity is wrong.
      if (p->IsNodeItself()) bad_nodes.insert(r.node);
      continue;
    }
    changes.push_back(std::move(c));
  }
  std::erase_if(changes, [&](const PlanChange& c) { return bad_nodes.count(c.node) > 0; });

  // State records nothing declares any more: their provider decides (by
  // default the record is forgotten and nothing on the node changes).
  for (const ResourceRecord& rec : state.resources) {
    if (!scope.orphans.count(rec.address) || bad_nodes.count(rec.node)) continue;
    const Provider* p = ProviderFor(ctx, rec.type);
    DiffContext diff{facts[rec.node], &facts,   &probed.actual, ctx.manifest,
                     options.purge,   &changes, &recorded};
    PlanChange c = p ? p->DiffOrphan(rec, diff) : ForgetRecord(rec);
    changes.push_back(std::move(c));
  }

  AddUnrecorded(*ctx.providers, probed, facts, Union(bad_nodes, quiet), recorded, state.resources,
                ctx.manifest, options, &changes);
  std::vector<std::string> type_order;
  for (const auto& p : *ctx.providers) type_order.push_back(p->type());
  if (!options.destroy) OrderUndeclaredRemovals(deps, type_order, &changes);
  if (!options.destroy) OrderCreateBeforeDestroy(&changes);
  if (!options.destroy) CheckAddedDependencies(changes, deps, options, &plan.errors);
  if (options.destroy) ReverseForDestroy(dependents, &changes);
  if (options.destroy) std::reverse(type_order.begin(), type_order.end());
  if (!SortByDependencies(&changes, type_order))
    plan.errors.push_back({"", "dependency cycle between resources", ""});
  plan.changes = std::move(changes);
  ChainFanOuts(&plan.changes, !options.destroy && ctx.chain_fan_outs);
  return plan;
}

Planner::Planner(const Manifest* manifest, const std::vector<std::unique_ptr<Provider>>* providers,
                 NodeConnections* connections, PowerSwitch* power)
    : manifest_(manifest),
      providers_(providers),
      connections_(connections),
      power_(power),
      own_hub_(MakeHubApiFor(*manifest)),
      hub_(own_hub_.get()) {}

const Provider* Planner::ProviderFor(const std::string& type) const {
  for (const auto& p : *providers_)
    if (p->type() == type) return p.get();
  return nullptr;
}

std::vector<DesiredResource> Planner::Desired() const {
  std::vector<DesiredResource> all;
  for (const auto& p : *providers_) {
    std::vector<DesiredResource> some = p->Expand(*manifest_);
    all.insert(all.end(), std::make_move_iterator(some.begin()),
               std::make_move_iterator(some.end()));
  }
  return all;
}

ProbeResult Planner::Probe(const std::vector<DesiredResource>& desired, int parallelism,
                           const std::set<std::string>& inventory_nodes) {
  return ProbeNodes({manifest_, providers_, connections_, power_}, desired, parallelism,
                    inventory_nodes);
}

Plan Planner::MakePlan(const State& state, const PlanOptions& options) {
  const PlanContext ctx{manifest_, providers_, hub_, FanOutChainsEnabled()};
  const std::vector<DesiredResource> desired = Desired();
  const PlanScope scope = ScopeOf(ctx, desired, state, options);
  if (!scope.errors.empty()) return PlanFrom(ctx, desired, ProbeResult{}, state, options);
  ProbeResult probed = Probe(scope.to_probe, options.probe_parallelism, scope.inventory_nodes);
  Plan plan = PlanFrom(ctx, desired, probed, state, options);
  if (options.probed_out != nullptr) {
    // As the diffs read them: a removed record's node that was not probed
    // reads as a node that did not answer.
    for (const ResourceRecord& rec : state.resources)
      if (scope.orphans.count(rec.address)) probed.facts.try_emplace(rec.node);
    *options.probed_out = std::move(probed);
  }
  return plan;
}

bool SortByDependencies(std::vector<PlanChange>* changes,
                        const std::vector<std::string>& type_order) {
  auto rank = [&](const PlanChange& c) {
    auto it = std::find(type_order.begin(), type_order.end(), c.type);
    return it - type_order.begin();
  };
  std::vector<PlanChange> in = std::move(*changes);
  std::sort(in.begin(), in.end(), [&](const PlanChange& a, const PlanChange& b) {
    return std::make_pair(rank(a), a.address) < std::make_pair(rank(b), b.address);
  });
  std::set<std::string> present, placed;
  for (const PlanChange& c : in) present.insert(c.address);
  std::vector<PlanChange> out;
  std::vector<bool> done(in.size(), false);
  while (out.size() < in.size()) {
    bool progress = false;
    for (size_t i = 0; i < in.size(); ++i) {
      if (done[i]) continue;
      bool ready =
          std::all_of(in[i].depends_on.begin(), in[i].depends_on.end(),
                      [&](const std::string& d) { return !present.count(d) || placed.count(d); });
      if (!ready) continue;
      placed.insert(in[i].address);
      out.push_back(in[i]);
      done[i] = true;
      progress = true;
      break;  // restart so the earliest-ranked ready change goes next
    }
    if (!progress) {
      for (size_t i = 0; i < in.size(); ++i)
        if (!done[i]) out.push_back(in[i]);
      *changes = std::move(out);
      return false;
    }
  }
  *changes = std::move(out);
  return true;
}

}  // namespace fleet
