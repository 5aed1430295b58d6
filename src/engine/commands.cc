#include "src/engine/commands.h"

#include <fcntl.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include "manifests/duration.h"
#include "manifests/manifest.h"
#include "providers/model/model_provider.h"
#include "providers/node/node_provider.h"
#include "providers/shared/bind_list.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/serving/deployment_spec.h"
#include "src/atomic_file.h"
#include "src/engine/executor.h"
#include "src/engine/gate_plan.h"
#include "src/engine/gate_step.h"
#include "src/engine/node_connections.h"
#include "src/engine/plan_sources.h"
#include "src/engine/planner.h"
#include "src/engine/render.h"
#include "src/engine/schedule_clock.h"
#include "src/power_switch.h"
#include "src/shell_quote.h"
#include "state/state_store.h"

namespace fleet {

namespace {

// Everything a command needs, opened in one place.
struct Session {
  Manifest manifest;
  Diagnostics diags;
  std::vector<std::unique_ptr<Provider>> providers;
  std::unique_ptr<NodeConnections> connections;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<PowerSwitch> power;
};

void PrintDiagnostics(const Diagnostics& diags) {
  for (const Diagnostic& d : diags) std::cerr << d.ToString() << "\n";
}

// The store of `backend` ("local" or "postgres") as the manifests set it up.
std::unique_ptr<StateStore> MakeStore(const StateSettings& st, const std::string& backend) {
  if (backend == "postgres") return MakePostgresStateStore(st.conn_env, st.schema);
  return MakeLocalStateStore(st.path);
}

}  // namespace

// Debug logs (-v) go to stderr so that --json output stays clean.
void SetUpLogging(const GlobalOptions& g) {
  static bool done = false;
  if (!done) {
    spdlog::set_default_logger(spdlog::stderr_color_mt("fleet"));
    spdlog::set_pattern("%^%l%$ %v");
    done = true;
  }
  spdlog::set_level(g.verbosity > 0 ? spdlog::level::debug : spdlog::level::warn);
}

bool LoadManifestSaying(const GlobalOptions& g, Manifest* m, const std::string& done) {
  Diagnostics diags;
  const bool ok = LoadManifest(g.dir, m, &diags);
  for (const Diagnostic& d : diags) std::cerr << d.ToString() << "\n";
  if (!ok)
    std::cerr << "fleet: the manifests in " << g.dir << " have errors; nothing was " << done
              << "\n";
  return ok;
}

std::unique_ptr<StateStore> OpenStateStore(const StateSettings& settings) {
  return MakeStore(settings, settings.backend);
}

namespace {

// The lock, waiting up to `timeout` ("5m"; "": not at all); on error prints it.
std::unique_ptr<StateLock> TakeLock(Session& s, const std::string& operation,
                                    const std::string& timeout) {
  int64_t ms = 0;
  if (!timeout.empty()) {
    std::optional<int> secs = ParseDurationSeconds(timeout, 0);  // 0: do not wait
    if (!secs) {
      std::cerr << "fleet: --lock-timeout " << timeout << " is not a duration (e.g. 90s, 5m)\n";
      return nullptr;
    }
    ms = int64_t{*secs} * 1000;
  }
  Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(s.store.get(), operation, ms);
  if (!lock.ok()) {
    std::cerr << "fleet: " << lock.status().message() << (ms > 0 ? " (waited " + timeout + ")" : "")
              << "\n";
    return nullptr;
  }
  return std::move(lock.value());
}

// Loads the manifests; on errors prints them and returns false.
bool Open(const GlobalOptions& g, Session* s) {
  SetUpLogging(g);
  bool ok = LoadManifest(g.dir, &s->manifest, &s->diags);
  PrintDiagnostics(s->diags);
  if (!ok) {
    std::cerr << "fleet: the manifests in " << g.dir << " have errors; nothing was done\n";
    return false;
  }
  s->providers = MakeProviders();
  s->connections = std::make_unique<NodeConnections>(&s->manifest);
  s->store = MakeStore(s->manifest.state, s->manifest.state.backend);
  s->power = MakeDeclaredPowerSwitch(s->manifest.power);
  return true;
}

// --verify overrides the manifests: "deep" hashes every blob now, "sizes"
// skips the deep verify that `verify: deep` asks for.
void ApplyVerifyFlag(const std::string& verify, Manifest* m) {
  for (auto& [name, model] : m->models) {
    if (verify == "deep") model.verify_now = true;
    if (verify == "sizes") model.verify = "sizes";
  }
}

// Loads the state; on error prints it.
Result<State> LoadState(Session& s) {
  Result<State> state = s.store->Load();
  if (!state.ok()) std::cerr << "fleet: " << state.status().message() << "\n";
  return state;
}

// The node's transport, connected; on error prints it and returns null.
Transport* ConnectNode(Session& s, const std::string& node) {
  Transport* t = s.connections->Get(node);
  Status c = t->Connect();
  if (c.ok()) return t;
  std::cerr << "fleet: " << c.message() << "\n";
  return nullptr;
}

void AddWarnings(const Diagnostics& diags, Plan* plan) {
  for (const Diagnostic& d : diags)
    if (d.severity == Diagnostic::Severity::kWarning) plan->warnings.push_back(d.ToString());
}

// Writes a plan (JSON or Markdown) to `path`, mode 0600: a reader never
// sees half a plan, and it may name what a secret unlocks.
Status WritePlanFile(const std::string& path, const std::string& data) {
  Status s = WriteFileAtomic(path, data);
  return s.ok() ? s : Status::Error("cannot write " + path + ": " + s.message());
}

Result<Plan> ReadPlanFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Result<Plan>::Error("cannot read plan file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded()) return Result<Plan>::Error(path + " is not a saved plan (not JSON)");
  Result<Plan> p = Plan::FromJson(j);
  if (!p.ok()) return p.status().Prefixed(path);
  return p;
}

bool AskApproval(bool destroy) {
  if (!isatty(STDIN_FILENO)) {
    std::cerr << "fleet: no terminal to ask for approval; re-run with --auto-approve, or save "
                 "the plan with `fleet plan -out FILE` and apply that file\n";
    return false;
  }
  std::cout << "\nDo you want to perform these actions" << (destroy ? " (destroy)" : "")
            << "?\n  Only 'yes' will be accepted to approve.\n\n  Enter a value: " << std::flush;
  std::string answer;
  std::getline(std::cin, answer);
  if (answer != "yes") {
    std::cout << "\nApply cancelled.\n";
    return false;
  }
  return true;
}

}  // namespace

// The deployment changes that pass a gate (promote:), and the specs a gate
// refused held (src/engine/gate_plan.h).
static void MarkGates(Session& s, bool retry, Plan* plan) {
  bool any = false;
  for (const auto& [_, d] : s.manifest.deployments) any = any || d.promote.has_value();
  if (!any || plan->destroy) return;
  Result<std::vector<nlohmann::json>> events = s.store->Events("");
  if (!events.ok()) {
    plan->warnings.push_back("the gates' last outcomes could not be read (" +
                             events.status().message() + "): no spec is held");
    events = std::vector<nlohmann::json>();
  }
  MarkGatedChanges(s.manifest, LastGateOutcomes(*events), retry, plan);
}

int CmdValidate(const GlobalOptions& g) {
  Session s;
  if (!Open(g, &s)) return 1;
  std::cout << "The manifests are valid: " << s.manifest.nodes.size() << " node(s), "
            << s.manifest.images.size() << " image(s), " << s.manifest.models.size()
            << " model(s), " << s.manifest.deployments.size() << " deployment(s)"
            << (s.manifest.gateways.empty()
                    ? std::string()
                    : ", " + std::to_string(s.manifest.gateways.size()) + " gateway(s)")
            << ".\n";
  return 0;
}

int CmdPlan(const GlobalOptions& g, const PlanCommandOptions& o) {
  Session s;
  if (!Open(g, &s)) return 1;
  ApplyVerifyFlag(o.verify, &s.manifest);
  // Plan does not lock by default (a plan made during an apply is refused as
  // stale when applied); --lock-timeout waits for a running apply and holds
  // the lock while probing, so a CI plan is made against a settled state.
  std::unique_ptr<StateLock> lock;
  if (!o.lock_timeout.empty() && !(lock = TakeLock(s, "plan", o.lock_timeout))) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  Planner planner(&s.manifest, &s.providers, s.connections.get(), s.power.get());
  PlanOptions po;
  po.destroy = o.destroy;
  po.targets = o.targets;
  po.purge = o.purge;
  Plan plan = planner.MakePlan(*state, po);
  MarkGates(s, o.retry_gate, &plan);
  AddWarnings(s.diags, &plan);
  NoteSchedules(s.manifest, g.clock->UnixSeconds(), &plan);
  plan.sources = ManifestSources(s.manifest);
  if (!o.markdown_file.empty()) {
    Status w = WritePlanFile(o.markdown_file, RenderPlanMarkdown(plan));
    if (!w.ok()) {
      std::cerr << "fleet: " << w.message() << "\n";
      return 1;
    }
  }
  if (o.json)
    std::cout << plan.ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << RenderPlan(plan, {g.color});
  if (!plan.errors.empty()) return 1;
  if (!o.out_file.empty()) {
    Status w = WritePlanFile(
        o.out_file,
        plan.ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    if (!w.ok()) {
      std::cerr << "fleet: " << w.message() << "\n";
      return 1;
    }
    if (!o.json)
      std::cout << "\nSaved the plan to " << o.out_file
                << "; apply exactly these actions with: fleet apply " << o.out_file << "\n";
  }
  return o.detailed_exitcode && plan.HasChanges() ? 2 : 0;
}

int CmdApply(const GlobalOptions& g, const ApplyCommandOptions& o) {
  Session s;
  if (!Open(g, &s)) return 1;
  ApplyVerifyFlag(o.verify, &s.manifest);
  std::unique_ptr<StateLock> lock = TakeLock(s, o.destroy ? "destroy" : "apply", o.lock_timeout);
  if (!lock) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  Plan plan;
  if (!o.plan_file.empty()) {
    Result<Plan> saved = ReadPlanFile(o.plan_file);
    if (!saved.ok()) {
      std::cerr << "fleet: " << saved.status().message() << "\n";
      return 1;
    }
    plan = std::move(saved.value());
    // A state never written has no lineage worth comparing yet.
    bool fresh = state->serial == 0 && plan.serial == 0;
    if (!fresh && (plan.lineage != state->lineage || plan.serial != state->serial)) {
      std::cerr << "fleet: the saved plan " << o.plan_file << " is stale: it was made against "
                << "state serial " << plan.serial << " (lineage " << plan.lineage
                << "), the state is now at serial " << state->serial << " (lineage "
                << state->lineage << "); run `fleet plan` again\n";
      return 1;
    }
    // GitOps: the reviewed plan applies only to the manifests it was made from.
    const std::string changed = SourcesChanged(plan.sources, ManifestSources(s.manifest));
    if (!changed.empty()) {
      std::cerr << "fleet: the saved plan " << o.plan_file
                << " no longer matches the manifests: " << changed
                << "; run `fleet plan` again and review it\n";
      return 1;
    }
    if (fresh) state->lineage = plan.lineage;
    if (!plan.errors.empty()) {
      std::cerr << "fleet: the saved plan has errors; nothing applied\n";
      return 1;
    }
  } else {
    Planner planner(&s.manifest, &s.providers, s.connections.get(), s.power.get());
    PlanOptions po;
    po.destroy = o.destroy;
    po.targets = o.targets;
    po.purge = o.purge;
    plan = planner.MakePlan(*state, po);
    MarkGates(s, o.retry_gate, &plan);
    AddWarnings(s.diags, &plan);
    std::cout << RenderPlan(plan, {g.color});
    if (!plan.errors.empty()) return 1;
    if (!plan.HasChanges()) return 0;
    if (!o.auto_approve && !AskApproval(o.destroy)) return 1;
  }
  if (!plan.HasChanges()) {
    std::cout << "No changes to apply.\n";
    return 0;
  }
  std::cout << "\n";
  std::mutex out_mu;
  Executor executor(&s.manifest, &s.providers, s.connections.get(), s.store.get(), s.power.get(),
                    [&](const std::string& line) {
                      // -q keeps the errors and the final report only.
                      if (g.verbosity < 0 && line.rfind("Error", 0) != 0) return;
                      std::lock_guard<std::mutex> l(out_mu);
                      std::cout << line << "\n" << std::flush;
                    });
  executor.set_clock(g.clock);
  GateDeps gate{&s.manifest, &s.providers, s.connections.get(), s.store.get(), g.dir, o.version};
  executor.set_gate(
      [&gate](const PlanChange& c, const StepContext& ctx) { return RunGatedStep(gate, c, ctx); });
  ApplyOptions ao;
  ao.parallelism = o.parallelism;
  ao.rollback = o.rollback;
  ApplyReport report = executor.Apply(plan, &state.value(), ao);
  std::cout << "\n" << RenderApplyReport(report, o.destroy, {g.color});
  return report.ok() ? 0 : 1;
}

int CmdShow(const GlobalOptions& g, const std::string& plan_file, bool json) {
  if (!plan_file.empty()) {
    Result<Plan> plan = ReadPlanFile(plan_file);
    if (!plan.ok()) {
      std::cerr << "fleet: " << plan.status().message() << "\n";
      return 1;
    }
    if (json)
      std::cout << plan->ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                << "\n";
    else
      std::cout << RenderPlan(*plan, {g.color});
    return 0;
  }
  Session s;
  if (!Open(g, &s)) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  if (json)
    std::cout << state->ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << RenderState(*state);
  return 0;
}

int CmdShowMarkdown(const GlobalOptions& g, const std::string& plan_file) {
  (void)g;
  Result<Plan> plan = ReadPlanFile(plan_file);
  if (!plan.ok()) {
    std::cerr << "fleet: " << plan.status().message() << "\n";
    return 1;
  }
  std::cout << RenderPlanMarkdown(*plan);
  return 0;
}

int CmdStateList(const GlobalOptions& g) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  for (const ResourceRecord& r : state->resources) std::cout << r.address << "\n";
  return 0;
}

int CmdStateShow(const GlobalOptions& g, const std::string& address) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  const ResourceRecord* r = state->Find(address);
  if (!r) {
    std::cerr << "fleet: no resource " << address << " in the state\n";
    return 1;
  }
  std::cout << nlohmann::json{{"address", r->address},
                              {"type", r->type},
                              {"node", r->node},
                              {"attributes", r->attributes},
                              {"updated_at", r->updated_at}}
                   .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
            << "\n";
  return 0;
}

