#include "providers/image/image_provider.h"

#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "providers/image/chain_copy.h"
#include "providers/image/fabric_copy.h"
#include "providers/image/image_json.h"
#include "providers/image/image_steps.h"
#include "providers/shared/engine_check.h"
#include "providers/shared/image_listing.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "src/shell_quote.h"
#include "state/state.h"

namespace fleet {

using image_internal::Judged;

namespace {

std::string NodeOfAddress(const std::string& address) {
  size_t at = address.rfind('@');
  return at == std::string::npos ? "" : address.substr(at + 1);
}

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
    out.insert_or_assign(NodeOfAddress(address), a.attributes.get<ImageProbe>());
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
    for (const auto& [gname, g] : m.gateways)
      if (g.image == name)
        for (const std::string& n : g.nodes) wanted[n].push_back("gateway " + gname);
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
      r.attributes = ImageWant{
          spec.ref, ref.digest, spec.source, spec.allow_floating, it->second.container_cli, by};
      r.depends_on = {NodeAddress(node)};
      r.loc = spec.loc;
      out.push_back(std::move(r));
    }
  }
  return out;
}

// A pinned ref needs no fragment of its own: the node's image listing
// (NodeFacts::images, read by the node's probe) answers it. A floating one
// keeps its `image inspect repo:tag` (image_probe.h says why).
std::string ImageProvider::ProbeScript(const DesiredResource& r, const NodeSpec& node) const {
  const ImageRef ref = ParseImageRef(r.attributes.get<ImageWant>().ref);
  return ref.pinned() ? "" : ImageProbeScript(node.container_cli, ref);
}

namespace {

// Why the image could not be read on the node, "" when it could.
std::string ProbeError(const ImageProbe& p, const ImageListing& listing, const std::string& cli) {
  if (!p.cli_found) return "container_cli '" + cli + "' not found on the node's PATH";
  if (!listing.listed) return "the node's probe did not list its images";
  // fleet does not remove a record it cannot tell is its own: the command
  // is the operator's. Never `rmi -f` (it removes the containers made from
  // the image, running ones too); `rmi ID` refuses a record with more than
  // one name (fleet's tag and its staged tag are two), so untag it first.
  if (!listing.broken_id.empty())
    return listing.error + "; remove it with `" + cli + " untag " + listing.broken_id + " && " +
           cli + " rmi " + listing.broken_id +
           "` on the node (rmi refuses while a container uses it), then plan again";
  if (!listing.error.empty()) return listing.error;
  if (!p.by_ref.tried) return "the image probe printed nothing";
  if (!p.by_ref.error.empty()) return p.by_ref.error;
  return p.by_name.error;
}

}  // namespace

ActualResource ImageProvider::ParseProbe(const DesiredResource& r, const std::string& output,
                                         const NodeFacts& facts) const {
  const ImageWant want = r.attributes.get<ImageWant>();
  const ImageRef ref = ParseImageRef(want.ref);
  const ImageListing listing = ImageListing::FromJson(facts.images);
  ImageProbe p = ImageProbeFromListing(listing, ref);
  if (!ref.pinned()) {
    const ImageProbe own = ParseImageProbe(output);
    p.by_ref = own.by_ref;
    p.cli_found = p.cli_found && own.cli_found;
  }
  ActualResource a;
  a.probed = true;
  a.attributes = p;
  a.exists = p.by_ref.found || p.by_name.found;
  a.error = ProbeError(p, listing, want.cli);
  return a;
}

