#include "providers/image/image_provider.h"

#include <map>
#include <set>
#include <sstream>

#include "providers/image/engine_check.h"
#include "providers/image/image_probe.h"
#include "providers/image/image_ref.h"
#include "providers/image/image_steps.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

namespace {

std::string NodeOfAddress(const std::string& address) {
  size_t at = address.rfind('@');
  return at == std::string::npos ? "" : address.substr(at + 1);
}

// What the probe of one node says about the image, judged against the
// config digest the registry digest points to (empty: unknown).
struct Judged {
  bool present = false;
  std::string id;
  std::string how;
  std::string other_id;  // fleet's tag names another image
};

Judged Judge(const ImageRef& ref, const ImageProbe& p, const std::string& config) {
  Judged j;
  if (p.by_ref.found && (!ref.pinned() || HasRepoDigest(p.by_ref.repo_digests, ref.digest))) {
    j.present = true;
    j.id = p.by_ref.id;
    j.how = ref.pinned() ? "by registry digest" : "by tag";
  } else if (ref.pinned() && p.by_name.found) {
    if (config.empty() || p.by_name.id == config) {
      j.present = true;
      j.id = p.by_name.id;
      j.how = "by fleet's tag";
    } else {
      j.other_id = p.by_name.id;
    }
  }
  return j;
}

// The probes of this image on every probed node, by node.
std::map<std::string, ImageProbe> ProbesOf(const std::string& name, const DiffContext& ctx) {
  std::map<std::string, ImageProbe> out;
  if (ctx.all_actual == nullptr) return out;
  const std::string prefix = "image." + name + "@";
  for (const auto& [address, a] : *ctx.all_actual) {
    if (address.rfind(prefix, 0) != 0 || !a.probed || !a.error.empty()) continue;
    out[NodeOfAddress(address)] = ImageProbe::FromJson(a.attributes);
  }
  return out;
}

std::string JoinNames(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

// FNV-1a: a stable spread of targets over the nodes that can serve a copy.
uint32_t Fnv(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

std::vector<DesiredResource> ImageProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  for (const auto& [name, spec] : m.images) {
    std::map<std::string, std::vector<std::string>> wanted;  // node -> by whom
    for (const auto& [dname, d] : m.deployments) {
      if (d.image != name) continue;
      for (const std::string& n : d.nodes) wanted[n].push_back("deployment " + dname);
    }
    for (const std::string& n : spec.nodes) wanted[n].push_back("image " + name + " nodes:");
    const ImageRef ref = ParseImageRef(spec.ref);
    for (const auto& [node, by] : wanted) {
      auto it = m.nodes.find(node);
      if (it == m.nodes.end()) continue;  // the loader reports unknown nodes
      DesiredResource r;
      r.address = ResourceAddress("image", name, node);
      r.type = "image";
      r.name = name;
      r.node = node;
      r.attributes = {{"ref", spec.ref},
                      {"digest", ref.digest},
                      {"source", spec.source},
                      {"allow_floating", spec.allow_floating},
                      {"cli", it->second.container_cli},
                      {"wanted_by", by}};
      r.depends_on = {NodeAddress(node)};
      r.loc = spec.loc;
      out.push_back(std::move(r));
    }
  }
  return out;
}

std::string ImageProvider::ProbeScript(const DesiredResource& r, const NodeSpec& node) const {
  return ImageProbeScript(node.container_cli, ParseImageRef(r.attributes.value("ref", "")));
}

ActualResource ImageProvider::ParseProbe(const DesiredResource& r, const std::string& output,
                                         const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  ImageProbe p = ParseImageProbe(output);
  a.attributes = p.ToJson();
  a.exists = p.by_ref.found || p.by_name.found;
  const std::string cli = r.attributes.value("cli", "");
  if (!p.cli_found)
    a.error = "container_cli '" + cli + "' not found on the node's PATH";
  else if (!p.by_ref.tried)
    a.error = "the image probe printed nothing";
  else if (!p.by_ref.error.empty())
    a.error = p.by_ref.error;
  else if (!p.by_name.error.empty())
    a.error = p.by_name.error;
  return a;
}

PlanChange ImageProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                               const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c;
  c.address = desired.address;
  c.type = desired.type;
  c.node = desired.node;
  const std::string& node = desired.node;
  const std::string& name = desired.name;
  const ImageRef ref = ParseImageRef(desired.attributes.value("ref", ""));
  const std::string source = desired.attributes.value("source", "registry");
  const std::string what = "image " + name + " (" + ref.text + ")";

  if (!ref.pinned() && !desired.attributes.value("allow_floating", false)) {
    c.error = what + ": not pinned by digest (set allow_floating: true to accept a tag)";
    return c;
  }
  if (actual.probed && !actual.error.empty()) {
    c.error = what + " on " + node + ": " +
              WithEngineFix(actual.error, desired.attributes.value("cli", ""), node,
                            NodeSshUser(ctx.manifest, node));
    return c;
  }

  const std::map<std::string, ImageProbe> probes = ProbesOf(name, ctx);
  // The config digest D points to: read where D itself is known.
  std::string config, config_from;
  if (ref.pinned()) {
    for (const auto& [n, p] : probes)
      if (p.by_ref.found && HasRepoDigest(p.by_ref.repo_digests, ref.digest)) {
        config = p.by_ref.id;
        config_from = n;
        break;
      }
    if (config.empty() && record != nullptr &&
        record->attributes.value("digest", "") == ref.digest) {
      config = NormalizeImageId(record->attributes.value("image_id", ""));
      if (!config.empty()) config_from = "the state record";
    }
  }

  ImageProbe here;
  if (auto it = probes.find(node); it != probes.end()) here = it->second;
  const Judged j = actual.probed ? Judge(ref, here, config) : Judged{};

  if (!ref.pinned()) {
    // Floating: say loudly what the tag is on each node.
    std::map<std::string, std::vector<std::string>> by_id;
    for (const auto& [n, p] : probes)
      if (p.by_ref.found) by_id[p.by_ref.id].push_back(n);
    std::string here_is = "not on this node";
    if (j.present) {
      std::string digests;
      for (const std::string& d : here.by_ref.repo_digests)
        digests += (digests.empty() ? "" : ", ") + d.substr(d.rfind('@') + 1);
      here_is = "here it is image " + ShortId(j.id) +
                (digests.empty() ? " (no registry digest)" : ", registry digest " + digests);
    }
    c.reasons.push_back("FLOATING TAG " + ref.text + " (allow_floating): " + here_is +
                        "; every pull may bring another image");
    if (by_id.size() > 1) {
      std::string split;
      for (const auto& [id, nodes] : by_id)
        split += (split.empty() ? "" : "; ") + ShortId(id) + " on " + JoinNames(nodes);
      c.reasons.push_back("nodes disagree on what " + ref.text + " is: " + split);
    }
  }

  if (j.present) {
    c.before = {{"digest", ref.pinned() ? nlohmann::json(ref.digest) : nlohmann::json()},
                {"image_id", j.id}};
    c.after = c.before;
    if (ref.pinned() && j.how == "by fleet's tag" && config.empty())
      c.reasons.push_back("found by fleet's tag " + ref.FleetTag() +
                          " only: no node holds registry digest " + ref.digest +
                          " to cross-check its config digest");
    return c;
  }

  // Missing (or unknown: the node is off and will be checked at apply).
  c.action = j.other_id.empty() ? Action::kCreate : Action::kUpdate;
  c.before = j.other_id.empty() ? nlohmann::json() : nlohmann::json{{"image_id", j.other_id}};
  if (!actual.probed)
    c.reasons.push_back("node is not reachable now: presence is checked again at apply");
  else if (ref.pinned())
    c.reasons.push_back("digest " + ref.digest + " not on node");
  else
    c.reasons.push_back(ref.text + " not on node");
  if (!j.other_id.empty())
    c.reasons.push_back("fleet's tag " + ref.FleetTag() + " names image " + ShortId(j.other_id) +
                        ", but " + ref.digest + " is image " + ShortId(config) + " (read on " +
                        config_from + ")");
  for (const auto& w : desired.attributes.value("wanted_by", nlohmann::json::array()))
    c.reasons.push_back("wanted by " + w.get<std::string>());
  c.detail = {{"ref", ref.text}, {"config", config}};
  c.after = {{"digest", ref.pinned() ? nlohmann::json(ref.digest) : nlohmann::json()},
             {"image_id",
              config.empty() ? nlohmann::json("(known after apply)") : nlohmann::json(config)}};

  if (source == "registry") {
    c.summary = "pull " + ref.Lookup() + " from its registry";
    c.detail["op"] = "pull";
    return c;
  }

  // Copy from a node: the one named, or any peer that has it.
  std::string from;
  if (source.rfind("node:", 0) == 0) {
    from = source.substr(5);
    if (from == node) {
      c.error = what + ": needed on " + node + ", which is its own source (source: " + source +
                ") and does not have it";
      return c;
    }
    if (ctx.all_facts != nullptr) {
      auto f = ctx.all_facts->find(from);
      if (f != ctx.all_facts->end() && !f->second.reachable) {
        c.error = what + ": needed on " + node + ", but source node " + from +
                  " is not reachable (" + f->second.unreachable_reason + ")";
        return c;
      }
    }
    if (auto p = probes.find(from); p != probes.end()) {
      Judged s = Judge(ref, p->second, config);
      if (!s.present) {
        c.error = what + ": needed on " + node + ", but source node " + from +
                  " does not have it (source: " + source + ")";
        return c;
      }
      if (config.empty()) config = s.id;
      c.reasons.push_back("copy from " + from + " (has it " + s.how + ")");
    } else {
      c.reasons.push_back("copy from " + from + " (not probed for this image: checked at apply)");
    }
  } else {  // peers
    std::vector<std::string> holders, lacking;
    for (const auto& [n, p] : probes) {
      Judged s = Judge(ref, p, config);
      if (s.present && n != node) holders.push_back(n);
      if (!s.present) lacking.push_back(n);
    }
    if (!actual.probed) lacking.push_back(node);
    if (holders.empty()) {
      std::set<std::string> uniq(lacking.begin(), lacking.end());
      c.error = what + ": no node has it to copy from (source: peers); needed on " +
                JoinNames(std::vector<std::string>(uniq.begin(), uniq.end())) +
                ". Pull it on one node (source: registry) or load it there";
      return c;
    }
    from = holders[Fnv(node) % holders.size()];
    Judged s = Judge(ref, probes.at(from), config);
    if (config.empty()) config = s.id;
    c.reasons.push_back("copy from peer " + from + " (has it " + s.how +
                        "; holders: " + JoinNames(holders) + ")");
  }
  c.detail["op"] = "copy";
  c.detail["from"] = from;
  c.detail["config"] = config;
  if (!config.empty()) c.after["image_id"] = config;
  c.summary = "copy from " + from + " (save | load through the controller, config digest " +
              (config.empty() ? std::string("read at apply") : ShortId(config)) + ")";
  return c;
}

namespace {

PlanChange RemoveChange(const std::string& address, const std::string& node,
                        const nlohmann::json& before, const std::string& image_id,
                        const std::string& why) {
  PlanChange c;
  c.address = address;
  c.type = "image";
  c.node = node;
  c.action = Action::kDelete;
  c.summary = "remove image " + image_id + " from " + node;
  c.reasons.push_back(why);
  c.before = before;
  c.detail = {{"op", "remove"}, {"image_id", image_id}};
  return c;
}

// Removes image `id` unless a container uses it. Absent already: done.
Status RemoveImage(const StepContext& ctx, const std::string& id) {
  const std::string& cli = ctx.node->container_cli;
  // Every container, running or not, with the image it was made from
  // (`.Image` is the image ID in both docker and podman, with or without
  // the sha256: prefix).
  const std::string list =
      "ids=$(" + ShellCommand({cli, "ps", "-aq"}) + ") && { [ -z \"$ids\" ] || " +
      ShellCommand({cli, "container", "inspect", "--format", "{{.Image}} {{.Name}}"}) + " $ids; }";
  Result<CommandResult> users = RunOnNode(ctx, list);
  if (!users.ok()) return users.status();
  auto bare = [](std::string s) { return s.rfind("sha256:", 0) == 0 ? s.substr(7) : s; };
  std::string names;
  std::istringstream in(users->out);
  std::string line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    // docker names a container "/name", podman "name"
    const size_t name_at = line.compare(sp + 1, 1, "/") == 0 ? sp + 2 : sp + 1;
    if (bare(line.substr(0, sp)) == bare(id))
      names += (names.empty() ? "" : " ") + line.substr(name_at);
  }
  if (!names.empty())
    return Status::Error("on " + ctx.node->name + ": image " + id + " is used by container(s) " +
                         names + "; not removed");
  Result<CommandResult> found =
      ctx.transport->Run(ShellCommand({cli, "image", "inspect", "--format", "{{.Id}}", id}));
  if (!found.ok()) return found.status();
  if (found->exit_code != 0) return Status::OK();  // not there (any more)
  // -f: the image may carry several names; no container uses it (checked).
  return RunOnNode(ctx, ShellCommand({cli, "rmi", "-f", id})).status();
}

}  // namespace

