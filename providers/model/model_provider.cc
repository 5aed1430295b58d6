#include "providers/model/model_provider.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "providers/model/blob_hash.h"
#include "providers/model/completeness.h"
#include "providers/model/fabric_copy.h"
#include "providers/model/hub_download.h"
#include "providers/model/model_copy.h"
#include "providers/model/progress_meter.h"
#include "providers/model/staging_lock.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

std::string Short(const std::string& rev) { return rev.substr(0, 12); }

// "dgx5" for a node's cache, "store nas (through dgx1)" for a store, "store
// nas (through dgx2; dgx1 is declared off)" when the first is declared off.
std::string WhereOf(const Json& a, const std::string& node) {
  if (a.value("location_kind", "node") != "store") return node;
  std::string off;
  if (a.contains("store_nodes_off") && a["store_nodes_off"].is_array())
    for (const Json& n : a["store_nodes_off"])
      if (n.is_string() && n.get<std::string>() != node)
        off += (off.empty() ? "" : ", ") + n.get<std::string>();
  return "store " + a.value("location", "") + " (through " + node +
         (off.empty() ? ""
                      : "; " + off + (off.find(',') == std::string::npos ? " is" : " are") +
                            " declared off") +
         ")";
}

Json Summary(const Completeness& comp, const std::string& revision, const std::string& layout,
             bool have_ref) {
  Json j = {{"revision", revision},
            {"files", comp.files_ok},
            {"bytes", comp.present_bytes},
            {"complete", comp.complete && have_ref}};
  if (layout != "hub") j["layout"] = layout;
  return j;
}

void AddProblems(const std::vector<std::string>& in, std::vector<std::string>* out,
                 size_t max = 10) {
  for (size_t i = 0; i < in.size() && i < max; ++i) out->push_back(in[i]);
  if (in.size() > max) out->push_back("... and " + std::to_string(in.size() - max) + " more");
}

bool SameRecord(const Json& rec, const Json& a) {
  return rec.is_object() && rec.value("revision", "") == a.value("revision", "") &&
         rec.value("cache", "") == a.value("cache", "") &&
         rec.value("repo", "") == a.value("repo", "") && rec.contains("files");
}

// Polls the bytes under the repo's blobs/ on a node while a download runs
// (the download tool's own progress goes to its log), for ProgressMeter.
class BlobBytesWatcher {
 public:
  BlobBytesWatcher(std::unique_ptr<Transport> t, const HubLocation& loc, ProgressMeter* meter)
      : t_(std::move(t)), meter_(meter) {
    const std::string cmd = RepoPrelude(loc) +
                            "find \"$c/$d/blobs\" \"$c/../$d/blobs\" -maxdepth 1 -type f -printf "
                            "'%s\\n' 2>/dev/null | awk '{s+=$1} END {print s+0}'\n";
    uint64_t start = Read(cmd);
    thread_ = std::thread([this, cmd, start] {
      std::unique_lock<std::mutex> l(mu_);
      while (!stop_) {
        cv_.wait_for(l, std::chrono::seconds(3), [&] { return stop_; });
        if (stop_) break;
        l.unlock();
        uint64_t now = Read(cmd);
        if (now >= start) meter_->Set(now - start);
        l.lock();
      }
    });
  }
  ~BlobBytesWatcher() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  uint64_t Read(const std::string& cmd) {
    Result<CommandResult> r = t_->Run(cmd);
    if (!r.ok() || r->exit_code != 0) return 0;
    return std::strtoull(r->out.c_str(), nullptr, 10);
  }
  std::unique_ptr<Transport> t_;
  ProgressMeter* meter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

// A node the manifests declare `power: {state: off}`: nothing on it is
// probed or changed.
bool DeclaredOff(const Manifest& m, const std::string& node) {
  auto it = m.nodes.find(node);
  return it != m.nodes.end() && it->second.power.present && it->second.power.state == "off";
}

// The node a store's model goes through (probe and staging): the first
// node of the store's list that the manifests declare on. A node declared
// off cannot read the store, and the store does not depend on which node
// reads it. All declared off: the first (the plan then says it is off).
std::string StoreNode(const Manifest& m, const StoreSpec& s) {
  std::string first;
  for (const std::string& n : s.nodes) {
    if (!m.nodes.count(n)) continue;
    if (first.empty()) first = n;
    if (!DeclaredOff(m, n)) return n;
  }
  return first;
}

std::string CommaList(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

std::string ExpandHome(const std::string& path) {
  if (path.rfind("~/", 0) != 0) return path;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "") + path.substr(1);
}

}  // namespace

ModelProviderOptions ModelProviderOptions::FromEnvironment() {
  ModelProviderOptions o;
  if (const char* d = std::getenv("FLEET_MODEL_DOWNLOAD"); d && *d)
    o.download_command = ParseDownloadTemplate(d);
  if (const char* s = std::getenv("FLEET_MODEL_COPY_STREAMS"); s && *s)
    o.copy_streams = std::clamp(std::atoi(s), 1, 16);
  return o;
}