namespace image_internal {

ConfigDigest FindConfigDigest(const ImageRef& ref, const std::map<std::string, ImageProbe>& probes,
                              const ResourceRecord* record) {
  ConfigDigest c;
  if (!ref.pinned()) return c;
  for (const auto& [n, p] : probes)
    if (p.by_ref.found && HasRepoDigest(p.by_ref.repo_digests, ref.digest)) return {p.by_ref.id, n};
  if (record == nullptr) return c;
  const ImageRecord rec = record->attributes.get<ImageRecord>();
  if (rec.digest != ref.digest) return c;
  c.id = NormalizeImageId(rec.image_id);
  if (!c.id.empty()) c.from = "the state record";
  return c;
}

Decision NotPinned(const ImageDiffInput& in, const PlanChange& base) {
  if (in.ref.pinned() || in.want.allow_floating) return std::nullopt;
  PlanChange c = base;
  c.error = in.what + ": not pinned by digest (set allow_floating: true to accept a tag)";
  return c;
}

Decision ProbeFailed(const ImageDiffInput& in, const PlanChange& base) {
  if (!in.actual.probed || in.actual.error.empty()) return std::nullopt;
  PlanChange c = base;
  c.error = in.what + " on " + in.desired.node + ": " +
            WithEngineFix(in.actual.error, in.want.cli, in.desired.node,
                          NodeSshUser(in.ctx.manifest, in.desired.node));
  return c;
}

// Floating: say loudly what the tag is on each node.
void FloatingTagNotes(const ImageDiffInput& in, PlanChange* c) {
  if (in.ref.pinned()) return;
  std::map<std::string, std::vector<std::string>> by_id;
  for (const auto& [n, p] : in.probes)
    if (p.by_ref.found) by_id[p.by_ref.id].push_back(n);
  std::string here_is = "not on this node";
  if (in.judged.present) {
    std::string digests;
    for (const std::string& d : in.here.by_ref.repo_digests)
      digests += (digests.empty() ? "" : ", ") + d.substr(d.rfind('@') + 1);
    here_is = "here it is image " + ShortId(in.judged.id) +
              (digests.empty() ? " (no registry digest)" : ", registry digest " + digests);
  }
  c->reasons.push_back("FLOATING TAG " + in.ref.text + " (allow_floating): " + here_is +
                       "; every pull may bring another image");
  if (by_id.size() > 1) {
    std::string split;
    for (const auto& [id, nodes] : by_id)
      split += (split.empty() ? "" : "; ") + ShortId(id) + " on " + JoinNames(nodes);
    c->reasons.push_back("nodes disagree on what " + in.ref.text + " is: " + split);
  }
}

FleetTagged FleetTagOn(const ImageProbe& p, const std::string& id) {
  for (const FleetTagged& t : p.fleet_tagged)
    if (t.id == id) return t;
  return {};
}

bool Unrecorded(const DiffContext& ctx, const std::string& address) {
  return ctx.recorded != nullptr && !ctx.recorded->count(address);
}

void UnrecordedNote(const ImageDiffInput& in, PlanChange* c) {
  const FleetTagged tag = FleetTagOn(in.here, in.judged.id);
  if (tag.name.empty() || !Unrecorded(in.ctx, in.desired.address)) return;
  c->reasons.push_back("on " + in.desired.node + " as image " + ShortId(in.judged.id) +
                       " (it carries fleet's tag " + tag.name +
                       (tag.staged ? ", staged by fleet" : "") +
                       ") but not in this state: `fleet state adopt " + in.desired.address +
                       "` records it (" + in.judged.how + ", nothing pulled)");
}

Decision Present(const ImageDiffInput& in, const ConfigDigest& config, const PlanChange& base) {
  if (!in.judged.present) return std::nullopt;
  PlanChange c = base;
  UnrecordedNote(in, &c);
  c.before = ImageVersionJson(in.ref, in.judged.id);
  c.after = c.before;
  if (in.ref.pinned() && in.judged.how == "by fleet's tag" && config.id.empty())
    c.reasons.push_back("found by fleet's tag " + in.ref.FleetTag() +
                        " only: no node holds registry digest " + in.ref.digest +
                        " to cross-check its config digest");
  return c;
}

// On the node by its config digest but without fleet's tag: a copy (or a
// load by hand) whose naming was cut short, e.g. fleet killed between the
// load and the tag (tests/integration/copy_record_test.sh). The step names
// it; nothing is copied again.
Decision LoadedNotNamed(const ImageDiffInput& in, const ConfigDigest& config,
                        const PlanChange& base) {
  if (!in.actual.probed || !in.ref.pinned() || config.id.empty() || !in.judged.other_id.empty())
    return std::nullopt;
  const ImageListing listing = ImageListing::FromJson(in.ctx.facts.images);
  const bool listed = std::any_of(listing.images.begin(), listing.images.end(),
                                  [&](const ListedImage& i) { return i.id == config.id; });
  if (!listed) return std::nullopt;
  PlanChange c = base;
  c.action = Action::kUpdate;
  c.before = ImageVersionJson(in.ref, config.id);
  c.after = c.before;
  c.reasons.push_back("image " + ShortId(config.id) + " (" + in.ref.digest + ", read on " +
                      config.from + ") is on the node without fleet's tag " + in.ref.FleetTag() +
                      ": its naming was cut short");
  c.detail = ImageStep{kOpName, in.ref.text, config.id, "", ""};
  c.summary = "name image " + ShortId(config.id) + " " + in.ref.FleetTag() + " (already loaded)";
  return c;
}

// Missing (or unknown: the node is off and will be checked at apply): the
// change to stage it, before its source is chosen.
PlanChange Missing(const ImageDiffInput& in, const ConfigDigest& config, const PlanChange& base) {
  PlanChange c = base;
  const std::string& other = in.judged.other_id;
  c.action = other.empty() ? Action::kCreate : Action::kUpdate;
  c.before = other.empty() ? nlohmann::json() : OtherImageJson(other);
  if (!in.actual.probed)
    c.reasons.push_back("node is not reachable now: presence is checked again at apply");
  else if (in.ref.pinned())
    c.reasons.push_back("digest " + in.ref.digest + " not on node");
  else
    c.reasons.push_back(in.ref.text + " not on node");
  if (!other.empty())
    c.reasons.push_back("fleet's tag " + in.ref.FleetTag() + " names image " + ShortId(other) +
                        ", but " + in.ref.digest + " is image " + ShortId(config.id) +
                        " (read on " + config.from + ")");
  for (const std::string& w : in.want.wanted_by) c.reasons.push_back("wanted by " + w);
  c.detail = ImageStep{"", in.ref.text, config.id, "", ""};
  c.after = ImageVersionJson(in.ref, config.id.empty() ? "(known after apply)" : config.id);
  return c;
}

PlanChange PullFromRegistry(const ImageDiffInput& in, const ConfigDigest& config, PlanChange c) {
  c.summary = "pull " + in.ref.Lookup() + " from its registry";
  c.detail = ImageStep{kOpPull, in.ref.text, config.id, "", ""};
  return c;
}

// `source: node:<name>`: that node, which must be up and have it.
CopySource FromNamedNode(const ImageDiffInput& in, const std::string& config) {
  const std::string& source = in.want.source;
  const std::string& node = in.desired.node;
  CopySource s{source.substr(5), config, "", ""};
  if (s.from == node) {
    s.error = in.what + ": needed on " + node + ", which is its own source (source: " + source +
              ") and does not have it";
    return s;
  }
  if (in.ctx.all_facts != nullptr) {
    auto f = in.ctx.all_facts->find(s.from);
    if (f != in.ctx.all_facts->end() && !f->second.reachable) {
      // Why is the plan's Unreachable line for the node.
      s.error =
          in.what + ": needed on " + node + ", but source node " + s.from + " is not reachable";
      return s;
    }
  }
  auto p = in.probes.find(s.from);
  if (p == in.probes.end()) {
    s.reason = "copy from " + s.from + " (not probed for this image: checked at apply)";
    return s;
  }
  const Judged j = Judge(in.ref, p->second, config);
  if (!j.present) {
    s.error = in.what + ": needed on " + node + ", but source node " + s.from +
              " does not have it (source: " + source + ")";
    return s;
  }
  if (s.config.empty()) s.config = j.id;
  s.reason = "copy from " + s.from + " (has it " + j.how + ")";
  return s;
}

// `source: peers`: any node that has it, spread by a hash of the target.
CopySource FromPeers(const ImageDiffInput& in, const std::string& config) {
  const std::string& node = in.desired.node;
  std::vector<std::string> holders, lacking;
  for (const auto& [n, p] : in.probes) {
    Judged j = Judge(in.ref, p, config);
    if (j.present && n != node) holders.push_back(n);
    if (!j.present) lacking.push_back(n);
  }
  if (!in.actual.probed) lacking.push_back(node);
  CopySource s{"", config, "", ""};
  if (holders.empty()) {
    std::set<std::string> uniq(lacking.begin(), lacking.end());
    s.error = in.what + ": no node has it to copy from (source: peers); needed on " +
              JoinNames(std::vector<std::string>(uniq.begin(), uniq.end())) +
              ". Pull it on one node (source: registry) or load it there";
    return s;
  }
  s.from = holders[Fnv(node) % holders.size()];
  Judged j = Judge(in.ref, in.probes.at(s.from), config);
  if (s.config.empty()) s.config = j.id;
  s.reason =
      "copy from peer " + s.from + " (has it " + j.how + "; holders: " + JoinNames(holders) + ")";
  return s;
}

PlanChange CopyFromNode(const ImageDiffInput& in, const ConfigDigest& config, PlanChange c) {
  const CopySource s = in.want.source.rfind("node:", 0) == 0 ? FromNamedNode(in, config.id)
                                                             : FromPeers(in, config.id);
  if (!s.error.empty()) {
    c.error = s.error;
    return c;
  }
  c.reasons.push_back(s.reason);
  const FabricRoute route =
      PlanFabricRoute(in.ctx.manifest, in.ctx.all_facts, s.from, in.desired.node, *in.ctx.settings);
  c.detail = ImageStep{kOpCopy, in.ref.text, s.config, s.from, "", route};
  c.copy = route.ForPlan("image " + in.desired.name);
  if (!s.config.empty()) c.after = ImageVersionJson(in.ref, s.config);
  c.summary = "copy from " + s.from + ": " + route.Describe() + "; save | load, config digest " +
              (s.config.empty() ? std::string("read at apply") : ShortId(s.config));
  return c;
}

}  // namespace image_internal

