#include "providers/model/model_provider.h"

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "providers/model/hub_download.h"
#include "providers/model/model_apply.h"
#include "providers/model/model_attrs.h"
#include "providers/model/model_diff.h"
#include "providers/model/model_scope.h"
#include "providers/model/staged_mark.h"
#include "src/process_identity.h"
#include "state/state.h"

namespace fleet {

using Json = nlohmann::json;

ModelProviderOptions ModelProviderOptions::FromSettings(const Settings& settings) {
  ModelProviderOptions o;
  if (!settings.model_download.empty())
    o.download_command = ParseDownloadTemplate(settings.model_download);
  if (!settings.model_copy_streams.empty())
    o.copy_streams = std::clamp(std::atoi(settings.model_copy_streams.c_str()), 1, 16);
  return o;
}

ModelProvider::ModelProvider(ModelProviderOptions options) : options_(std::move(options)) {
  if (options_.download_command.empty()) options_.download_command = DefaultDownloadCommand();
  if (!options_.transport_factory)
    options_.transport_factory = [](const NodeSpec& spec) {
      return MakeTransport(EndpointFor(spec));
    };
}

Result<std::unique_ptr<Transport>> ModelProvider::Dedicated(const Manifest& m,
                                                            const std::string& node) const {
  auto it = m.nodes.find(node);
  if (it == m.nodes.end()) return Result<std::unique_ptr<Transport>>::Error("no node " + node);
  std::unique_ptr<Transport> t = options_.transport_factory(it->second);
  Status s = t->Connect();
  if (!s.ok()) return s;
  return t;
}

namespace {

// One copy of a model in scope: a node's cache or a store, and why.
struct ModelCopyPlace {
  bool store = false;
  std::string name;
  std::vector<std::string> why;
};

// The source a model's copies are staged from, as Expand resolves it.
struct ModelSource {
  std::string kind = "hub";  // "hub" | "node" | "store"
  std::string name;
  std::string address;  // "" for the hub
  std::string node;     // the node that reads it
  std::string cache;
};

// The copies model `name` has: the nodes of the deployments that use it and
// its own `nodes:` (store: local), or its store; and its source's copy.
std::vector<ModelCopyPlace> CopyPlaces(const Manifest& m, const std::string& name,
                                       const ModelSpec& spec, const ModelSource& src) {
  std::vector<ModelCopyPlace> places;
  auto add = [&](bool store, const std::string& n, const std::string& why) {
    if (n.empty() || (store ? !m.stores.count(n) : !m.nodes.count(n))) return;
    for (ModelCopyPlace& p : places)
      if (p.store == store && p.name == n) {
        p.why.push_back(why);
        return;
      }
    places.push_back({store, n, {why}});
  };
  if (spec.store == "local" || spec.store.empty()) {
    for (const auto& [dname, d] : m.deployments)
      if (d.model == name)
        for (const std::string& n : d.nodes) add(false, n, "deployment " + dname);
    for (const std::string& n : spec.nodes) add(false, n, "model " + name + " nodes");
  } else {
    add(true, spec.store, "model " + name + " store");
  }
  if (src.kind != "hub") add(src.kind == "store", src.name, "the source of model " + name);
  return places;
}

ModelSource SourceOf(const Manifest& m, const std::string& name, const ModelSpec& spec) {
  ModelSource src;
  if (spec.source.rfind("node:", 0) == 0) {
    src.kind = "node";
    src.name = spec.source.substr(5);
  } else if (spec.source.rfind("store:", 0) == 0) {
    src.kind = "store";
    src.name = spec.source.substr(6);
  }
  if (src.kind != "hub") src.address = ResourceAddress("model", name, src.name);
  if (src.kind == "node" && m.nodes.count(src.name)) {
    src.node = src.name;
    src.cache = m.nodes.at(src.name).hf_cache;
  } else if (src.kind == "store" && m.stores.count(src.name) &&
             !StoreNode(m, m.stores.at(src.name)).empty()) {
    src.node = StoreNode(m, m.stores.at(src.name));
    src.cache = m.stores.at(src.name).path;
  }
  return src;
}

// The declaration of one copy, read through `node`.
ModelWant WantAt(const Manifest& m, const ModelSpec& spec, const ModelCopyPlace& place,
                 const std::string& node, const std::string& address, const ModelSource& src) {
  ModelWant w;
  w.repo = spec.repo;
  w.revision = spec.revision;
  w.store = spec.store.empty() ? "local" : spec.store;
  w.source = spec.source;
  w.location = place.name;
  w.location_kind = place.store ? "store" : "node";
  w.source_kind = src.kind;
  w.source_name = src.name;
  w.source_address = src.address;
  w.source_node = src.node;
  w.source_cache = src.cache;
  w.self_source = address == src.address;
  w.verify = spec.verify_now ? "deep" : spec.verify;
  w.verify_forced = spec.verify_now;
  w.wanted_by = place.why;
  for (const auto& [sname, s] : m.stores)
    if (!(place.store && sname == place.name) &&
        std::find(s.nodes.begin(), s.nodes.end(), node) != s.nodes.end())
      w.mounted_stores.emplace_back(sname, s.path);
  // allow_floating with a branch name: resolved through refs/<branch> on
  // each node at plan time.
  if (spec.allow_floating && !IsCommitId(spec.revision)) w.branch = spec.revision;
  if (place.store) {
    const StoreSpec& s = m.stores.at(place.name);
    w.cache = s.path;
    for (const std::string& n : s.nodes) {
      if (!m.nodes.count(n)) continue;
      w.store_nodes.push_back(n);
      if (DeclaredOff(m, n)) w.store_nodes_off.push_back(n);
    }
  } else {
    w.cache = m.nodes.at(node).hf_cache;
  }
  return w;
}

}  // namespace

std::vector<DesiredResource> ModelProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.models) {
    const ModelSource src = SourceOf(m, name, spec);
    for (const ModelCopyPlace& place : CopyPlaces(m, name, spec, src)) {
      const std::string node = place.store ? StoreNode(m, m.stores.at(place.name)) : place.name;
      if (node.empty()) continue;
      DesiredResource r;
      r.type = "model";
      r.name = name;
      r.node = node;
      r.address = ResourceAddress("model", name, place.name);
      const ModelWant want = WantAt(m, spec, place, node, r.address, src);
      r.attributes = want;
      r.depends_on = {NodeAddress(node)};
      if (!src.address.empty() && !want.self_source) r.depends_on.push_back(src.address);
      r.loc = spec.loc;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string ModelProvider::ProbeScript(const DesiredResource& r, const NodeSpec&) const {
  const ModelWant w = r.attributes.get<ModelWant>();
  HubProbeTarget t{w.cache, w.repo, w.revision, {}, {}};
  t.branch = w.branch;
  for (const auto& [store, path] : w.mounted_stores) t.stores.push_back({store, path});
  // In a subshell: hub_probe.sh ends with `exit` (Provider::ProbeScript).
  return ProbeInSubshell(HubProbeScript(t));
}

ActualResource ModelProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                         const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  HubProbe p = ParseHubProbe(output);
  if (p.lock) p.lock->controller_gone = ControllerIsGone(p.lock->controller);
  a.exists = p.snapshot;
  a.attributes = p.ToJson();
  if (!p.errors.empty()) a.error = p.errors.front();
  return a;
}

PlanChange ModelProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                               const ResourceRecord* record, const DiffContext& ctx) const {
  ModelDiffInput in = ModelDiffInputFor(desired, record, ctx);
  if (auto c = UnsafeBranchName(in)) return *c;
  if (auto c = NodeIsOff(in, actual)) return *c;
  if (auto c = ProbeFailed(in, actual)) return *c;
  HubProbe p = HubProbe::FromJson(actual.attributes);
  std::vector<std::string> floating_said;
  if (!in.want.branch.empty()) {
    // A floating revision: the commit refs/<branch> names here, said loudly
    // with what it is on every other copy.
    FloatingRevision f = ResolveFloating(in, p);
    TakeFloating(f, &in, &p);
    floating_said = std::move(f.said);
  }
  const ModelAssessment as = Assess(in, std::move(p), std::move(floating_said));
  const PlanChange c = AssessedChange(in, as);
  if (auto done = CompleteAndRecorded(as, c)) return *done;
  if (auto verify = CompleteNotRecorded(as, c)) return NoteUnrecorded(in, *verify);
  if (auto verify = FoundUnverified(in, as, c)) return NoteUnrecorded(in, *verify);
  if (auto refused = SourceOfItselfIncomplete(in, as, c)) return *refused;
  if (auto refused = NothingToStageFrom(in, as, c)) return *refused;
  return Stage(in, as, c);
}