int CmdStateRm(const GlobalOptions& g, const std::string& address) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<std::unique_ptr<StateLock>> lock = s.store->Lock("state rm");
  if (!lock.ok()) {
    std::cerr << "fleet: " << lock.status().message() << "\n";
    return 1;
  }
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  if (!state->Remove(address)) {
    std::cerr << "fleet: no resource " << address << " in the state\n";
    return 1;
  }
  ++state->serial;
  Status saved = s.store->Save(*state);
  if (!saved.ok()) {
    std::cerr << "fleet: " << saved.message() << "\n";
    return 1;
  }
  std::cout << "Removed " << address << " from the state (nothing on the node changed).\n";
  return 0;
}

namespace {

// `fleet state adopt`'s probe: every declared resource on the nodes of
// `wanted` (one round trip per node: a deployment's diff reads its image
// too), then each one's provider decides, reading its node when it must
// verify more than the probe shows (a model's headers).
std::vector<Result<nlohmann::json>> ProbeAndAdopt(Session& s, Planner& planner,
                                                  const std::vector<DesiredResource>& wanted) {
  using R = Result<nlohmann::json>;
  std::set<std::string> nodes;
  for (const DesiredResource& w : wanted) nodes.insert(w.node);
  std::vector<DesiredResource> on_nodes;
  for (const DesiredResource& r : planner.Desired())
    if (nodes.count(r.node)) on_nodes.push_back(r);
  ProbeResult probed = planner.Probe(on_nodes, 4);
  std::vector<R> out;
  for (const DesiredResource& w : wanted) {
    if (auto e = probed.node_errors.find(w.node); e != probed.node_errors.end()) {
      out.push_back(R::Error(e->second));
      continue;
    }
    const NodeFacts& facts = probed.facts[w.node];
    const Provider* provider = planner.ProviderFor(w.type);
    if (!facts.reachable && !provider->IsNodeItself()) {
      out.push_back(R::Error(w.node + " is not reachable: " + facts.unreachable_reason));
      continue;
    }
    ActualResource actual;
    if (auto it = probed.actual.find(w.address); it != probed.actual.end()) actual = it->second;
    DiffContext ctx{facts, &probed.facts, &probed.actual, &s.manifest, false, nullptr};
    StepContext node;
    node.node = &s.manifest.nodes.at(w.node);
    node.manifest = &s.manifest;
    node.transport = s.connections->Get(w.node);
    NodeConnections* connections = s.connections.get();
    node.node_transport = [connections](const std::string& n) { return connections->Get(n); };
    if (Status c = facts.reachable ? node.transport->Connect() : Status::OK(); !c.ok()) {
      out.push_back(c);
      continue;
    }
    out.push_back(provider->Adopt(w, actual, ctx, &node));
  }
  return out;
}

// What `fleet state adopt` is asked to take over: the named addresses, or
// (--all) every declared resource this state has no record of. Empty with
// the reason in `*why` when an address cannot be adopted at all.
std::vector<DesiredResource> ToAdopt(Planner& planner, const State& state,
                                     const std::vector<std::string>& addresses, bool all,
                                     std::string* why) {
  std::vector<DesiredResource> out;
  std::vector<DesiredResource> desired = planner.Desired();
  if (all) {
    for (DesiredResource& r : desired)
      if (!state.Find(r.address)) out.push_back(std::move(r));
    return out;
  }
  for (const std::string& a : addresses) {
    auto it = std::find_if(desired.begin(), desired.end(),
                           [&](const DesiredResource& r) { return r.address == a; });
    if (state.Find(a))
      *why = a + ": it is in the state already";
    else if (it == desired.end())
      *why = a + ": the manifests do not declare it (fleet adopts only what they declare; " +
             "`fleet apply --purge` removes what fleet left on a node that nothing declares)";
    else
      out.push_back(*it);
    if (!why->empty()) return {};
  }
  return out;
}

}  // namespace