PlanChange ImageProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                               const ResourceRecord* record, const DiffContext& ctx) const {
  using namespace image_internal;  // NOLINT: the decisions read as a list
  PlanChange base;
  base.address = desired.address;
  base.type = desired.type;
  base.node = desired.node;
  const ImageWant want = desired.attributes.get<ImageWant>();
  const ImageRef ref = ParseImageRef(want.ref);
  const std::map<std::string, ImageProbe> probes = ProbesOf(desired.name, ctx);
  const ConfigDigest config = FindConfigDigest(ref, probes, record);
  ImageProbe here;
  if (auto it = probes.find(desired.node); it != probes.end()) here = it->second;
  const Judged judged = actual.probed ? Judge(ref, here, config.id) : Judged{};
  const ImageDiffInput in{desired, want,   ref,
                          actual,  ctx,    probes,
                          here,    judged, "image " + desired.name + " (" + ref.text + ")"};
  if (auto c = NotPinned(in, base)) return *c;
  if (auto c = ProbeFailed(in, base)) return *c;
  FloatingTagNotes(in, &base);
  if (auto c = Present(in, config, base)) return *c;
  if (auto c = LoadedNotNamed(in, config, base)) return *c;
  PlanChange c = Missing(in, config, base);
  if (want.source == "registry") return PullFromRegistry(in, config, c);
  return CopyFromNode(in, config, c);
}