namespace {

// The --purge change for a recorded model: remove what fleet staged.
PlanChange PurgeChange(PlanChange c, const std::optional<ModelRecord>& record, bool present) {
  const ModelRecord rec = record.value_or(ModelRecord());
  c.before = {{"revision", rec.revision}, {"bytes", rec.bytes}};
  if (!record) {
    c.summary = "kept (not staged by fleet: nothing recorded)";
    return c;
  }
  if (rec.origin != "staged") {
    c.summary = "kept (fleet found and verified it, it did not stage it: --purge leaves it)";
    return c;
  }
  c.action = Action::kDelete;
  c.after = nullptr;
  if (!present) {
    c.summary = "forget (already gone from " + rec.cache + ")";
    c.detail = {{"forget", true}};
    return c;
  }
  c.summary = "remove " + rec.repo + "@" + ShortRevision(rec.revision) + " (" +
              HumanBytes(rec.bytes) + ") from " + rec.cache + " (--purge)";
  c.reasons.push_back("staged by fleet; blobs another revision still links to stay");
  c.detail = ModelRemoval{rec.repo, rec.revision, rec.cache, rec.location};
  return c;
}

}  // namespace

PlanChange ModelProvider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                      const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = ChangeFor(desired);
  if (ctx.purge)
    return PurgeChange(c, ModelRecordOf(record ? &record->attributes : nullptr),
                       !actual.probed || actual.exists);
  c.summary = "kept (destroy never removes a model: staging one takes hours; --purge does)";
  c.before = actual.probed ? Json{{"present", actual.exists}} : Json();
  c.after = c.before;
  return c;
}