int CmdStateAdopt(const GlobalOptions& g, const std::vector<std::string>& addresses, bool all) {
  Session s;
  if (!Open(g, &s)) return 1;
  if (addresses.empty() == !all) {
    std::cerr << "fleet: state adopt: name the addresses to adopt, or give --all\n";
    return 1;
  }
  std::unique_ptr<StateLock> lock = TakeLock(s, "state adopt", "");
  if (!lock) return 1;
  Result<State> state = LoadState(s);
  if (!state.ok()) return 1;
  Planner planner(&s.manifest, &s.providers, s.connections.get(), s.power.get());
  std::string why;
  const std::vector<DesiredResource> wanted = ToAdopt(planner, *state, addresses, all, &why);
  if (!why.empty()) {
    std::cerr << "fleet: cannot adopt " << why << "; the state is unchanged\n";
    return 1;
  }
  const std::vector<Result<nlohmann::json>> records = ProbeAndAdopt(s, planner, wanted);
  std::vector<std::string> adopted, refused;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!records[i].ok()) {
      refused.push_back(wanted[i].address + ": " + records[i].status().message());
      continue;
    }
    const DesiredResource& w = wanted[i];
    state->Upsert(ResourceRecord{w.address, w.type, w.node, *records[i], NowRfc3339()});
    adopted.push_back(w.address);
  }
  // Named addresses: all or nothing. --all: what matches, and the rest said.
  for (const std::string& r : refused)
    std::cerr << "fleet: " << (all ? "not adopted " : "cannot adopt ") << r << "\n";
  if (!all && !refused.empty()) {
    std::cerr << "fleet: the state is unchanged\n";
    return 1;
  }
  if (adopted.empty()) {
    std::cout << "Nothing to adopt: the state is unchanged.\n";
    return 0;
  }
  ++state->serial;
  Status saved = s.store->Save(*state);
  if (!saved.ok()) {
    std::cerr << "fleet: " << saved.message() << "\n";
    return 1;
  }
  for (const std::string& a : adopted)
    std::cout << "Adopted " << a << ": it matches the manifests and is in the state now "
              << "(serial " << state->serial << "); nothing on the node changed.\n";
  return 0;
}