Result<nlohmann::json> ImageProvider::Adopt(const DesiredResource& desired,
                                            const ActualResource& actual, const DiffContext& ctx,
                                            const StepContext*) const {
  using R = Result<nlohmann::json>;
  DiffContext alone = ctx;
  alone.recorded = nullptr;  // the diff of a record that would exist
  const PlanChange c = Diff(desired, actual, nullptr, alone);
  if (!c.error.empty()) return R::Error(c.error);
  if (c.action != Action::kNoop)
    return R::Error("the plan would " + c.summary + " (" + (c.reasons.empty() ? "" : c.reasons[0]) +
                    ")");
  const ImageWant want = desired.attributes.get<ImageWant>();
  const ImageRef ref = ParseImageRef(want.ref);
  const ImageProbe here = actual.attributes.get<ImageProbe>();
  const image_internal::ConfigDigest config =
      image_internal::FindConfigDigest(ref, ProbesOf(desired.name, ctx), nullptr);
  const Judged judged = Judge(ref, here, config.id);
  if (ref.pinned() && judged.how == "by fleet's tag" && config.id.empty())
    return R::Error("found by fleet's tag " + ref.FleetTag() + " only, and no node holds " +
                    ref.digest + " to verify its config digest against");
  ImageRecord record;
  record.ref = ref.text;
  record.digest = ref.digest;
  record.image_id = judged.id;
  record.found = judged.how;
  record.via = kViaPresent;
  if (const FleetTagged tag = image_internal::FleetTagOn(here, judged.id); tag.staged) {
    record.via = kViaAdopted;
    record.names = {tag.name, ref.StagedTag()};
  }
  return nlohmann::json(record);
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
  c.detail = ImageStep{kOpRemove, "", "", "", image_id};
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
  if (found->exit_code != 0) {
    // Gone (any more) is done; an engine that cannot say is not.
    const ImageLookup lookup = ParseInspect(found->exit_code, found->err + found->out);
    if (!lookup.error.empty())
      return Status::Error("on " + ctx.node->name + ": cannot tell whether image " + id +
                           " is still there: " + lookup.error);
    if (!lookup.broken) return Status::OK();
  }
  // -f: the image may carry several names; no container uses it (checked).
  return RunOnNode(ctx, ShellCommand({cli, "rmi", "-f", id})).status();
}

}  // namespace

