#include "src/engine/planner.h"

#include <openssl/rand.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "providers/node/gpu_facts.h"
#include "providers/node/node_provider.h"
#include "src/engine/copy_chains.h"
#include "src/engine/create_before_destroy.h"
#include "src/engine/probe_script.h"
#include "src/engine/removal_order.h"

namespace fleet {

namespace {

std::string RandomNonce() {
  unsigned char b[8];
  if (RAND_bytes(b, sizeof b) != 1) return "0";
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

// Runs fn(i) for i in [0, n) on up to `parallelism` threads.
void ParallelFor(size_t n, int parallelism, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  size_t workers = std::min<size_t>(n, std::max(1, parallelism));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : threads) t.join();
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

// Two fragments around the others: the node's clock at the start and the end
// of the probe script, so that -v can tell the time on the node from the
// time on the wire.
constexpr const char* kClockBegin = "@clock.begin";
constexpr const char* kClockEnd = "@clock.end";
constexpr const char* kClockScript = "date +%s%N 2>/dev/null";

// The section of a provider's InventoryScript: "inventory" is no type, so no
// resource's address.
std::string InventoryAddress(const std::string& type, const std::string& node) {
  return "inventory." + type + "@" + node;
}

// "probe dgx1: 0.41 s (ssh 0.12 s; on the node 0.290 s; fleet-probe 0.05 s,
// no CUDA context: fleet serve fleet-x runs on the node ...)": the wall time
// of the node's probe (connect + the one round trip), the part that was not
// the script running on the node, the script's own time there, and what
// fleet-probe took and decided.
std::string DescribeProbeTime(const std::string& node, double wall_s,
                              const std::map<std::string, ProbeSection>& sections,
                              const NodeFacts& facts) {
  std::string s = fmt::format("probe {}: {:.2f} s", node, wall_s);
  auto clock = [&](const char* key) -> long double {
    auto it = sections.find(key);
    if (it == sections.end()) return -1;
    try {
      return std::stold(it->second.output);
    } catch (...) {
      return -1;
    }
  };
  const long double begin = clock(kClockBegin), end = clock(kClockEnd);
  std::vector<std::string> parts;
  if (begin > 0 && end >= begin) {
    const double node_s = double(end - begin) / 1e9;
    parts.push_back(fmt::format("ssh {:.2f} s", std::max(0.0, wall_s - node_s)));
    // In ms: what a converged plan costs on the node (bench/plan_bench.sh).
    parts.push_back(fmt::format("on the node {:.3f} s", node_s));
  }
  GpuFacts gpu;
  if (facts.gpu_probe_s >= 0 && GpuFactsFromJson(facts.gpu, &gpu))
    parts.push_back(
        fmt::format("fleet-probe {:.3f} s, {}", facts.gpu_probe_s, gpu.context_decision));
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? " (" : "; ") + parts[i];
  return parts.empty() ? s : s + ")";
}

}  // namespace

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

void Planner::ReadSwitch(const std::string& node, NodeFacts* facts) const {
  if (power_ == nullptr) return;
  const NodeSpec& spec = manifest_->nodes.at(node);
  if (!spec.power.present || spec.power.switch_entity.empty()) return;
  Result<std::string> state = power_->GetState(spec.power.switch_entity);
  if (state.ok()) {
    facts->power_switch_state = *state;
  } else {
    facts->power_switch_error = state.status().message();
    facts->power_switch_refused = !state.status().unreachable();
  }
}

void Planner::ProbeNode(const std::string& node,
                        const std::vector<const DesiredResource*>& resources, bool inventory,
                        ProbeResult& out) {
  NodeFacts& facts = out.facts[node];
  const NodeSpec& spec = manifest_->nodes.at(node);
  Transport* t = connections_->Get(node);
  const auto started = std::chrono::steady_clock::now();
  Status s = t->Connect();
  if (!s.ok()) {
    facts.reachable = false;
    facts.unreachable_reason = s.message();
    if (!s.unreachable()) out.node_errors[node] = s.message();
    return;
  }
  // Node facts first: the other fragments' parsers may need them.
  // A resource with no fragment is read from the node facts alone (an
  // image pinned by digest: the node's image listing).
  // The node's clock only for -v, which prints the time on the node: two
  // `date` processes cost every plan ~6 ms there otherwise.
  const bool clocked = spdlog::should_log(spdlog::level::info);
  std::vector<ProbeFragment> fragments;
  if (clocked) fragments.push_back({kClockBegin, kClockScript});
  std::set<std::string> from_facts;
  for (const DesiredResource* r : resources) {
    const Provider* p = ProviderFor(r->type);
    std::string script = p->ProbeScript(*r, spec);
    if (!script.empty()) fragments.push_back({r->address, script});
    if (script.empty()) from_facts.insert(r->address);
  }
  if (inventory)
    for (const auto& p : *providers_) {
      std::string script = p->InventoryScript(node, *manifest_);
      if (!script.empty()) fragments.push_back({InventoryAddress(p->type(), node), script});
    }
  if (clocked) fragments.push_back({kClockEnd, kClockScript});
  const std::string nonce = RandomNonce();
  Result<CommandResult> run = t->Run(BuildProbeScript(fragments, nonce));
  const double wall_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  spdlog::debug("{}: probed {} resource(s) in one round trip", node,
                fragments.size() - (clocked ? 2 : 0));
  if (!run.ok()) {
    facts.reachable = false;
    facts.unreachable_reason = run.status().message();
    if (!run.status().unreachable()) out.node_errors[node] = run.status().message();
    return;
  }
  std::map<std::string, ProbeSection> sections = SplitProbeOutput(run->out, nonce);
  facts = ParseNodeFacts(sections[NodeAddress(node)].output);
  spdlog::info("{}", DescribeProbeTime(node, wall_s, sections, facts));
  for (const DesiredResource* r : resources) {
    auto it = sections.find(r->address);
    if (it == sections.end() && r->type != "node" && !from_facts.count(r->address)) continue;
    const Provider* p = ProviderFor(r->type);
    ActualResource a = p->ParseProbe(*r, it == sections.end() ? "" : it->second.output, facts);
    if (it != sections.end() && it->second.exit_code != 0 && a.error.empty())
      a.error = "probe exited " + std::to_string(it->second.exit_code);
    out.actual[r->address] = std::move(a);
  }
  for (const auto& p : *providers_) {
    auto it = sections.find(InventoryAddress(p->type(), node));
    if (it != sections.end() && it->second.exit_code == 0)
      out.inventory[node][p->type()] = it->second.output;
  }
}

ProbeResult Planner::Probe(const std::vector<DesiredResource>& desired, int parallelism,
                           const std::set<std::string>& inventory_nodes) {
  std::map<std::string, std::vector<const DesiredResource*>> by_node;
  for (const DesiredResource& r : desired) by_node[r.node].push_back(&r);
  std::vector<std::string> nodes;
  for (const auto& [n, _] : by_node) nodes.push_back(n);

  std::vector<ProbeResult> partial(nodes.size());
  ParallelFor(nodes.size(), parallelism, [&](size_t i) {
    const std::string& node = nodes[i];
    // The switch is read while the node is probed (one HTTP request beside
    // the SSH round trip), whatever the probe finds.
    NodeFacts switch_read;
    const NodeSpec& spec = manifest_->nodes.at(node);
    std::thread reader;
    if (power_ != nullptr && spec.power.present)
      reader = std::thread([&] { ReadSwitch(node, &switch_read); });
    ProbeNode(node, by_node[node], inventory_nodes.count(node) > 0, partial[i]);
    if (reader.joinable()) reader.join();
    NodeFacts& facts = partial[i].facts[node];
    facts.power_switch_state = std::move(switch_read.power_switch_state);
    facts.power_switch_error = std::move(switch_read.power_switch_error);
    facts.power_switch_refused = switch_read.power_switch_refused;
  });

  ProbeResult merged;
  for (ProbeResult& p : partial) {
    merged.facts.merge(p.facts);
    merged.actual.merge(p.actual);
    merged.node_errors.merge(p.node_errors);
    merged.inventory.merge(p.inventory);
  }
  return merged;
}

namespace {

// A node declared off is a normal state: only the node itself is probed
// (is it really off?), nothing on it is read or changed.
std::set<std::string> DeclaredOffNodes(const std::vector<DesiredResource>& desired) {
  std::set<std::string> off;
  for (const DesiredResource& r : desired)
    if (r.type == "node" && r.attributes.value("power", "on") == "off") off.insert(r.node);
  return off;
}

// The nodes whose power follows demand (state: on_demand) that the plan
// found asleep: SSH does not answer and the switch reads off. Like a node
// declared off, nothing on them is read or changed: a request, idle_off or
// a schedule changes their power, never a plan.
std::set<std::string> AsleepNodes(const std::vector<DesiredResource>& desired,
                                  const ProbeResult& probed) {
  std::set<std::string> asleep;
  for (const DesiredResource& r : desired) {
    if (r.type != "node" || r.attributes.value("power", "on") != "on_demand") continue;
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
                            const PlanOptions& options, std::vector<std::string>* errors) {
  std::set<std::string> planned;
  for (const PlanChange& c : changes)
    if (c.action != Action::kNoop) planned.insert(c.address);
  for (const PlanChange& c : changes)
    for (const std::string& d : c.depends_on) {
      const std::vector<std::string>& declared = deps[c.address];
      if (std::find(declared.begin(), declared.end(), d) == declared.end() && !planned.count(d))
        errors->push_back(c.address + " must wait for " + d + ", which this plan does not change" +
                          (options.targets.empty() ? "" : " (add it with --target)"));
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
std::set<std::string> InventoryNodes(const std::vector<DesiredResource>& to_probe,
                                     const std::set<std::string>& declared_off,
                                     const PlanOptions& options) {
  std::set<std::string> nodes;
  if (options.destroy || !options.targets.empty()) return nodes;
  for (const DesiredResource& r : to_probe)
    if (r.type == "node" && !declared_off.count(r.node)) nodes.insert(r.node);
  return nodes;
}

// What the nodes hold that neither the manifests nor the state know: each
// provider names it (or, with --purge, removes it). Only in a whole plan:
// --target and destroy leave it alone.
void AddUnrecorded(const std::vector<std::unique_ptr<Provider>>& providers,
                   const ProbeResult& probed, const std::set<std::string>& skip_nodes,
                   const std::set<std::string>& recorded,
                   const std::vector<ResourceRecord>& records, const Manifest* manifest,
                   const PlanOptions& options, std::vector<PlanChange>* changes) {
  if (options.destroy || !options.targets.empty()) return;
  for (const auto& [node, facts] : probed.facts) {
    if (!facts.reachable || skip_nodes.count(node)) continue;
    DiffContext ctx{facts,         &probed.facts, &probed.actual, manifest,
                    options.purge, changes,       &recorded};
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
    plan->errors.push_back(err);
    failed.insert(node);
  }
  return failed;
}

// A gateway on a node the probe could not reach is named on that node's
// line: clients of the whole lab reach the serves through it.
void NameUnreachableGateways(const std::vector<DesiredResource>& in_plan, Plan* plan) {
  for (const DesiredResource& r : in_plan) {
    auto it = plan->unreachable.find(r.node);
    if (r.type == "gateway" && it != plan->unreachable.end())
      it->second += "; " + r.address + " is not planned, and its clients get no answer";
  }
}

}  // namespace

Plan Planner::MakePlan(const State& state, const PlanOptions& options) {
  Plan plan;
  plan.lineage = state.lineage;
  plan.serial = state.serial;
  plan.destroy = options.destroy;
  plan.targets = options.targets;

  std::vector<DesiredResource> desired = Desired();
  std::map<std::string, std::vector<std::string>> deps, dependents;
  std::set<std::string> known, recorded;
  for (const DesiredResource& r : desired) {
    known.insert(r.address);
    deps[r.address] = r.depends_on;
    for (const std::string& d : r.depends_on) dependents[d].push_back(r.address);
  }
  for (const ResourceRecord& rec : state.resources) known.insert(rec.address);
  for (const ResourceRecord& rec : state.resources) recorded.insert(rec.address);
  for (const std::string& t : options.targets)
    if (!known.count(t)) plan.errors.push_back("--target " + t + ": no such resource");
  if (!plan.errors.empty()) return plan;

  // Targets select themselves plus what they need (apply) or what needs them
  // (destroy: a node cannot go down under its deployments).
  std::set<std::string> selected;
  if (!options.targets.empty())
    selected = Closure(options.targets, options.destroy ? dependents : deps);
  auto in_scope = [&](const std::string& a) { return selected.empty() || selected.count(a); };

  const std::set<std::string> declared_off = DeclaredOffNodes(desired);

  std::vector<DesiredResource> in_plan, to_probe;
  for (const DesiredResource& r : desired) {
    if (!in_scope(r.address)) continue;
    in_plan.push_back(r);
    if (r.type == "node" || !declared_off.count(r.node)) to_probe.push_back(r);
  }
  ProbeResult probed =
      Probe(to_probe, options.probe_parallelism, InventoryNodes(to_probe, declared_off, options));

  // Declared off or asleep: expected not to answer, nothing on them planned.
  const std::set<std::string> quiet = Union(declared_off, AsleepNodes(in_plan, probed));
  std::set<std::string> bad_nodes = NodesThatFailed(probed, quiet, &plan);
  NameUnreachableGateways(in_plan, &plan);

  std::vector<PlanChange> changes;
  for (const DesiredResource& r : in_plan) {
    if (bad_nodes.count(r.node)) continue;
    if (r.type != "node" && quiet.count(r.node)) {
      changes.push_back(NotChecked(r, !declared_off.count(r.node)));
      continue;
    }
    const Provider* p = ProviderFor(r.type);
    const NodeFacts& facts = probed.facts[r.node];
    ActualResource actual;
    if (auto it = probed.actual.find(r.address); it != probed.actual.end()) actual = it->second;
    const ResourceRecord* rec = state.Find(r.address);
    DiffContext ctx{facts,         &probed.facts, &probed.actual, manifest_,
                    options.purge, &changes,      &recorded};
    ctx.hub = hub_;
    PlanChange c =
        options.destroy ? p->DiffDestroy(r, actual, rec, ctx) : p->Diff(r, actual, rec, ctx);
    MergeDependsOn(r, &c);
    if (!c.error.empty()) {
      plan.errors.push_back(c.error);
      // Refuse to touch anything else on a node whose identity is wrong.
      if (r.type == "node") bad_nodes.insert(r.node);
      continue;
    }
    changes.push_back(std::move(c));
  }
  std::erase_if(changes, [&](const PlanChange& c) { return bad_nodes.count(c.node) > 0; });

  // State records nothing declares any more: their provider decides (by
  // default the record is forgotten and nothing on the node changes).
  for (const ResourceRecord& rec : state.resources) {
    if (deps.count(rec.address) || !in_scope(rec.address)) continue;
    if (bad_nodes.count(rec.node)) continue;
    const Provider* p = ProviderFor(rec.type);
    const NodeFacts& facts = probed.facts[rec.node];
    DiffContext ctx{facts,         &probed.facts, &probed.actual, manifest_,
                    options.purge, &changes,      &recorded};
    PlanChange c = p ? p->DiffOrphan(rec, ctx) : ForgetRecord(rec);
    changes.push_back(std::move(c));
  }

  AddUnrecorded(*providers_, probed, Union(bad_nodes, quiet), recorded, state.resources, manifest_,
                options, &changes);
  std::vector<std::string> type_order;
  for (const auto& p : *providers_) type_order.push_back(p->type());
  if (!options.destroy) OrderUndeclaredRemovals(deps, type_order, &changes);
  if (!options.destroy) OrderCreateBeforeDestroy(&changes);
  if (!options.destroy) CheckAddedDependencies(changes, deps, options, &plan.errors);
  if (options.destroy) ReverseForDestroy(dependents, &changes);
  if (options.destroy) std::reverse(type_order.begin(), type_order.end());
  if (!SortByDependencies(&changes, type_order))
    plan.errors.push_back("dependency cycle between resources");
  plan.changes = std::move(changes);
  ChainFanOuts(&plan.changes, !options.destroy && FanOutChainsEnabled());
  if (options.probed_out != nullptr) *options.probed_out = std::move(probed);
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