int CmdStateHistory(const GlobalOptions& g) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<std::vector<StateVersion>> h = s.store->History();
  if (!h.ok()) {
    std::cerr << "fleet: " << h.status().message() << "\n";
    return 1;
  }
  std::cout << "State history of " << s.store->Describe() << ":\n";
  std::printf("%-8s %-22s %-7s %-34s %s\n", "SERIAL", "SAVED", "WRITES", "LINEAGE", "BY");
  for (const StateVersion& v : *h)
    std::printf("%-8llu %-22s %-7d %-34s %s\n", static_cast<unsigned long long>(v.serial),
                v.saved_at.c_str(), v.writes, v.lineage.c_str(), v.saved_by.c_str());
  return 0;
}

int CmdStateShowSerial(const GlobalOptions& g, uint64_t serial, const std::string& address) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<State> st = s.store->LoadSerial(serial);
  if (!st.ok()) {
    std::cerr << "fleet: " << st.status().message() << "\n";
    return 1;
  }
  if (address.empty()) {
    std::cout << st->ToJson().dump(2) << "\n";
    return 0;
  }
  const ResourceRecord* r = st->Find(address);
  if (!r) {
    std::cerr << "fleet: no resource " << address << " in the state at serial " << serial << "\n";
    return 1;
  }
  std::cout << nlohmann::json{{"address", r->address},
                              {"type", r->type},
                              {"node", r->node},
                              {"attributes", r->attributes},
                              {"updated_at", r->updated_at}}
                   .dump(2)
            << "\n";
  return 0;
}