// Only what fleet itself pulled or copied is ever removed; an image the
// node already had when fleet first looked is the operator's.
bool StagedByFleet(const ImageRecord& record) {
  return record.via == kViaPull || record.via == kViaCopy || record.via == kViaAdopted;
}

PlanChange ImageProvider::DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                                      const ResourceRecord* record, const DiffContext& ctx) const {
  const ImageRecord rec = record ? record->attributes.get<ImageRecord>() : ImageRecord();
  const std::string& id = rec.image_id;
  if (!ctx.purge || !actual.exists || id.empty() || !StagedByFleet(rec))
    return Provider::DiffDestroy(desired, actual, record, ctx);
  return RemoveChange(desired.address, desired.node, record->attributes, id,
                      "destroy --purge removes staged images");
}

namespace {

// The name an undeclared image is shown under: the manifests' name for its
// registry digest when they have one, else its repository's last part and
// the digest's first 12 digits.
std::string NameForUnknown(const Manifest& m, const std::string& tag, const std::string& digest) {
  for (const auto& [name, spec] : m.images)
    if (ParseImageRef(spec.ref).digest == digest) return name;
  std::string repo = tag.substr(0, tag.rfind(':'));
  repo = repo.substr(repo.rfind('/') + 1);
  return repo + "-" + ShortId(digest);
}

}  // namespace

std::vector<PlanChange> ImageProvider::DiffUnrecorded(const std::string& node,
                                                      const DiffContext& ctx) const {
  std::vector<PlanChange> out;
  if (ctx.all_actual == nullptr || ctx.recorded == nullptr || ctx.manifest == nullptr) return out;
  // Fleet's tags in the node's image listing, and what the probes of its
  // declared images saw: the images the declared ones are.
  std::map<std::string, FleetTagged> tagged;  // by tag
  for (const FleetTagged& t : FleetTaggedIn(ImageListing::FromJson(ctx.facts.images)))
    tagged[t.name] = t;
  std::set<std::string> declared_ids, declared_digests;
  const std::string suffix = "@" + node;
  for (const auto& [address, a] : *ctx.all_actual) {
    if (address.rfind("image.", 0) != 0 || address.size() < suffix.size() ||
        address.compare(address.size() - suffix.size(), suffix.size(), suffix) != 0 || !a.probed ||
        !a.error.empty())
      continue;
    const ImageProbe p = a.attributes.get<ImageProbe>();
    if (p.by_ref.found) declared_ids.insert(p.by_ref.id);
    if (p.by_name.found) declared_ids.insert(p.by_name.id);
    const std::string name = address.substr(6, address.size() - 6 - suffix.size());
    if (auto it = ctx.manifest->images.find(name); it != ctx.manifest->images.end())
      declared_digests.insert(ParseImageRef(it->second.ref).digest);
  }
  std::set<std::string> seen;
  if (ctx.records != nullptr)  // the state knows it under another name
    for (const ResourceRecord& r : *ctx.records)
      if (r.type == "image" && r.node == node)
        seen.insert(NormalizeImageId(r.attributes.get<ImageRecord>().image_id));
  for (const auto& [tag, t] : tagged) {
    const std::string& id = t.id;
    const std::string digest = DigestOfFleetTag(tag);
    if (declared_digests.count(digest) || declared_ids.count(id) || !seen.insert(id).second)
      continue;
    const std::string address =
        ResourceAddress("image", NameForUnknown(*ctx.manifest, tag, digest), node);
    if (ctx.recorded->count(address)) continue;  // a record: DiffOrphan decides
    if (ctx.purge && t.staged) {
      out.push_back(RemoveChange(address, node, nlohmann::json(), id,
                                 "carries fleet's tag " + tag + " but this state does not know " +
                                     "it and the manifests do not declare it on " + node +
                                     ": --purge removes it"));
      continue;
    }
    PlanChange c;
    c.address = address;
    c.type = "image";
    c.node = node;
    const std::string head = "image " + ShortId(id) + " on " + node + " carries fleet's tag " +
                             tag + " but is not in this state, and the manifests do not declare " +
                             "it there: ";
    c.reasons.push_back(
        head + (t.staged ? "fleet staged it, and `fleet apply --purge` removes it (unless a "
                           "container uses it)"
                         : "fleet found it in place (it did not pull or copy it), so --purge "
                           "leaves it; remove it by hand if it is not wanted"));
    out.push_back(std::move(c));
  }
  return out;
}