PlanChange ModelProvider::DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const {
  PlanChange c;
  c.address = record.address;
  c.type = record.type;
  c.node = record.node;
  const std::optional<ModelRecord> rec = ModelRecordOf(&record.attributes);
  if (ctx.purge) {
    c = PurgeChange(c, rec, true);
    if (c.action == Action::kDelete) return c;
  }
  // Not declared any more: the record goes, the files stay (a model that
  // took hours is never deleted by omission).
  const ModelRecord r = rec.value_or(ModelRecord());
  c.action = Action::kDelete;
  c.summary = "forget (no longer declared; the files stay in " +
              (r.cache.empty() ? std::string("the cache") : r.cache) +
              (ctx.purge ? ")" : "; --purge removes what fleet staged)");
  c.reasons = {"in state, not in the manifests"};
  c.before = {{"revision", r.revision}, {"bytes", r.bytes}};
  c.after = nullptr;
  c.detail = {{"forget", true}};
  return c;
}

namespace {

// The caches whose marks a node's inventory lists: its own, and those of
// the stores probed through it.
std::vector<std::pair<std::string, std::string>> CachesSeenFrom(const Manifest& m,
                                                                const std::string& node) {
  std::vector<std::pair<std::string, std::string>> caches;
  if (auto n = m.nodes.find(node); n != m.nodes.end() && !n->second.hf_cache.empty())
    caches.emplace_back(node, n->second.hf_cache);
  for (const auto& [name, store] : m.stores)
    if (StoreNode(m, store) == node) caches.emplace_back(name, store.path);
  return caches;
}

// The name an undeclared copy is shown under: the manifests' name for that
// repo and revision when they have one, else the repo's last part and the
// revision's first 12 digits.
std::string NameForUnknown(const Manifest& m, const StagedCopy& copy) {
  for (const auto& [name, spec] : m.models)
    if (spec.repo == copy.repo && spec.revision == copy.revision) return name;
  return copy.repo.substr(copy.repo.rfind('/') + 1) + "-" + ShortRevision(copy.revision);
}

// A declared copy at the same place holds it: the same repo at that
// revision, or at a branch (which may name it: its diff decides).
bool DeclaredThere(const Manifest& m, const StagedCopy& copy, const DiffContext& ctx) {
  for (const auto& [name, spec] : m.models) {
    if (spec.repo != copy.repo || (spec.revision != copy.revision && IsCommitId(spec.revision)))
      continue;
    if (ctx.all_actual->count(ResourceAddress("model", name, copy.location))) return true;
  }
  return false;
}

// The state knows that copy, under whatever name.
bool KnownByContent(const StagedCopy& copy, const std::string& cache, const DiffContext& ctx) {
  if (ctx.records == nullptr) return false;
  for (const ResourceRecord& r : *ctx.records) {
    if (r.type != "model") continue;
    const std::optional<ModelRecord> rec = ModelRecordOf(&r.attributes);
    if (rec && rec->repo == copy.repo && rec->revision == copy.revision &&
        (rec->location == copy.location || rec->cache == cache))
      return true;
  }
  return false;
}

PlanChange UnrecordedCopy(const std::string& node, const StagedCopy& copy, const std::string& cache,
                          const std::string& address, bool purge) {
  PlanChange c;
  c.address = address;
  c.type = "model";
  c.node = node;
  c.before = {{"revision", copy.revision}, {"bytes", copy.bytes}};
  const std::string what = copy.repo + "@" + ShortRevision(copy.revision) + " (" +
                           HumanBytes(copy.bytes) + ") in " + cache;
  const std::string head = "model " + what + " on " + copy.location +
                           " carries fleet's staged mark but is not in this state, and the " +
                           "manifests do not declare it there: ";
  if (!purge) {
    c.after = c.before;
    c.reasons.push_back(head + "fleet staged it, and `fleet apply --purge` removes it (or " +
                        "declare it there, and `fleet state adopt " + address + "` records it)");
    return c;
  }
  c.action = Action::kDelete;
  c.after = nullptr;
  c.summary = "remove " + copy.repo + "@" + ShortRevision(copy.revision) + " (" +
              HumanBytes(copy.bytes) + ") from " + cache + " (--purge)";
  c.reasons.push_back(head + "--purge removes it; blobs another revision still links to stay");
  c.detail = ModelRemoval{copy.repo, copy.revision, cache, copy.location};
  return c;
}

}  // namespace

