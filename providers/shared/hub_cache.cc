#include "providers/shared/hub_cache.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <sstream>
#include <tuple>

#include "providers/shared/hub_probe_sh.h"
#include "providers/shared/node_script.h"
#include "src/json_number.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

std::vector<std::string> SplitTabs(const std::string& line, size_t max_fields) {
  std::vector<std::string> f;
  size_t start = 0;
  while (f.size() + 1 < max_fields) {
    size_t tab = line.find('\t', start);
    if (tab == std::string::npos) break;
    f.push_back(line.substr(start, tab - start));
    start = tab + 1;
  }
  f.push_back(line.substr(start));
  return f;
}

// The blob a link points at: the last component when the one before it is
// "blobs" ("../../blobs/abc" -> "abc").
std::string BlobOf(const std::string& target) {
  size_t slash = target.rfind('/');
  if (slash == std::string::npos) return "";
  std::string dir = target.substr(0, slash);
  size_t prev = dir.rfind('/');
  std::string parent = prev == std::string::npos ? dir : dir.substr(prev + 1);
  if (parent != "blobs") return "";
  // The name goes into paths on other nodes: hash-like names only (a link
  // to anything else is copied as a plain file).
  std::string blob = target.substr(slash + 1);
  bool safe = !blob.empty() && blob != "." && blob != "..";
  for (char c : blob)
    safe =
        safe && (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.');
  return safe ? blob : "";
}

Json DiskToJson(const DiskFree& d) {
  return {{"known", d.known}, {"path", d.path}, {"mount", d.mount}, {"avail_bytes", d.avail_bytes}};
}

DiskFree DiskFromJson(const Json& j) {
  DiskFree d;
  if (!j.is_object()) return d;
  d.known = j.value("known", false);
  d.path = j.value("path", "");
  d.mount = j.value("mount", "");
  d.avail_bytes = IntegerOr(j, "avail_bytes", uint64_t{0});
  return d;
}

LinkKind LinkKindFromName(const std::string& s) {
  if (s == "relative") return LinkKind::kRelative;
  if (s == "absolute") return LinkKind::kAbsolute;
  if (s == "broken") return LinkKind::kBroken;
  return LinkKind::kNone;
}

}  // namespace