PlanChange ImageProvider::DiffOrphan(const ResourceRecord& record, const DiffContext& ctx) const {
  const ImageRecord rec = record.attributes.get<ImageRecord>();
  const std::string& id = rec.image_id;
  if (!ctx.purge || id.empty() || !StagedByFleet(rec) || !ctx.facts.reachable ||
      ctx.manifest == nullptr || !ctx.manifest->nodes.count(record.node))
    return Provider::DiffOrphan(record, ctx);
  return RemoveChange(record.address, record.node, record.attributes, id,
                      "no longer declared for " + record.node + ", and --purge was given");
}

namespace {

using ChainTarget = ImageChainDelivery::Target;

// A copy's source node, re-read at apply: the plan may be old.
struct CopyFrom {
  Transport* transport = nullptr;
  std::string node;
  std::string cli;
  std::string config;  // the image's config digest there
};

Result<CopyFrom> RecheckSource(const ImageStep& step, const ImageRef& ref, const StepContext& ctx) {
  using R = Result<CopyFrom>;
  CopyFrom src;
  src.node = step.from;
  if (ctx.manifest == nullptr || src.node.empty() || src.node == ctx.node->name ||
      !ctx.manifest->nodes.count(src.node))
    return R::Error("no usable source node ('" + src.node + "') to copy from");
  src.cli = ctx.manifest->nodes.at(src.node).container_cli;
  src.transport = ctx.node_transport ? ctx.node_transport(src.node) : nullptr;
  if (src.transport == nullptr) return R::Error("no transport to source node " + src.node);
  Status s = src.transport->Connect();
  if (!s.ok()) return s.Prefixed("source node " + src.node);
  Result<FoundImage> at_source = FindImage(src.transport, src.cli, ref, step.config);
  if (!at_source.ok()) return at_source.status().Prefixed("on source node " + src.node);
  if (!at_source->present)
    return R::Error("source node " + src.node + " does not have " + ref.Lookup() +
                    " (any more): re-plan");
  if (!step.config.empty() && at_source->id != step.config)
    return R::Error("source node " + src.node + " holds image " + at_source->id + " for " +
                    ref.Lookup() + ", the plan expected " + step.config + ": re-plan");
  src.config = at_source->id;
  return src;
}

// Already there (staged since the plan, or under another name): name it so
// the next probe finds it without a copy.
Result<ImageRecord> KeepPresent(const StepContext& ctx, const ImageRef& ref, const FoundImage& here,
                                ImageRecord record) {
  // The state's record of staging this very image stays (with the staged
  // mark the copy or pull gives): --purge removes what fleet staged, also
  // when only its naming was left to do.
  std::optional<ImageRecord> staged;
  if (ctx.record != nullptr) {
    staged = ctx.record->attributes.get<ImageRecord>();
    if (!StagedByFleet(*staged) || staged->image_id != here.id) staged.reset();
  }
  if (here.how == "by config digest") {
    std::vector<std::string> names = NamesForCopy(ref);
    if (staged && ref.pinned()) names.push_back(ref.StagedTag());
    Status s = EnsureNames(ctx.transport, ctx.node->container_cli, ctx.node->name, here.id, names,
                           ctx.progress);
    if (!s.ok()) return s;
  }
  if (staged) return *staged;
  record.image_id = here.id;
  record.via = kViaPresent;
  record.found = here.how;
  return record;
}

// LoadedNotNamed's step: the image must still be there by its config digest.
Result<ImageRecord> NameLoaded(const StepContext& ctx, const ImageRef& ref,
                               const std::string& config, const ImageRecord& record) {
  Result<FoundImage> here = FindImage(ctx.transport, ctx.node->container_cli, ref, config);
  if (!here.ok()) return here.status();
  if (!here->present)
    return Result<ImageRecord>::Error("image " + config + " is no longer on the node: plan again");
  return KeepPresent(ctx, ref, *here, record);
}

// A pull or copy the state does not know yet is recorded before it starts
// (as a serve before its start, display RAM before its reload): if fleet
// dies between the load and the save, the state still owns the image, so a
// later --purge removes it; without the record the next plan found it,
// named it for `fleet state adopt` and converged with it unrecorded
// (tests/faults/kill9.sh). If the step fails, the record names an image the
// node lacks: the next plan stages it again, --purge forgets the record.
Status RecordBeforeStaging(const StepContext& ctx, const ImageRecord& record) {
  if (ctx.record != nullptr || !ctx.checkpoint || record.image_id.empty()) return Status::OK();
  return ctx.checkpoint(nlohmann::json(record));
}

Result<ImageRecord> Pull(const StepContext& ctx, const ImageRef& ref, const std::string& config,
                         ImageRecord record) {
  const std::string& cli = ctx.node->container_cli;
  const std::string& node = ctx.node->name;
  record.image_id = config;  // "" (not known before the pull): not recorded first
  record.via = kViaPull;
  Status first = RecordBeforeStaging(ctx, record);
  if (!first.ok()) return first;
  Result<std::string> id = PullImage(ctx.transport, cli, ref, node, ctx.progress);
  if (!id.ok()) return id.status();
  if (!config.empty() && *id != config)
    return Result<ImageRecord>::Error("pulled " + ref.Lookup() + " on " + node + " is image " +
                                      *id + ", other nodes have " + config);
  if (ref.pinned()) {
    // The staged mark: fleet pulled it (DiffUnrecorded, Adopt).
    Status s = EnsureNames(ctx.transport, cli, node, *id,
                           {ref.TaggedName(), ref.FleetTag(), ref.StagedTag()}, ctx.progress);
    if (!s.ok()) return s;
  }
  record.image_id = *id;
  record.via = kViaPull;
  return record;
}

// The bytes of a copy: straight from the source node over the fabric when
// the plan routed it so, else save | load through the controller.
// The plan's direct route is checked again first: a fabric that went away
// since is the path through the controller, said so. So is a fabric on
// which no connection could be made (a link down): no byte was sent then.
Status CopyBytes(const StepContext& ctx, const FabricRoute& route, const CopySpec& spec,
                 const ChainTarget* chained) {
  if (chained != nullptr && chained->delivered)
    return FinishImageCopy(
        spec, "", chained->loaded,
        "over the fabric chain" +
            (chained->via.empty() ? "" : " (re-routed from " + chained->via + ")"),
        ctx.progress);
  if (route.direct && ctx.manifest != nullptr) {
    Result<std::string> problem = FabricRouteProblem(spec.source, spec.target, route);
    if (!problem.ok()) return problem.status();
    if (problem->empty()) {
      bool unconnected = false;
      Status s = CopyImageOverFabric(spec, route, *ctx.manifest, *ctx.settings, ctx.progress,
                                     &unconnected);
      if (!unconnected) return s;
      if (ctx.progress)
        ctx.progress("no connection over the fabric (" + s.message() + "): copying " + route.from +
                     " → " + route.to + " through the controller instead");
    } else if (ctx.progress) {
      ctx.progress("the fabric is not usable now (" + *problem +
                   "): copying through the controller instead");
    }
  }
  return CopyImage(spec, ctx.progress);
}

Result<ImageRecord> Copy(const StepContext& ctx, const ImageRef& ref, const CopyFrom& src,
                         const FabricRoute& route, ImageRecord record,
                         const ChainTarget* chained = nullptr) {
  CopySpec spec;
  spec.source = src.transport;
  spec.source_node = src.node;
  spec.source_cli = src.cli;
  spec.target = ctx.transport;
  spec.target_node = ctx.node->name;
  spec.target_cli = ctx.node->container_cli;
  spec.config = src.config;
  spec.clock = ctx.clock;
  const std::vector<std::string> names = NamesForCopy(ref);
  record.image_id = src.config;
  record.via = kViaCopy;
  record.from = src.node;
  record.names = names;
  Status s = RecordBeforeStaging(ctx, record);
  if (!s.ok()) return s;
  s = CopyBytes(ctx, route, spec, chained);
  if (!s.ok()) return s;
  std::vector<std::string> marked = names;
  marked.push_back(ref.StagedTag());  // fleet copied it (DiffUnrecorded, Adopt)
  s = EnsureNames(ctx.transport, spec.target_cli, spec.target_node, src.config, marked,
                  ctx.progress);
  if (!s.ok()) return s.Prefixed("copied, but naming it failed");
  return record;
}

// A fan-out's chain (change.copy->chain), run by the first of its steps
// for all (ctx.shared): what it did for this step's node. Null when the
// change is no part of a chain.
std::shared_ptr<const ImageChainDelivery> JoinChain(const PlanChange& change,
                                                    const std::string& config,
                                                    const StepContext& ctx) {
  if (!change.copy || change.copy->chain.size() < 2 || ctx.shared == nullptr ||
      ctx.manifest == nullptr || config.empty())
    return nullptr;
  const CopyRoute& route = *change.copy;
  const Manifest& m = *ctx.manifest;
  const ProgressFn& progress = ctx.progress;
  Clock* clock = ctx.clock;
  return ctx.shared->Once<ImageChainDelivery>(
      route.ChainKey(), [&] { return RunImageChain(route, config, m, progress, clock); });
}

Result<nlohmann::json> AsAttributes(const Result<ImageRecord>& r) {
  if (!r.ok()) return r.status();
  return nlohmann::json(*r);
}

}  // namespace