Result<HubLocation> ModelLocationOnNode(const Manifest& m, const std::string& model,
                                        const std::string& node) {
  using R = Result<HubLocation>;
  auto it = m.models.find(model);
  if (it == m.models.end()) return R::Error("no model '" + model + "' in the manifests");
  auto n = m.nodes.find(node);
  if (n == m.nodes.end()) return R::Error("no node '" + node + "' in the manifests");
  const ModelSpec& spec = it->second;
  if (spec.store == "local" || spec.store.empty())
    return HubLocation{n->second.hf_cache, spec.repo, spec.revision};
  auto s = m.stores.find(spec.store);
  if (s == m.stores.end()) return R::Error("model '" + model + "': no store '" + spec.store + "'");
  if (std::find(s->second.nodes.begin(), s->second.nodes.end(), node) == s->second.nodes.end())
    return R::Error("model '" + model + "' lives in store " + spec.store + ", which node " + node +
                    " does not mount (its nodes: " +
                    [&] {
                      std::string l;
                      for (const std::string& x : s->second.nodes) l += (l.empty() ? "" : ", ") + x;
                      return l;
                    }() +
                    ")");
  return HubLocation{s->second.path, spec.repo, spec.revision};
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

std::vector<DesiredResource> ModelProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.models) {
    struct Loc {
      bool store;
      std::string name;
      std::vector<std::string> why;
    };
    std::vector<Loc> locs;
    auto add = [&](bool store, const std::string& n, const std::string& why) {
      if (n.empty() || (store ? !m.stores.count(n) : !m.nodes.count(n))) return;
      for (Loc& l : locs)
        if (l.store == store && l.name == n) {
          l.why.push_back(why);
          return;
        }
      locs.push_back({store, n, {why}});
    };
    if (spec.store == "local" || spec.store.empty()) {
      for (const auto& [dname, d] : m.deployments)
        if (d.model == name)
          for (const std::string& n : d.nodes) add(false, n, "deployment " + dname);
      for (const std::string& n : spec.nodes) add(false, n, "model " + name + " nodes");
    } else {
      add(true, spec.store, "model " + name + " store");
    }
    std::string src_kind = "hub", src_name;
    if (spec.source.rfind("node:", 0) == 0) {
      src_kind = "node";
      src_name = spec.source.substr(5);
      add(false, src_name, "the source of model " + name);
    } else if (spec.source.rfind("store:", 0) == 0) {
      src_kind = "store";
      src_name = spec.source.substr(6);
      add(true, src_name, "the source of model " + name);
    }
    const std::string src_address =
        src_kind == "hub" ? "" : ResourceAddress("model", name, src_name);
    std::string src_node, src_cache;
    if (src_kind == "node" && m.nodes.count(src_name)) {
      src_node = src_name;
      src_cache = m.nodes.at(src_name).hf_cache;
    } else if (src_kind == "store" && m.stores.count(src_name) &&
               !StoreNode(m, m.stores.at(src_name)).empty()) {
      src_node = StoreNode(m, m.stores.at(src_name));
      src_cache = m.stores.at(src_name).path;
    }

    for (const Loc& l : locs) {
      std::string node, cache;
      Json store_nodes = Json::array(), declared_off = Json::array();
      if (l.store) {
        const StoreSpec& s = m.stores.at(l.name);
        node = StoreNode(m, s);
        if (node.empty()) continue;
        cache = s.path;
        for (const std::string& n : s.nodes) {
          if (!m.nodes.count(n)) continue;
          store_nodes.push_back(n);
          if (DeclaredOff(m, n)) declared_off.push_back(n);
        }
      } else {
        node = l.name;
        cache = m.nodes.at(node).hf_cache;
      }
      DesiredResource r;
      r.type = "model";
      r.name = name;
      r.node = node;
      r.address = ResourceAddress("model", name, l.name);
      const bool self_source = r.address == src_address;
      Json mounted = Json::array();
      for (const auto& [sname, s] : m.stores)
        if (!(l.store && sname == l.name) &&
            std::find(s.nodes.begin(), s.nodes.end(), node) != s.nodes.end())
          mounted.push_back({sname, s.path});
      const std::string verify = spec.verify_now ? "deep" : spec.verify;
      // allow_floating with a branch name: resolved through refs/<branch>
      // on each node at plan time.
      const bool floating = spec.allow_floating && !IsCommitId(spec.revision);
      r.attributes = {{"repo", spec.repo},
                      {"revision", spec.revision},
                      {"store", spec.store.empty() ? "local" : spec.store},
                      {"source", spec.source},
                      {"location", l.name},
                      {"location_kind", l.store ? "store" : "node"},
                      {"cache", cache},
                      {"source_kind", src_kind},
                      {"source_name", src_name},
                      {"source_address", src_address},
                      {"source_node", src_node},
                      {"source_cache", src_cache},
                      {"self_source", self_source},
                      {"verify", verify},
                      {"verify_forced", spec.verify_now},
                      {"wanted_by", l.why},
                      {"mounted_stores", mounted}};
      if (floating) r.attributes["branch"] = spec.revision;
      if (l.store) {
        r.attributes["store_nodes"] = store_nodes;
        r.attributes["store_nodes_off"] = declared_off;
      }
      r.depends_on = {NodeAddress(node)};
      if (!src_address.empty() && !self_source) r.depends_on.push_back(src_address);
      r.loc = spec.loc;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string ModelProvider::ProbeScript(const DesiredResource& r, const NodeSpec&) const {
  const Json& a = r.attributes;
  HubProbeTarget t{a.value("cache", ""), a.value("repo", ""), a.value("revision", ""), {}, {}};
  t.branch = a.value("branch", "");
  if (a.contains("mounted_stores"))
    for (const Json& s : a["mounted_stores"])
      if (s.is_array() && s.size() == 2) t.stores.push_back({s[0], s[1]});
  return HubProbeScript(t);
}

ActualResource ModelProvider::ParseProbe(const DesiredResource&, const std::string& output,
                                         const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  HubProbe p = ParseHubProbe(output);
  a.exists = p.snapshot;
  a.attributes = p.ToJson();
  if (!p.errors.empty()) a.error = p.errors.front();
  return a;
}

PlanChange ModelProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                               const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = ChangeFor(desired);
  Json a = desired.attributes;  // a floating revision: "revision" becomes the commit
  std::string rev = a.value("revision", "");
  const std::string branch = a.value("branch", "");
  const std::string where = WhereOf(a, desired.node);
  const bool self_source = a.value("self_source", false);
  const std::string src_kind = a.value("source_kind", "hub");
  const std::string src_name = a.value("source_name", "");
  const Json rec = record ? record->attributes : Json();
  c.detail = a;
  c.detail.erase("wanted_by");
  c.detail.erase("mounted_stores");
  c.detail.erase("store_nodes");
  c.detail.erase("store_nodes_off");
  if (!branch.empty() && !IsSafeBranchName(branch)) {
    c.error = desired.address + ": revision '" + branch +
              "' is not a branch name fleet reads as refs/<branch>";
    return c;
  }

  if (!actual.probed) {
    if (!ctx.facts.reachable) {
      c.before = nullptr;
      if (branch.empty()
              ? SameRecord(rec, a)
              : rec.is_object() && rec.value("branch", "") == branch &&
                    rec.value("cache", "") == a.value("cache", "") &&
                    rec.value("repo", "") == a.value("repo", "") && rec.contains("files")) {
        c.summary = "node is off: not checked";
        c.reasons.push_back("recorded complete; checked again when the node is up");
        return c;
      }
      c.action = Action::kCreate;
      c.summary = "check and stage after power on";
      c.reasons.push_back("the node is off: what it holds is checked when it is up");
      if (a.value("location_kind", "node") == "store") {
        // The store goes through the first node declared on; say which
        // others could read it, and how to go through one of them.
        std::vector<std::string> up, down;
        if (a.contains("store_nodes"))
          for (const Json& n : a["store_nodes"]) {
            const std::string name = n.get<std::string>();
            if (name == desired.node) continue;
            bool off = false;
            if (a.contains("store_nodes_off"))
              for (const Json& o : a["store_nodes_off"]) off |= o == name;
            if (off) continue;
            bool answers = false;
            if (ctx.all_facts)
              if (auto f = ctx.all_facts->find(name); f != ctx.all_facts->end())
                answers = f->second.reachable;
            (answers ? up : down).push_back(name);
          }
        std::string said =
            "store " + a.value("location", "") + " is read through " + desired.node +
            ", the first of its nodes declared on, which does not " + "answer now" +
            (ctx.facts.unreachable_reason.empty() ? "" : " (" + ctx.facts.unreachable_reason + ")");
        if (!up.empty())
          said += "; " + CommaList(up) + " also mount" + (up.size() == 1 ? "s" : "") +
                  " it and answer" + (up.size() == 1 ? "s" : "") + ": declare " + desired.node +
                  " `power: {state: off}` to go through " + up.front();
        else if (!down.empty())
          said += "; " + CommaList(down) + " also mount" + (down.size() == 1 ? "s" : "") +
                  " it but do" + (down.size() == 1 ? "es" : "") + " not answer either";
        c.reasons.push_back(said);
      }
      c.detail["op"] = "ensure";
      return c;
    }
    c.error = desired.address + ": the probe printed nothing for it on " + desired.node;
    return c;
  }
  if (!actual.error.empty()) {
    c.error = desired.address + " on " + desired.node + ": " + actual.error;
    return c;
  }
  HubProbe p = HubProbe::FromJson(actual.attributes);

  // A floating revision: the commit refs/<branch> names here, said loudly
  // with what it is on every other copy. A node keeps its own commit when
  // it holds it complete (a floating revision is not pinned: disagreement
  // is flagged, not corrected); one without the branch, or with a commit it
  // does not hold and the source does not have, gets the source's commit
  // and refs/<branch> pointed at it.
  std::vector<std::string> floating_said;
  bool write_ref = false;
  if (!branch.empty()) {
    const std::string here = p.IsCommit() ? p.resolved : "";
    std::string src_commit;
    if (!self_source && src_kind != "hub" && ctx.all_actual) {
      auto it = ctx.all_actual->find(a.value("source_address", ""));
      if (it != ctx.all_actual->end() && it->second.probed && it->second.error.empty()) {
        HubProbe sp = HubProbe::FromJson(it->second.attributes);
        if (sp.IsCommit()) src_commit = sp.resolved;
      }
    }
    const bool here_complete =
        !here.empty() && p.snapshot && CheckCompleteness(p, nullptr, here).complete;
    std::string commit;
    if (!here.empty() && (here_complete || src_commit.empty() || src_commit == here)) {
      commit = here;
    } else if (!src_commit.empty()) {
      commit = src_commit;
      write_ref = true;
    }
    std::string said = "FLOATING REVISION " + branch + " (allow_floating): ";
    if (!here.empty())
      said += "refs/" + branch + " on " + where + " is " + here;
    else if (p.resolved.empty())
      said += where + " has no refs/" + branch;
    else
      said += "refs/" + branch + " on " + where + " holds '" + p.resolved.substr(0, 64) +
              "', not a commit id";
    if (!commit.empty() && commit != here)
      said += "; staging " + commit + ", what " + branch + " is on " + src_name +
              (here.empty() ? ""
                            : " (" + Short(here) + " is not complete here, and " + src_name +
                                  " has another commit)") +
              ", and pointing refs/" + branch + " at it";
    else if (commit.empty() && src_kind == "hub" && !self_source)
      said += "; the download resolves " + branch + " on the hub";
    said += "; every download may bring another commit";
    floating_said.push_back(said);
    std::map<std::string, std::vector<std::string>> by_commit;
    const std::string prefix = "model." + desired.name + "@";
    if (ctx.all_actual)
      for (const auto& [address, other] : *ctx.all_actual) {
        if (address.rfind(prefix, 0) != 0 || !other.probed || !other.error.empty()) continue;
        HubProbe op = HubProbe::FromJson(other.attributes);
        if (op.IsCommit()) by_commit[op.resolved].push_back(address.substr(prefix.size()));
      }
    if (by_commit.size() > 1) {
      std::string split;
      for (const auto& [commit_id, where_list] : by_commit)
        split += (split.empty() ? "" : "; ") + Short(commit_id) + " on " + CommaList(where_list);
      floating_said.push_back("nodes disagree on what " + branch + " is: " + split);
    }
    if (commit != here) {  // the probe listed another commit's snapshot, or none
      p.snapshot = false;
      p.entries.clear();
    }
    rev = commit.empty() ? branch : commit;
    a["revision"] = commit;
    c.detail["revision"] = commit;  // "": resolved by the download
    c.detail["write_ref"] = write_ref;
  }

  // The file list to hold: the verified record, else the source as probed now.
  Listing ref;
  bool have_ref = false, ref_from_record = false;
  std::string ref_from;
  if (SameRecord(rec, a)) {
    ref = ListingFromJson(rec["files"]);
    have_ref = ref_from_record = !ref.empty();
    ref_from = "the state";
  }
  bool source_ok = false;
  if (!self_source && src_kind != "hub" && ctx.all_actual) {
    auto it = ctx.all_actual->find(a.value("source_address", ""));
    if (it != ctx.all_actual->end() && it->second.probed && it->second.error.empty()) {
      HubProbe sp = HubProbe::FromJson(it->second.attributes);
      Listing sl = ListingFromProbe(sp);
      // A floating revision: only the source's listing of the same commit.
      source_ok = sp.snapshot && !sl.empty() && (branch.empty() || sp.resolved == rev);
      if (!have_ref && source_ok) {
        ref = std::move(sl);
        have_ref = true;
        ref_from = src_name + "'s snapshot";
      }
    }
  }
  const Completeness comp = CheckCompleteness(p, have_ref ? &ref : nullptr, rev);
  const bool legacy = p.layout == "legacy";
  const bool fix_links = !comp.absolute_links.empty();
  const bool forced = a.value("verify_forced", false);
  const bool deep = a.value("verify", "sizes") == "deep" &&
                    (forced || !ref_from_record || rec.value("verified", "") != "deep");
  const uint64_t total = have_ref ? ListingBytes(ref) : comp.present_bytes;

  c.before = Summary(comp, rev, p.layout, have_ref);
  if (ref_from_record && rec.contains("verified")) c.before["verified"] = rec["verified"];
  c.after = {{"revision", rev},
             {"files", have_ref ? ref.size() : comp.files_total},
             {"bytes", total},
             {"complete", true},
             {"verified", deep ? "deep" : "headers"}};
  if (!branch.empty()) c.after["branch"] = branch;
  c.detail["legacy"] = legacy;
  c.detail["fix_links"] = comp.absolute_links;
  c.detail["verify"] = deep ? "deep" : "sizes";
  c.detail["expected_bytes"] = have_ref ? total : 0;

  std::vector<std::string> fixes;
  if (legacy)
    fixes.push_back("link the legacy layout (" + HubRepoDirName(a.value("repo", "")) + " -> ../" +
                    HubRepoDirName(a.value("repo", "")) + ", relative)");
  if (fix_links)
    fixes.push_back("make " + std::to_string(comp.absolute_links.size()) +
                    " absolute symlink(s) relative");
  if (deep)
    fixes.push_back("deep verify: hash " + std::to_string(c.after["files"].get<size_t>()) +
                    " file(s), " + HumanBytes(total));
  auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
    return s;
  };
  c.reasons = floating_said;
  for (const std::string& n : comp.notes) c.reasons.push_back(n);
  if (const size_t off = where.find("; "); off != std::string::npos)
    c.reasons.push_back("store " + a.value("location", "") + " is read through " + desired.node +
                        ": " + where.substr(off + 2, where.size() - off - 3));
  if (p.lock) {
    const bool same_host = !ctx.facts.hostname.empty() && p.lock->host == ctx.facts.hostname;
    if (same_host && (!p.lock->pid_alive || p.lock->boot_id != ctx.facts.boot_id))
      c.reasons.push_back("a stale staging lock (pid " + std::to_string(p.lock->pid) +
                          " is gone): apply takes it over");
    else
      c.reasons.push_back(DescribeLockOwner(*p.lock) +
                          ": apply will not start a duplicate while it runs");
  }
  for (const IncompleteBlob& b : p.incomplete)
    if (p.now > 0 && p.now - b.mtime < 120)
      c.reasons.push_back("blobs/" + b.name + " was written " + std::to_string(p.now - b.mtime) +
                          " s ago: a download may be running");

  if (comp.complete && have_ref) {
    if (ref_from_record) {
      if (fixes.empty()) {
        c.summary = "complete: " + std::to_string(ref.size()) + " files, " + HumanBytes(total);
        c.reasons = floating_said;  // a floating revision is said even when converged
        return c;
      }
      c.action = Action::kUpdate;
      c.summary = join(fixes);
      c.detail["op"] = "fix";
      return c;
    }
    c.action = Action::kUpdate;
    c.summary = "verify and record " + std::to_string(ref.size()) + " files (" + HumanBytes(total) +
                ") already on " + where + (fixes.empty() ? "" : "; " + join(fixes));
    c.reasons.insert(c.reasons.begin(), "sizes match " + ref_from + "; not recorded yet");
    c.detail["op"] = "ensure";
    return c;
  }
  if (comp.complete && !have_ref) {
    // Something is there and nothing visibly wrong, but a non-empty folder
    // is not proof: apply reads every header and the index first.
    c.action = Action::kUpdate;
    c.summary = "verify " + std::to_string(comp.files_ok) + " files (" +
                HumanBytes(comp.present_bytes) + ") found on " + where +
                (src_kind == "hub" && !self_source ? ", download what is missing" : "") +
                (fixes.empty() ? "" : "; " + join(fixes));
    c.reasons.insert(c.reasons.begin(),
                     "not verified by fleet yet: apply checks every safetensors header and the "
                     "index before recording it");
    if (!self_source && src_kind != "hub" && !source_ok)
      c.reasons.push_back("source " + src_name + " has no snapshot of " + Short(rev) +
                          " to compare with");
    c.detail["op"] = "ensure";
    return c;
  }

  // Incomplete.
  if (self_source) {
    c.error = desired.address + ": " + where + " is the source of model " + desired.name +
              " (source: " + a.value("source", "") + ") but " +
              (p.snapshot ? "is incomplete: " + JoinProblems(comp.problems)
                          : "does not hold revision " + rev + " in " + a.value("cache", "")) +
              "; stage it there first, or name another source";
    return c;
  }
  if (src_kind != "hub" && !source_ok && !have_ref) {
    c.error = desired.address + ": nothing to stage from: source " + src_name +
              " has no snapshot of " + Short(rev) + " (see model." + desired.name + "@" + src_name +
              ")";
    return c;
  }
  const size_t missing_files =
      comp.files_total > comp.files_ok ? comp.files_total - comp.files_ok : 0;
  c.action = (!p.snapshot && comp.files_ok == 0) ? Action::kCreate : Action::kUpdate;
  if (src_kind == "hub")
    c.summary = "download " + a.value("repo", "") + "@" + Short(rev) + " from the hub on " +
                desired.node + (have_ref ? " (" + HumanBytes(comp.missing_bytes) + ")" : "");
  else
    c.summary = "stage from " + src_name + ": " + std::to_string(missing_files) + " file(s), " +
                HumanBytes(comp.missing_bytes) +
                FabricRouteNote(src_kind, src_name, desired, ctx, &c);
  if (!fixes.empty()) c.summary += "; " + join(fixes);
  std::vector<std::string> problems;
  AddProblems(comp.problems, &problems);
  c.reasons.insert(c.reasons.begin(), problems.begin(), problems.end());
  c.detail["op"] = "ensure";

  // Space, at plan time, with the figures (the log's 636 GB onto 251 GB).
  // A hub download has no listing before it starts, but another copy of
  // the same revision probed in this plan gives the sizes.
  uint64_t needed = comp.missing_bytes;
  std::string sizes_from;
  if (!have_ref && ctx.all_actual) {
    const std::string prefix = "model." + desired.name + "@";
    for (const auto& [address, other] : *ctx.all_actual) {
      if (address.rfind(prefix, 0) != 0 || address == desired.address || !other.probed) continue;
      HubProbe op = HubProbe::FromJson(other.attributes);
      Listing ol = ListingFromProbe(op);
      if (ol.empty() || !CheckCompleteness(op, nullptr, rev).complete) continue;
      if (!branch.empty() && op.resolved != rev) continue;  // another commit of the branch
      needed = CheckCompleteness(p, &ol, rev).missing_bytes;
      sizes_from = " (sizes from the copy at " + address.substr(prefix.size()) + ")";
      c.summary += " (" + HumanBytes(needed) + ")";
      break;
    }
  }
  // Other models this plan stages onto the same filesystem of this node
  // (those whose address sorts first) take their share of the free space.
  uint64_t others = 0;
  std::string others_said;
  if (ctx.all_actual && ctx.manifest && p.disk.known) {
    for (const auto& [address, other] : *ctx.all_actual) {
      if (address >= desired.address) break;
      if (address.rfind("model.", 0) != 0 || !other.probed || !other.error.empty()) continue;
      const size_t at = address.find('@');
      if (at == std::string::npos) continue;
      auto spec = ctx.manifest->models.find(address.substr(6, at - 6));
      if (spec == ctx.manifest->models.end()) continue;
      std::string node = address.substr(at + 1);
      if (auto st = ctx.manifest->stores.find(node); st != ctx.manifest->stores.end())
        node = StoreNode(*ctx.manifest, st->second);
      if (node != desired.node) continue;
      HubProbe op = HubProbe::FromJson(other.attributes);
      if (!op.disk.known || op.disk.mount != p.disk.mount) continue;
      const size_t colon = spec->second.source.find(':');
      if (colon == std::string::npos) continue;  // from the hub: size unknown
      const std::string src = address.substr(0, at + 1) + spec->second.source.substr(colon + 1);
      auto sa = ctx.all_actual->find(src);
      if (src == address || sa == ctx.all_actual->end() || !sa->second.probed) continue;
      Listing sl = ListingFromProbe(HubProbe::FromJson(sa->second.attributes));
      if (sl.empty()) continue;
      const uint64_t n = CheckCompleteness(op, &sl, spec->second.revision).missing_bytes;
      if (n == 0) continue;
      others += n;
      others_said += " + " + HumanBytes(n) + " for " + address;
    }
  }
  if (!others_said.empty()) others_said = " (" + others_said.substr(3) + " in the same plan)";
  if ((have_ref || !sizes_from.empty()) && p.disk.known && needed + others > p.disk.avail_bytes) {
    std::string fits;
    for (const auto& [sname, d] : p.stores)
      if (d.known && d.avail_bytes >= needed)
        fits += (fits.empty() ? "" : ", ") + sname + " (" + HumanBytes(d.avail_bytes) + " free)";
    c.error = desired.address + ": needs " + HumanBytes(needed) + sizes_from + others_said + ", " +
              where + " has " + HumanBytes(p.disk.avail_bytes) + " free at " + p.disk.path +
              (p.disk.mount.empty() ? "" : " (filesystem " + p.disk.mount + ")") + "; " +
              (fits.empty() ? "no store " + desired.node + " mounts has room either"
                            : "a store that fits: " + fits);
    return c;
  }
  if (!have_ref && sizes_from.empty() && p.disk.known)
    c.reasons.push_back("size unknown until the download lists it; " +
                        HumanBytes(p.disk.avail_bytes) + " free at " + p.disk.path);
  return c;
}