// Only what fleet itself pulled or copied is ever removed; an image the
// node already had when fleet first looked is the operator's.
bool StagedByFleet(const nlohmann::json& attributes) {
  const std::string via = attributes.value("via", "");
  return via == "pull" || via == "copy";
}

PlanChange ImageProvider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                      const ResourceRecord* record, const DiffContext& ctx) const {
  std::string id = record ? record->attributes.value("image_id", "") : "";
  if (!ctx.purge || !actual.exists || id.empty() || !StagedByFleet(record->attributes))
    return Provider::DiffDestroy(desired, actual, record, ctx);
  return RemoveChange(desired.address, desired.node, record->attributes, id,
                      "destroy --purge removes staged images");
}

PlanChange ImageProvider::DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const {
  std::string id = record.attributes.value("image_id", "");
  if (!ctx.purge || id.empty() || !StagedByFleet(record.attributes) || !ctx.facts.reachable ||
      ctx.manifest == nullptr || !ctx.manifest->nodes.count(record.node))
    return Provider::DiffOrphan(record, ctx);
  return RemoveChange(record.address, record.node, record.attributes, id,
                      "no longer declared for " + record.node + ", and --purge was given");
}

Result<nlohmann::json> ImageProvider::Apply(const PlanChange& change,
                                            const StepContext& ctx) const {
  if (change.detail.value("op", "") == "remove") {
    Status s = RemoveImage(ctx, change.detail.value("image_id", ""));
    if (!s.ok()) return s;
    return nlohmann::json();  // removed: drop the record
  }
  const nlohmann::json& d = change.detail;
  const ImageRef ref = ParseImageRef(d.value("ref", ""));
  const std::string op = d.value("op", "");
  const std::string node = ctx.node->name;
  const std::string cli = ctx.node->container_cli;
  std::string config = d.value("config", "");
  const ProgressFn progress = ctx.progress;
  nlohmann::json record = {{"ref", ref.text}, {"digest", ref.digest}};
  if (op != "pull" && op != "copy")
    return Result<nlohmann::json>::Error("unknown image op '" + op + "'");

  // A copy first re-reads the source: the plan may be old.
  Transport* source = nullptr;
  std::string from, source_cli;
  if (op == "copy") {
    from = d.value("from", "");
    if (ctx.manifest == nullptr || from.empty() || from == node || !ctx.manifest->nodes.count(from))
      return Result<nlohmann::json>::Error("no usable source node ('" + from + "') to copy from");
    auto spec = ctx.manifest->nodes.find(from);
    source_cli = spec->second.container_cli;
    source = ctx.node_transport ? ctx.node_transport(from) : nullptr;
    if (source == nullptr)
      return Result<nlohmann::json>::Error("no transport to source node " + from);
    Status s = source->Connect();
    if (!s.ok()) return s.Prefixed("source node " + from);
    Result<FoundImage> at_source = FindImage(source, source_cli, ref, config);
    if (!at_source.ok()) return at_source.status().Prefixed("on source node " + from);
    if (!at_source->present)
      return Result<nlohmann::json>::Error("source node " + from + " does not have " +
                                           ref.Lookup() + " (any more): re-plan");
    if (!config.empty() && at_source->id != config)
      return Result<nlohmann::json>::Error("source node " + from + " holds image " + at_source->id +
                                           " for " + ref.Lookup() + ", the plan expected " +
                                           config + ": re-plan");
    config = at_source->id;
  }

  Result<FoundImage> here = FindImage(ctx.transport, cli, ref, config);
  if (!here.ok()) return here.status();
  if (here->present) {
    // Already there (staged since the plan, or under another name): name it
    // so the next probe finds it without a copy.
    if (here->how == "by config digest") {
      Status s = EnsureNames(ctx.transport, cli, here->id, NamesForCopy(ref), progress);
      if (!s.ok()) return s;
    }
    record["image_id"] = here->id;
    record["via"] = "present";
    record["found"] = here->how;
    return record;
  }

  if (op == "pull") {
    Result<std::string> id = PullImage(ctx.transport, cli, ref, node, progress);
    if (!id.ok()) return id.status();
    if (!config.empty() && *id != config)
      return Result<nlohmann::json>::Error("pulled " + ref.Lookup() + " on " + node + " is image " +
                                           *id + ", other nodes have " + config);
    if (ref.pinned()) {
      Status s = EnsureNames(ctx.transport, cli, *id, {ref.TaggedName()}, progress);
      if (!s.ok()) return s;
    }
    record["image_id"] = *id;
    record["via"] = "pull";
    return record;
  }

  CopySpec spec;
  spec.source = source;
  spec.source_node = from;
  spec.source_cli = source_cli;
  spec.target = ctx.transport;
  spec.target_node = node;
  spec.target_cli = cli;
  spec.config = config;
  Status s = CopyImage(spec, progress);
  if (!s.ok()) return s;
  const std::vector<std::string> names = NamesForCopy(ref);
  s = EnsureNames(ctx.transport, cli, config, names, progress);
  if (!s.ok()) return s.Prefixed("copied, but naming it failed");
  record["image_id"] = config;
  record["via"] = "copy";
  record["from"] = from;
  record["names"] = names;
  return record;
}

}  // namespace fleet