Result<nlohmann::json> ImageProvider::Apply(const PlanChange& change,
                                            const StepContext& ctx) const {
  const ImageStep step = change.detail.get<ImageStep>();
  if (step.op == kOpRemove) {
    Status s = RemoveImage(ctx, step.image_id);
    if (!s.ok()) return s;
    return nlohmann::json();  // removed: drop the record
  }
  const ImageRef ref = ParseImageRef(step.ref);
  ImageRecord record;
  record.ref = ref.text;
  record.digest = ref.digest;
  if (step.op == kOpName) return AsAttributes(NameLoaded(ctx, ref, step.config, record));
  if (step.op != kOpPull && step.op != kOpCopy)
    return Result<nlohmann::json>::Error("unknown image op '" + step.op + "'");
  CopyFrom src;
  src.config = step.config;
  if (step.op == kOpCopy) {
    Result<CopyFrom> rechecked = RecheckSource(step, ref, ctx);
    if (!rechecked.ok()) return rechecked.status();
    src = *rechecked;
  }
  std::shared_ptr<const ImageChainDelivery> chain = JoinChain(change, src.config, ctx);
  const ChainTarget* chained = nullptr;
  if (chain && chain->targets.count(ctx.node->name)) chained = &chain->targets.at(ctx.node->name);
  if (chained && chained->delivered)
    return AsAttributes(Copy(ctx, ref, src, step.route, record, chained));
  if (chained && !chained->already && !chained->on_its_own)
    return Result<nlohmann::json>::Error("not copied over the fabric chain: " + chained->problem);
  Result<FoundImage> here = FindImage(ctx.transport, ctx.node->container_cli, ref, src.config);
  if (!here.ok()) return here.status();
  if (here->present) return AsAttributes(KeepPresent(ctx, ref, *here, record));
  if (!here->broken.empty()) {
    Status s =
        RemoveBrokenImage(ctx.transport, ctx.node->container_cli, here->broken, ctx.progress);
    if (!s.ok()) return s;
  }
  if (step.op == kOpPull) return AsAttributes(Pull(ctx, ref, src.config, record));
  return AsAttributes(Copy(ctx, ref, src, step.route, record));
}

}  // namespace fleet