std::string ModelProvider::InventoryScript(const std::string& node, const Manifest& m) const {
  const auto caches = CachesSeenFrom(m, node);
  return caches.empty() ? "" : StagedMarkInventoryScript(caches);
}

std::vector<PlanChange> ModelProvider::DiffUnrecorded(const std::string& node,
                                                      const DiffContext& ctx) const {
  std::vector<PlanChange> out;
  if (ctx.inventory == nullptr || ctx.all_actual == nullptr || ctx.recorded == nullptr ||
      ctx.manifest == nullptr)
    return out;
  std::map<std::string, std::string> cache_of;
  for (const auto& [location, cache] : CachesSeenFrom(*ctx.manifest, node))
    cache_of[location] = cache;
  for (const StagedCopy& copy : ParseStagedMarks(*ctx.inventory)) {
    auto cache = cache_of.find(copy.location);
    if (cache == cache_of.end() || DeclaredThere(*ctx.manifest, copy, ctx) ||
        KnownByContent(copy, cache->second, ctx))
      continue;
    const std::string address =
        ResourceAddress("model", NameForUnknown(*ctx.manifest, copy), copy.location);
    if (ctx.recorded->count(address)) continue;  // a record: DiffOrphan decides
    out.push_back(UnrecordedCopy(node, copy, cache->second, address, ctx.purge));
  }
  return out;
}

Result<Json> ModelProvider::Adopt(const DesiredResource& desired, const ActualResource& actual,
                                  const DiffContext& ctx, const StepContext* node) const {
  using R = Result<Json>;
  DiffContext alone = ctx;
  alone.recorded = nullptr;  // the diff of a record that would exist
  const PlanChange c = Diff(desired, actual, nullptr, alone);
  if (!c.error.empty()) return R::Error(c.error);
  if (c.action == Action::kCreate || !c.detail.is_object() || ModelRemovalOf(c.detail))
    return R::Error("the plan would " + c.summary);
  const ModelStep step = c.detail.get<ModelStep>();
  if (step.op != "ensure") return R::Error("the plan would " + c.summary);
  if (node == nullptr || node->transport == nullptr)
    return R::Error("the node is needed to verify it");
  const ModelNodeConnector connect = [this, node](const std::string& n) {
    return Dedicated(*node->manifest, n);
  };
  ModelStaging staging(step, c, *node, options_, connect);
  return staging.VerifyInPlace();
}

Result<Json> ModelProvider::Apply(const PlanChange& change, const StepContext& ctx) const {
  const ModelNodeConnector connect = [this, &ctx](const std::string& node) {
    return Dedicated(*ctx.manifest, node);
  };
  if (std::optional<ModelRemoval> removal = ModelRemovalOf(change.detail))
    return RemoveModelRevisionStep(*removal, change.node, ctx, connect);
  ModelStaging staging(change.detail.get<ModelStep>(), change, ctx, options_, connect);
  return staging.Run();
}

}  // namespace fleet