uint64_t LeadingDecimal(const std::string& s) {
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') break;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

std::string HubRepoDirName(std::string_view repo) {
  std::string out = "models--";
  for (char c : repo) {
    if (c == '/')
      out += "--";
    else
      out += c;
  }
  return out;
}

std::string NodePathWord(const std::string& path) {
  if (path == "~") return "\"$HOME\"";
  if (path.rfind("~/", 0) == 0) return "\"$HOME\"/" + ShellQuote(path.substr(2));
  return ShellQuote(path);
}

const char* LinkKindName(LinkKind k) {
  switch (k) {
    case LinkKind::kRelative:
      return "relative";
    case LinkKind::kAbsolute:
      return "absolute";
    case LinkKind::kBroken:
      return "broken";
    default:
      return "none";
  }
}

std::string HubProbeScript(const HubProbeTarget& t) {
  // Inline, not `sh -c`: the probe runs every plan on every node. The
  // cache and the stores' paths as NodePathWord spells them (a leading ~ is
  // the node's $HOME).
  std::vector<std::string> stores;
  for (const auto& [name, path] : t.stores) {
    stores.push_back(ShellQuote(name));
    stores.push_back(NodePathWord(path));
  }
  return ScriptWithValuesAndArgs({{"c", NodePathWord(t.cache)},
                                  {"d", ShellQuote(HubRepoDirName(t.repo))},
                                  {"r", ShellQuote(t.branch.empty() ? t.revision : "")},
                                  {"b", ShellQuote(t.branch)},
                                  {"q", "\"" + std::string(kInstalledProbe) + "\""}},
                                 stores, kHubProbeScript, kHubProbeScriptSize);
}

namespace {

// The entries' one order, by path and then by every other field: a listing
// that names a path twice (a hostile or broken node) must still read back
// from the plan file as it was printed (the hub_cache fuzz target found
// std::sort by path alone reordering such twins).
bool EntryBefore(const SnapshotEntry& a, const SnapshotEntry& b) {
  return std::tie(a.path, a.link, a.target, a.blob, a.size, a.resolved) <
         std::tie(b.path, b.link, b.target, b.blob, b.size, b.resolved);
}

// One "e" record of the listing: %y %Y %P %l (type, type of the target,
// path, link target).
std::optional<SnapshotEntry> ParseEntryRecord(const std::string& rest) {
  std::vector<std::string> e = SplitTabs(rest, 4);
  if (e.size() != 4) return std::nullopt;
  SnapshotEntry entry;
  entry.path = e[2];
  if (e[0] == "l") {
    entry.target = e[3];
    entry.blob = BlobOf(entry.target);
    if (e[1] == "N" || e[1] == "L" || e[1] == "?")
      entry.link = LinkKind::kBroken;
    else if (!entry.target.empty() && entry.target[0] == '/')
      entry.link = LinkKind::kAbsolute;
    else
      entry.link = LinkKind::kRelative;
  }
  return entry;
}

}  // namespace

StagingLock ParseStagingLockOwner(const std::string& line) {
  StagingLock l;
  l.owner = line;
  std::istringstream o(line);
  std::string pid, since;
  o >> pid >> l.host >> l.boot_id >> since >> l.controller;
  l.pid =
      static_cast<long>(std::min<uint64_t>(LeadingDecimal(pid), std::numeric_limits<long>::max()));
  l.since = static_cast<int64_t>(std::min<uint64_t>(LeadingDecimal(since), INT64_MAX));
  return l;
}

HubProbe ParseHubProbe(const std::string& output) {
  HubProbe p;
  std::map<std::string, uint64_t> sizes;
  int bad_names = 0;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f = SplitTabs(line, 2);
    if (f.size() < 2) continue;
    const std::string& k = f[0];
    const std::string& rest = f[1];
    if (k == "layout") {
      p.layout = rest;
    } else if (k == "repolink") {
      p.repo_link = rest;
    } else if (k == "ref") {
      std::vector<std::string> r = SplitTabs(rest, 2);
      if (r.size() == 2) p.refs[r[0]] = r[1];
    } else if (k == "snap") {
      p.snapshots.push_back(rest);
    } else if (k == "top") {
      p.top_files.push_back(rest);
    } else if (k == "snapshot") {
      p.snapshot = true;
    } else if (k == "stagedmark") {
      p.staged_mark = true;
    } else if (k == "e") {
      if (std::optional<SnapshotEntry> entry = ParseEntryRecord(rest))
        p.entries.push_back(std::move(*entry));
    } else if (k == "s") {
      std::vector<std::string> e = SplitTabs(rest, 2);  // %s %P
      if (e.size() == 2) sizes[e[1]] = LeadingDecimal(e[0]);
    } else if (k == "inc") {
      std::vector<std::string> e = SplitTabs(rest, 3);  // %s %T@ %f
      if (e.size() != 3) continue;
      IncompleteBlob b;
      b.size = LeadingDecimal(e[0]);
      b.mtime = static_cast<int64_t>(LeadingDecimal(e[1]));
      b.name = e[2];
      p.incomplete.push_back(std::move(b));
    } else if (k == "now") {
      p.now = static_cast<int64_t>(LeadingDecimal(rest));
    } else if (k == "lock") {
      p.lock = ParseStagingLockOwner(rest);
    } else if (k == "lockalive") {
      if (p.lock) p.lock->pid_alive = true;
    } else if (k == "df") {
      std::vector<std::string> e = SplitTabs(rest, 3);  // avail_k mount path
      if (e.size() != 3) continue;
      p.disk.known = true;
      p.disk.avail_bytes = LeadingDecimal(e[0]) * 1024;
      p.disk.mount = e[1];
      p.disk.path = e[2];
    } else if (k == "dfstore") {
      std::vector<std::string> e = SplitTabs(rest, 3);  // name avail_k mount
      if (e.size() != 3) continue;
      DiskFree d;
      d.known = true;
      d.avail_bytes = LeadingDecimal(e[1]) * 1024;
      d.mount = e[2];
      p.stores[e[0]] = d;
    } else if (k == "err") {
      p.errors.push_back(rest);
    } else if (k == "badname") {
      ++bad_names;
    } else if (k == "resolved") {
      p.floating = true;
      p.resolved = rest;
    }
  }
  if (bad_names > 0)
    p.errors.push_back(std::to_string(bad_names) +
                       " name(s) in the snapshot hold a tab or a newline, which fleet cannot "
                       "list safely: rename them");
  for (SnapshotEntry& e : p.entries) {
    auto it = sizes.find(e.path);
    if (it != sizes.end() && e.link != LinkKind::kBroken) {
      e.resolved = true;
      e.size = it->second;
    }
  }
  std::sort(p.entries.begin(), p.entries.end(), EntryBefore);
  return p;
}