int CmdStateMigrate(const GlobalOptions& g, const std::string& to) {
  Session s;
  if (!Open(g, &s)) return 1;
  const std::string from = to == "postgres" ? "local" : "postgres";
  std::unique_ptr<StateStore> src = MakeStore(s.manifest.state, from);
  std::unique_ptr<StateStore> dst = MakeStore(s.manifest.state, to);
  auto fail = [](const Status& st) {
    std::cerr << "fleet: " << st.message() << "\n";
    return 1;
  };
  Result<std::unique_ptr<StateLock>> l1 = src->Lock("state migrate");
  if (!l1.ok()) return fail(l1.status());
  Result<std::unique_ptr<StateLock>> l2 = dst->Lock("state migrate");
  if (!l2.ok()) return fail(l2.status());
  Result<State> state = src->Load();
  if (!state.ok()) return fail(state.status());
  Result<State> there = dst->Load();
  if (!there.ok()) return fail(there.status());
  if (state->serial == 0) return fail(Status::Error("no state in " + src->Describe() + " to move"));
  if (there->serial != 0 && there->lineage != state->lineage) {
    return fail(Status::Error(dst->Describe() + " already holds another state (lineage " +
                              there->lineage + " serial " + std::to_string(there->serial) +
                              ", this one is lineage " + state->lineage +
                              "): refusing to mix them; move it aside first"));
  }
  if (there->serial > state->serial) {
    return fail(Status::Error(dst->Describe() + " is ahead (serial " +
                              std::to_string(there->serial) + " > " +
                              std::to_string(state->serial) + "): nothing moved"));
  }
  if (there->serial < state->serial) {
    Status saved = dst->Save(*state);
    if (!saved.ok()) return fail(saved);
  }
  std::cout << "The state (lineage " << state->lineage << ", serial " << state->serial << ") is in "
            << dst->Describe() << "; " << src->Describe() << " was left as it was.\n";
  if (s.manifest.state.backend != to)
    std::cout << "Now set `state: {backend: " << to
              << (to == "postgres" ? ", conn_env: " + s.manifest.state.conn_env +
                                         ", schema: " + s.manifest.state.schema
                                   : "")
              << "}` in fleet.yaml and commit it.\n";
  return 0;
}