namespace {

// The --purge change for a recorded model: remove what fleet staged.
PlanChange PurgeChange(PlanChange c, const ResourceRecord* record, bool present) {
  const Json rec = record ? record->attributes : Json();
  const std::string rev = rec.value("revision", "");
  c.before = {{"revision", rev}, {"bytes", rec.value("bytes", uint64_t{0})}};
  if (!record) {
    c.summary = "kept (not staged by fleet: nothing recorded)";
    return c;
  }
  if (rec.value("origin", "") != "staged") {
    c.summary = "kept (fleet found and verified it, it did not stage it: --purge leaves it)";
    return c;
  }
  c.action = Action::kDelete;
  c.after = nullptr;
  if (!present) {
    c.summary = "forget (already gone from " + rec.value("cache", "") + ")";
    c.detail = {{"forget", true}};
    return c;
  }
  c.summary = "remove " + rec.value("repo", "") + "@" + Short(rev) + " (" +
              HumanBytes(rec.value("bytes", uint64_t{0})) + ") from " + rec.value("cache", "") +
              " (--purge)";
  c.reasons.push_back("staged by fleet; blobs another revision still links to stay");
  c.detail = {{"op", "remove"},
              {"repo", rec.value("repo", "")},
              {"revision", rev},
              {"cache", rec.value("cache", "")},
              {"location", rec.value("location", "")}};
  return c;
}

}  // namespace