bool IsCommitId(const std::string& s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool IsSafeBranchName(const std::string& s) {
  if (s.empty() || s.front() == '-') return false;
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-' &&
        c != '/')
      return false;
  // Every component a plain name: no "", ".", ".." (no way out of refs/).
  size_t start = 0;
  while (true) {
    const size_t slash = s.find('/', start);
    const std::string part = s.substr(start, slash == std::string::npos ? slash : slash - start);
    if (part.empty() || part == "." || part == "..") return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

bool HubProbe::IsCommit() const { return IsCommitId(resolved); }

const SnapshotEntry* HubProbe::Find(const std::string& path) const {
  auto it =
      std::lower_bound(entries.begin(), entries.end(), path,
                       [](const SnapshotEntry& e, const std::string& p) { return e.path < p; });
  return it != entries.end() && it->path == path ? &*it : nullptr;
}

Json HubProbe::ToJson() const {
  Json files = Json::array();
  for (const SnapshotEntry& e : entries) {
    Json f = {{"path", e.path},
              {"link", LinkKindName(e.link)},
              {"size", e.size},
              {"resolved", e.resolved}};
    if (!e.target.empty()) f["target"] = e.target;
    if (!e.blob.empty()) f["blob"] = e.blob;
    files.push_back(std::move(f));
  }
  Json inc = Json::array();
  for (const IncompleteBlob& b : incomplete)
    inc.push_back({{"name", b.name}, {"size", b.size}, {"mtime", b.mtime}});
  Json j = {
      {"layout", layout}, {"refs", refs},      {"snapshots", snapshots}, {"snapshot", snapshot},
      {"files", files},   {"incomplete", inc}, {"top_files", top_files}, {"disk", DiskToJson(disk)},
      {"now", now},       {"errors", errors}};
  if (!repo_link.empty()) j["repo_link"] = repo_link;
  if (floating) j["resolved"] = resolved;
  if (staged_mark) j["staged_mark"] = true;
  if (lock)
    j["lock"] = {{"owner", lock->owner}, {"pid", lock->pid},
                 {"host", lock->host},   {"boot_id", lock->boot_id},
                 {"since", lock->since}, {"pid_alive", lock->pid_alive}};
  if (lock && !lock->controller.empty()) j["lock"]["controller"] = lock->controller;
  if (lock && lock->controller_gone) j["lock"]["controller_gone"] = true;
  Json st = Json::object();
  for (const auto& [name, d] : stores) st[name] = DiskToJson(d);
  j["stores"] = st;
  return j;
}

HubProbe HubProbe::FromJson(const Json& j) {
  HubProbe p;
  if (!j.is_object()) return p;
  p.layout = j.value("layout", "absent");
  p.repo_link = j.value("repo_link", "");
  if (j.contains("refs") && j["refs"].is_object())
    for (auto it = j["refs"].begin(); it != j["refs"].end(); ++it)
      if (it.value().is_string()) p.refs[it.key()] = it.value().get<std::string>();
  if (j.contains("snapshots") && j["snapshots"].is_array())
    for (const Json& s : j["snapshots"])
      if (s.is_string()) p.snapshots.push_back(s.get<std::string>());
  p.snapshot = j.value("snapshot", false);
  p.staged_mark = j.value("staged_mark", false);
  if (j.contains("resolved") && j["resolved"].is_string()) {
    p.floating = true;
    p.resolved = j["resolved"].get<std::string>();
  }
  if (j.contains("files") && j["files"].is_array())
    for (const Json& f : j["files"]) {
      if (!f.is_object()) continue;
      SnapshotEntry e;
      e.path = f.value("path", "");
      e.link = LinkKindFromName(f.value("link", "none"));
      e.size = IntegerOr(f, "size", uint64_t{0});
      e.resolved = f.value("resolved", false);
      e.target = f.value("target", "");
      e.blob = f.value("blob", "");
      p.entries.push_back(std::move(e));
    }
  if (j.contains("incomplete") && j["incomplete"].is_array())
    for (const Json& b : j["incomplete"]) {
      if (!b.is_object()) continue;
      p.incomplete.push_back({b.value("name", ""), IntegerOr(b, "size", uint64_t{0}),
                              IntegerOr(b, "mtime", int64_t{0})});
    }
  if (j.contains("top_files") && j["top_files"].is_array())
    for (const Json& s : j["top_files"])
      if (s.is_string()) p.top_files.push_back(s.get<std::string>());
  p.disk = DiskFromJson(j.value("disk", Json::object()));
  p.now = IntegerOr(j, "now", int64_t{0});
  if (j.contains("errors") && j["errors"].is_array())
    for (const Json& s : j["errors"])
      if (s.is_string()) p.errors.push_back(s.get<std::string>());
  if (j.contains("lock") && j["lock"].is_object()) {
    const Json& l = j["lock"];
    StagingLock lock;
    lock.owner = l.value("owner", "");
    lock.pid = IntegerOr(l, "pid", 0L);
    lock.host = l.value("host", "");
    lock.boot_id = l.value("boot_id", "");
    lock.since = IntegerOr(l, "since", int64_t{0});
    lock.pid_alive = l.value("pid_alive", false);
    lock.controller = l.value("controller", "");
    lock.controller_gone = l.value("controller_gone", false);
    p.lock = lock;
  }
  if (j.contains("stores") && j["stores"].is_object())
    for (auto it = j["stores"].begin(); it != j["stores"].end(); ++it)
      p.stores[it.key()] = DiskFromJson(it.value());
  std::sort(p.entries.begin(), p.entries.end(), EntryBefore);
  return p;
}

std::string HumanBytes(uint64_t bytes) {
  static const char* kUnits[] = {"B", "kB", "MB", "GB", "TB", "PB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1000.0 && u < 5) {
    v /= 1000.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  else if (v >= 100.0)
    snprintf(buf, sizeof buf, "%.0f %s", v, kUnits[u]);
  else
    snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[u]);
  return buf;
}

}  // namespace fleet