int CmdForceUnlock(const GlobalOptions& g, const std::string& lock_id) {
  Session s;
  if (!Open(g, &s)) return 1;
  Status st = s.store->ForceUnlock(lock_id);
  if (!st.ok()) {
    std::cerr << "fleet: " << st.message() << "\n";
    return 1;
  }
  std::cout << "The state lock " << lock_id << " was broken.\n";
  return 0;
}

int CmdProbe(const GlobalOptions& g, const std::string& node, bool json, bool gpu) {
  Session s;
  if (!Open(g, &s)) return 1;
  if (!s.manifest.nodes.count(node)) {
    std::vector<std::string> names;
    for (const auto& [n, _] : s.manifest.nodes) names.push_back(n);
    std::string near = NearestName(node, names);
    std::cerr << "fleet: no node '" << node << "' in the manifests"
              << (near.empty() ? "" : "; did you mean '" + near + "'?") << "\n";
    return 1;
  }
  Transport* t = ConnectNode(s, node);
  if (t == nullptr) return 1;
  const NodeSpec& spec = s.manifest.nodes.at(node);
  Result<CommandResult> r = t->Run(NodeFactsScript(
      spec.sysfs, spec.container_cli, gpu ? GpuContextMode::kAlways : GpuContextMode::kAuto));
  if (!r.ok()) {
    std::cerr << "fleet: " << r.status().message() << "\n";
    return 1;
  }
  NodeFacts f = ParseNodeFacts(r->out);
  if (json) {
    std::cout << f.ToJson().dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    return 0;
  }
  std::cout << "node:       " << node << "\n"
            << "hostname:   " << f.hostname << "\n"
            << "machine id: " << f.machine_id << "\n"
            << "boot id:    " << f.boot_id << "\n"
            << "arch:       " << f.arch << "\n"
            << "kernel:     " << f.kernel << "\n";
  GpuFacts gf;
  if (GpuFactsFromJson(f.gpu, &gf)) {
    std::cout << "gpu:        " << DescribeGpuMemory(gf) << "\n";
    if (!gf.context_decision.empty()) std::cout << "            " << gf.context_decision << "\n";
  }
  std::cout << DescribeNodeFabric(s.manifest.nodes.at(node), f);
  return 0;
}