PlanChange ModelProvider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                      const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = ChangeFor(desired);
  if (ctx.purge) return PurgeChange(c, record, !actual.probed || actual.exists);
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
  if (ctx.purge) {
    c = PurgeChange(c, &record, true);
    if (c.action == Action::kDelete) return c;
  }
  // Not declared any more: the record goes, the files stay (a model that
  // took hours is never deleted by omission).
  c.action = Action::kDelete;
  c.summary = "forget (no longer declared; the files stay in " +
              record.attributes.value("cache", std::string("the cache")) +
              (ctx.purge ? ")" : "; --purge removes what fleet staged)");
  c.reasons = {"in state, not in the manifests"};
  c.before = {{"revision", record.attributes.value("revision", "")},
              {"bytes", record.attributes.value("bytes", uint64_t{0})}};
  c.after = nullptr;
  c.detail = {{"forget", true}};
  return c;
}

Result<Json> ModelProvider::Apply(const PlanChange& change, const StepContext& ctx) const {
  using R = Result<Json>;
  const Json& d = change.detail;
  const Manifest& m = *ctx.manifest;
  HubLocation loc{d.value("cache", ""), d.value("repo", ""), d.value("revision", "")};
  const std::string where = WhereOf(d, change.node);
  // A floating revision: the plan resolved it to a commit (loc.revision),
  // except for a hub download onto a node without the branch: then the
  // probe resolves it, or the download does.
  const std::string branch = d.value("branch", "");
  bool unresolved = !branch.empty() && !IsCommitId(loc.revision);
  if (unresolved) loc.revision = branch;
  if (d.value("op", "") == "remove") {
    // --purge: under the staging lock, so that no copy is half-way.
    Result<std::unique_ptr<Transport>> keeper = Dedicated(m, change.node);
    if (!keeper.ok()) return keeper.status();
    std::string took;
    Result<std::unique_ptr<StagingLockHolder>> l =
        StagingLockHolder::Acquire(std::move(keeper.value()), loc.cache, loc.repo, &took);
    if (!l.ok()) return R::Error(where + ": " + l.status().message());
    uint64_t freed = 0;
    Status s = RemoveModelRevision(ctx.transport, loc, &freed);
    Status r = l.value()->Release(ctx.transport);
    if (!s.ok()) return s;
    if (!r.ok()) return r;
    if (ctx.progress)
      ctx.progress("removed " + loc.repo + "@" + Short(loc.revision) + ", freed " +
                   HumanBytes(freed));
    return Json();  // no record left
  }
  const bool self_source = d.value("self_source", false);
  const std::string src_kind = d.value("source_kind", "hub");
  const std::string src_name = d.value("source_name", "");
  const bool deep = d.value("verify", "sizes") == "deep";
  Transport* t = ctx.transport;
  auto say = [&](const std::string& line) {
    if (ctx.progress) ctx.progress(line);
  };
  auto fail = [&](const std::string& why) { return R::Error(where + ": " + why); };

  auto probe_here = [&]() -> Result<HubProbe> {
    Result<HubProbe> r = ProbeHub(t, loc, unresolved ? branch : "");
    if (r.ok() && unresolved && r->IsCommit()) {
      loc.revision = r->resolved;
      unresolved = false;
    }
    return r;
  };
  Result<HubProbe> p = probe_here();
  if (!p.ok()) return p.status();

  // The reference: the source's snapshot as it is now, else the record.
  Listing ref;
  bool have_ref = false;
  const Json rec = ctx.record ? ctx.record->attributes : Json();
  HubLocation src_loc{d.value("source_cache", ""), loc.repo, loc.revision};
  const std::string src_node = d.value("source_node", "");
  HubProbe src_probe;
  if (!self_source && src_kind != "hub") {
    Result<std::unique_ptr<Transport>> st = Dedicated(m, src_node);
    if (!st.ok()) return st.status().Prefixed("source " + src_name);
    Result<HubProbe> sp = ProbeHub(st->get(), src_loc);
    if (!sp.ok()) return sp.status().Prefixed("source " + src_name);
    src_probe = *sp;
    Completeness sc = CheckCompleteness(*sp, nullptr, loc.revision);
    ref = ListingFromProbe(*sp);
    if (!branch.empty() && !sp->snapshot && CheckCompleteness(*p, nullptr, loc.revision).complete) {
      // A floating revision this node holds at its own commit, which the
      // source no longer has (its branch moved on): the record, if any, is
      // the reference.
      ref.clear();
      if (SameRecord(rec, d)) {
        ref = ListingFromJson(rec["files"]);
        have_ref = !ref.empty();
      }
    } else if (!sc.complete || ref.empty()) {
      return R::Error("source " + src_name + " is incomplete: " + JoinProblems(sc.problems));
    } else {
      have_ref = true;
    }
  } else if (SameRecord(rec, d)) {
    ref = ListingFromJson(rec["files"]);
    have_ref = !ref.empty();
  }
  Completeness comp = CheckCompleteness(*p, have_ref ? &ref : nullptr, loc.revision);
  if (!comp.complete && self_source)
    return fail("the source of model " + change.address +
                " is incomplete: " + JoinProblems(comp.problems));
  const bool may_download = src_kind == "hub" && !self_source;
  // refs/<branch> to point at the commit staged (a floating revision).
  auto ref_to_write = [&]() {
    if (branch.empty() || unresolved) return false;
    auto it = p->refs.find(branch);
    return (it == p->refs.end() || d.value("write_ref", false)) &&
           (it == p->refs.end() || it->second != loc.revision);
  };
  const bool writes = (!comp.complete && !self_source) || may_download || p->layout == "legacy" ||
                      !comp.absolute_links.empty() || (!self_source && ref_to_write());

  // One writer per model and cache: a second apply reports the first.
  std::unique_ptr<StagingLockHolder> lock;
  if (writes) {
    Result<std::unique_ptr<Transport>> keeper = Dedicated(m, change.node);
    if (!keeper.ok()) return keeper.status();
    std::string took;
    Result<std::unique_ptr<StagingLockHolder>> l =
        StagingLockHolder::Acquire(std::move(keeper.value()), loc.cache, loc.repo, &took);
    if (!l.ok()) return fail(l.status().message());
    lock = std::move(l.value());
    if (!took.empty()) say("took over a stale staging lock (" + took + ": not running)");
  }
  auto release = [&](Status s) -> Status {
    if (lock) {
      Status r = lock->Release(t);
      lock.reset();
      if (s.ok() && !r.ok()) return r;
    }
    return s;
  };
  auto reprobe = [&]() -> Status {
    p = probe_here();
    if (!p.ok()) return p.status();
    comp = CheckCompleteness(*p, have_ref ? &ref : nullptr, loc.revision);
    return Status::OK();
  };
  auto fix_layout = [&]() -> Status {
    bool changed = false;
    if (p->layout == "legacy") {
      Status s = FixLegacyLayout(t, loc);
      if (!s.ok()) return s;
      say("legacy layout: linked " + loc.cache + "/" + HubRepoDirName(loc.repo) + " -> ../" +
          HubRepoDirName(loc.repo) + " (relative)");
      changed = true;
    }
    if (!comp.absolute_links.empty()) {
      Status s = MakeLinksRelative(t, loc, comp.absolute_links);
      if (!s.ok()) return s;
      say("made " + std::to_string(comp.absolute_links.size()) + " absolute symlink(s) relative");
      changed = true;
    }
    return changed ? reprobe() : Status::OK();
  };
  auto download = [&]() -> Status {
    // Someone else's download (not fleet's: the lock was free) still writing?
    for (const IncompleteBlob& b : p->incomplete)
      if (p->now > 0 && p->now - b.mtime < 60)
        return Status::Error(where + ": blobs/" + b.name + " was written " +
                             std::to_string(p->now - b.mtime) +
                             " s ago by another process: a download seems to be running; not "
                             "starting a duplicate");
    ProgressMeter meter("downloading " + loc.repo + " on " + change.node,
                        d.value("expected_bytes", uint64_t{0}), ctx.progress, 5.0);
    Status s;
    {
      Result<std::unique_ptr<Transport>> wt = Dedicated(m, change.node);
      std::unique_ptr<BlobBytesWatcher> watcher;
      if (wt.ok() && ctx.progress)
        watcher = std::make_unique<BlobBytesWatcher>(std::move(wt.value()), loc, &meter);
      say("running `" + DownloadCommandLine(options_.download_command, loc) + "` on " +
          change.node);
      s = RunHubDownload(t, change.node, options_.download_command, loc);
    }
    if (!s.ok()) return s;
    Status r = reprobe();
    if (!r.ok()) return r;
    meter.Set(ListingBytes(ListingFromProbe(*p)));
    meter.Finish();
    return fix_layout();
  };

  Status s = fix_layout();
  bool downloaded = false;
  bool staged = false;  // this apply wrote files (not only checked them)
  std::set<std::string> hashed;
  if (s.ok() && !comp.complete) {
    staged = true;
    if (may_download) {
      s = download();
      downloaded = true;
    } else {
      // Copy what is missing from the source, through this controller.
      Result<std::map<std::string, uint64_t>> blobs = ListBlobs(t, loc);
      if (!blobs.ok()) return release(blobs.status());
      std::map<std::string, uint64_t> partial;
      for (const IncompleteBlob& b : p->incomplete)
        partial[b.name.substr(0, b.name.size() - 11)] = b.size;
      std::vector<CopyItem> items;
      std::string links;
      uint64_t bytes = 0;
      for (const ListedFile& f : ref) {
        if (f.path.empty() || f.path[0] == '/' || f.path == ".." || f.path.rfind("../", 0) == 0 ||
            f.path.find("/../") != std::string::npos)
          return release(Status::Error("source " + src_name + ": refusing the snapshot path '" +
                                       f.path + "'"));
        const SnapshotEntry* e = p->Find(f.path);
        if (e && e->resolved && e->size == f.size) continue;
        if (!f.blob.empty()) {
          auto b = blobs->find(f.blob);
          if (b != blobs->end() && b->second == f.size) {
            // The blob is here already (another revision): link it.
            links += "mkdir -p -- \"$(dirname -- \"$m/snapshots/$r/\"" + ShellQuote(f.path) +
                     ")\" && ln -sfn -- " + ShellQuote(RelativeBlobLink(f.path, f.blob)) +
                     " \"$m/snapshots/$r/\"" + ShellQuote(f.path) + " || exit 1\n";
            continue;
          }
        }
        CopyItem item{f.path, f.size, f.blob, 0};
        if (auto it = partial.find(f.blob);
            !f.blob.empty() && it != partial.end() && it->second <= f.size)
          item.offset = it->second;
        bytes += f.size - item.offset;
        items.push_back(std::move(item));
      }
      if (p->disk.known && bytes > p->disk.avail_bytes)
        return release(Status::Error(where + ": needs " + HumanBytes(bytes) + ", has " +
                                     HumanBytes(p->disk.avail_bytes) + " free at " + p->disk.path));
      if (!links.empty()) {
        Result<CommandResult> lr =
            t->Run("c=" + NodePathWord(loc.cache) + "; d=" + ShellQuote(HubRepoDirName(loc.repo)) +
                   "; r=" + ShellQuote(loc.revision) + "\nm=\"$c/$d\"\n" + links);
        if (!lr.ok()) return release(lr.status());
        if (lr->exit_code != 0)
          return release(Status::Error(where + ": linking blobs: " + lr->err));
      }
      // A node that sees both folders (a store it mounts and its own cache)
      // copies on its own: the bytes need not cross the network twice.
      std::string local_node;
      {
        auto seers = [&](const std::string& kind, const std::string& name) {
          std::vector<std::string> n;
          if (kind == "store") {
            if (auto st = m.stores.find(name); st != m.stores.end())
              for (const std::string& x : st->second.nodes)
                if (!DeclaredOff(m, x)) n.push_back(x);
          } else {
            n = {name};
          }
          return n;
        };
        std::vector<std::string> src_seen = seers(src_kind, src_name);
        std::vector<std::string> dst_seen =
            seers(d.value("location_kind", "node"), d.value("location", change.node));
        for (const std::string& n : dst_seen)
          if (std::find(src_seen.begin(), src_seen.end(), n) != src_seen.end() &&
              (local_node.empty() || n == change.node))
            local_node = n;
      }
      if (!items.empty() && !local_node.empty()) {
        ProgressMeter meter(d.value("location", change.node) + " <- " + src_name, bytes,
                            ctx.progress);
        say("copying " + std::to_string(items.size()) + " file(s), " + HumanBytes(bytes) +
            " from " + src_name + " on " + local_node +
            " (it sees both: nothing crosses the network)");
        std::unique_ptr<Transport> own;
        Transport* on = t;
        if (local_node != change.node) {
          Result<std::unique_ptr<Transport>> lt = Dedicated(m, local_node);
          if (!lt.ok()) return release(lt.status());
          own = std::move(lt.value());
          on = own.get();
        }
        Result<CopyReport> cr =
            CopyModelFilesOnNode(on, src_loc, loc, items, [&](uint64_t n) { meter.Add(n); });
        if (!cr.ok()) return release(cr.status());
        meter.Finish();
      } else if (!items.empty()) {
        ProgressMeter meter(d.value("location", change.node) + " <- " + src_name, bytes,
                            ctx.progress);
        say("copying " + std::to_string(items.size()) + " file(s), " + HumanBytes(bytes) +
            " from " + src_name);
        CopySide from{[&] { return Dedicated(m, src_node); }, src_loc};
        CopySide to{[&] { return Dedicated(m, change.node); }, loc};
        CopyOptions co;
        co.streams = options_.copy_streams;
        co.on_bytes = [&](uint64_t n) { meter.Add(n); };
        const FabricRoute route = FabricRoute::FromJson(d.value("route", nlohmann::json()));
        Result<CopyReport> cr = route.direct ? CopyModelFilesOverFabric(from, to, items, route, co)
                                             : CopyModelFiles(from, to, items, co);
        if (!cr.ok()) return release(cr.status());
        meter.Finish();
        hashed.insert(cr->hashed.begin(), cr->hashed.end());
      }
      // The source's refs that name this revision (refs/main for most),
      // where the target has none of that name: tools read refs/main.
      std::string refs;
      for (const auto& [ref_name, commit] : src_probe.refs)
        if (commit == loc.revision && !p->refs.count(ref_name) && ref_name != branch)
          refs += "mkdir -p -- \"$(dirname -- \"$m/refs/\"" + ShellQuote(ref_name) +
                  ")\" && printf '%s' " + ShellQuote(commit) + " > \"$m/refs/\"" +
                  ShellQuote(ref_name) + " || exit 1\n";
      if (!refs.empty()) {
        Result<CommandResult> rr =
            t->Run("c=" + NodePathWord(loc.cache) + "; d=" + ShellQuote(HubRepoDirName(loc.repo)) +
                   "\nm=\"$c/$d\"\n" + refs);
        if (!rr.ok()) return release(rr.status());
        if (rr->exit_code != 0) return release(Status::Error(where + ": writing refs: " + rr->err));
      }
      s = reprobe();
    }
    if (s.ok() && !comp.complete)
      s = Status::Error(where + ": still incomplete after " +
                        (downloaded ? "the download (it exited 0): " : "staging: ") +
                        JoinProblems(comp.problems));
  }
  if (!s.ok()) return release(s);

  // Every header, and the index.
  std::vector<std::string> problems;
  for (int attempt = 0; attempt < 2; ++attempt) {
    Listing present = ListingFromProbe(*p);
    Result<SnapshotHeaders> h = ReadSnapshotHeaders(t, loc);
    if (!h.ok()) return release(h.status());
    problems = CheckSafetensors(h->headers, h->indexes, present);
    if (present.empty()) problems.push_back("the snapshot has no files");
    if (problems.empty() || !may_download || downloaded) break;
    say("verification failed (" + JoinProblems(problems, 3) + "): downloading");
    s = download();
    downloaded = staged = true;
    if (s.ok() && !comp.complete)
      s = Status::Error(where + ": still incomplete after the download (it exited 0): " +
                        JoinProblems(comp.problems));
    if (!s.ok()) return release(s);
  }
  if (!problems.empty())
    return release(Status::Error(
        where + ": " +
        (downloaded ? "the download exited 0 but the model is broken: " : "incomplete: ") +
        JoinProblems(problems)));

  const Listing present = ListingFromProbe(*p);
  if (deep) {
    Listing todo;
    uint64_t todo_bytes = 0;
    for (const ListedFile& f : present)
      if (!hashed.count(f.path)) {
        todo.push_back(f);
        todo_bytes += f.size;
      }
    ProgressMeter meter("deep verify on " + change.node, todo_bytes, ctx.progress);
    std::vector<std::string> bad;
    if (ctx.node && ctx.node->address == "local") {
      // The files are on this machine: hash them here, in parallel.
      std::vector<LocalHashJob> jobs;
      const std::string base = ExpandHome(loc.cache) + "/" + HubRepoDirName(loc.repo) +
                               "/snapshots/" + loc.revision + "/";
      for (const ListedFile& f : todo) jobs.push_back({base + f.path, f.blob});
      std::atomic<uint64_t> done{0};
      for (const LocalHashResult& r : HashLocalFiles(jobs, options_.hash_parallel, &done))
        if (!r.ok())
          bad.push_back(
              r.path.substr(base.size()) + ": " +
              (r.error.empty() ? "content does not match its blob name (corrupt)" : r.error));
      meter.Set(done);
    } else {
      Result<std::vector<std::string>> r =
          DeepVerifyOnNode(t, loc, todo, options_.hash_parallel,
                           [&](const std::string&, uint64_t size) { meter.Add(size); });
      if (!r.ok()) return release(r.status());
      bad = std::move(r.value());
    }
    meter.Finish();
    if (!bad.empty()) return release(Status::Error(where + ": deep verify: " + JoinProblems(bad)));
    say("deep verify: " + std::to_string(present.size()) + " file(s) match their blob names (" +
        std::to_string(hashed.size()) + " hashed while copied)");
  }

  if (!self_source && ref_to_write()) {
    // Tools read the branch: point it at the commit just verified.
    Result<CommandResult> rr = t->Run(
        "c=" + NodePathWord(loc.cache) + "; d=" + ShellQuote(HubRepoDirName(loc.repo)) +
        "\nm=\"$c/$d\"; [ -d \"$m\" ] || m=\"$c/../$d\"\nmkdir -p -- \"$(dirname -- \"$m/refs/\"" +
        ShellQuote(branch) + ")\" && printf '%s' " + ShellQuote(loc.revision) + " > \"$m/refs/\"" +
        ShellQuote(branch) + ".fleet-tmp && mv -f -- \"$m/refs/\"" + ShellQuote(branch) +
        ".fleet-tmp \"$m/refs/\"" + ShellQuote(branch) + "\n");
    if (!rr.ok()) return release(rr.status());
    if (rr->exit_code != 0)
      return release(Status::Error(where + ": writing refs/" + branch + ": " + rr->err));
    say("refs/" + branch + " -> " + loc.revision);
  }
  Status rel = release(Status::OK());
  if (!rel.ok()) return rel;
  if (unresolved) return R::Error(where + ": refs/" + branch + " names no commit after staging");
  Json out = {{"repo", loc.repo},
              {"revision", loc.revision},
              {"cache", loc.cache},
              {"location", d.value("location", "")},
              {"source", d.value("source", "")},
              {"files", ListingToJson(present)},
              {"bytes", ListingBytes(present)},
              {"verified", "headers"},
              {"verified_at", NowRfc3339()},
              // What --purge may remove: files fleet put there, not a copy it
              // only found and checked (a source, an operator's download).
              {"origin", staged               ? "staged"
                         : SameRecord(rec, d) ? rec.value("origin", "adopted")
                                              : "adopted"}};
  if (!branch.empty()) out["branch"] = branch;
  const bool same_files = SameRecord(rec, d) &&
                          ListingFromJson(rec["files"]).size() == present.size() &&
                          ListingToJson(ListingFromJson(rec["files"])) == ListingToJson(present);
  if (deep) {
    out["verified"] = "deep";
    out["deep_verified_at"] = out["verified_at"];
  } else if (same_files && rec.value("verified", "") == "deep") {
    out["verified"] = "deep";
    out["deep_verified_at"] = rec.value("deep_verified_at", "");
  }
  return out;
}

}  // namespace fleet