int CmdLogs(const GlobalOptions& g, const std::string& address, int tail) {
  Session s;
  if (!Open(g, &s)) return 1;
  const size_t at = address.find('@');
  const std::string prefix = "deployment.";
  const std::string name = address.rfind(prefix, 0) == 0 && at != std::string::npos
                               ? address.substr(prefix.size(), at - prefix.size())
                               : "";
  const std::string node = at == std::string::npos ? "" : address.substr(at + 1);
  auto d = s.manifest.deployments.find(name);
  if (d == s.manifest.deployments.end() ||
      std::find(d->second.nodes.begin(), d->second.nodes.end(), node) == d->second.nodes.end()) {
    std::cerr << "fleet: no deployment " << address
              << " in the manifests (an address such as deployment.NAME@NODE)\n";
    return 1;
  }
  const NodeSpec& spec = s.manifest.nodes.at(node);
  Transport* t = ConnectNode(s, node);
  if (t == nullptr) return 1;
  Result<CommandResult> host = t->Run("uname -n");
  std::string hostname = host.ok() ? host->out : "";
  while (!hostname.empty() && hostname.back() == '\n') hostname.pop_back();
  if (!spec.hostname.empty() && hostname != spec.hostname) {
    std::cerr << "fleet: " << node << " (" << spec.address << ") says it is '" << hostname
              << "', not '" << spec.hostname << "': refusing to show its logs as " << node
              << "'s\n";
    return 1;
  }
  const std::string cmd = ShellCommand(
      {spec.container_cli, "logs", "--tail", std::to_string(tail), ContainerName(name)});
  Result<CommandResult> r = t->Run(cmd + " 2>&1");
  if (!r.ok()) {
    std::cerr << "fleet: " << r.status().message() << "\n";
    return 1;
  }
  // Engines print their arguments: the deployment's secrets are masked.
  Result<ContainerSpec> rendered = RenderContainerSpec(s.manifest, name, node);
  std::cout << (rendered.ok() ? Redact(r->out, SecretValues(*rendered)) : r->out);
  if (r->exit_code != 0) {
    std::cerr << "fleet: on " << node << ": `" << cmd << "` exited " << r->exit_code << "\n";
    return 1;
  }
  return 0;
}

int CmdModelFiles(const GlobalOptions& g, const std::string& model, const std::string& node,
                  const std::string& container_root) {
  Session s;
  if (!Open(g, &s)) return 1;
  Result<HubLocation> loc = ModelLocationOnNode(s.manifest, model, node);
  if (!loc.ok()) {
    std::cerr << "fleet: " << loc.status().message() << "\n";
    return 1;
  }
  Transport* t = ConnectNode(s, node);
  if (t == nullptr) return 1;
  Result<std::vector<BindMount>> binds =
      ModelBindList(t, loc->cache, loc->repo, loc->revision, container_root);
  if (!binds.ok()) {
    std::cerr << "fleet: " << binds.status().message() << "\n";
    return 1;
  }
  std::cout << FormatBindList(*binds);
  return 0;
}

}  // namespace fleet
