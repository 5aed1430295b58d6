#include "providers/shared/completeness.h"

#include <algorithm>
#include <set>

#include "src/json_number.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Files that are never legitimately empty.
bool MustNotBeEmpty(const std::string& path) {
  return EndsWith(path, ".safetensors") || EndsWith(path, ".json") || EndsWith(path, ".bin") ||
         EndsWith(path, ".gguf") || EndsWith(path, ".pt") || EndsWith(path, ".model");
}

std::string Dir(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash + 1);
}

}  // namespace

Listing ListingFromProbe(const HubProbe& p) {
  Listing l;
  for (const SnapshotEntry& e : p.entries)
    if (e.resolved) l.push_back({e.path, e.size, e.blob});
  return l;
}

uint64_t ListingBytes(const Listing& l) {
  uint64_t n = 0;
  for (const ListedFile& f : l) n += f.size;
  return n;
}

Json ListingToJson(const Listing& l) {
  Json a = Json::array();
  for (const ListedFile& f : l) {
    Json o = {{"path", f.path}, {"size", f.size}};
    if (!f.blob.empty()) o["blob"] = f.blob;
    a.push_back(std::move(o));
  }
  return a;
}

Listing ListingFromJson(const Json& j) {
  Listing l;
  if (!j.is_array()) return l;
  for (const Json& o : j) {
    if (!o.is_object() || !o.contains("path") || !o["path"].is_string()) continue;
    l.push_back(
        {o["path"].get<std::string>(), IntegerOr(o, "size", uint64_t{0}), o.value("blob", "")});
  }
  std::sort(l.begin(), l.end(),
            [](const ListedFile& a, const ListedFile& b) { return a.path < b.path; });
  return l;
}

Completeness CheckCompleteness(const HubProbe& target, const Listing* reference,
                               const std::string& revision) {
  Completeness c;
  c.snapshot = target.snapshot;
  std::map<std::string, uint64_t> partial;  // blob -> bytes already in <blob>.incomplete
  for (const IncompleteBlob& b : target.incomplete) {
    std::string blob = b.name.substr(0, b.name.size() - std::string(".incomplete").size());
    partial[blob] = b.size;
    c.notes.push_back("blobs/" + b.name + ": " + HumanBytes(b.size) +
                      " (an interrupted or running download)");
  }
  std::set<std::string> snapshots(target.snapshots.begin(), target.snapshots.end());
  for (const auto& [ref, commit] : target.refs)
    if (!commit.empty() && !snapshots.count(commit))
      c.notes.push_back("refs/" + ref + " points at " + commit + ", which has no snapshot");
  if (target.layout == "legacy")
    c.notes.push_back("legacy layout: the repo folder is beside hub/, not in it");

  for (const SnapshotEntry& e : target.entries) {
    if (e.link == LinkKind::kBroken) {
      // With a reference, the loop below names it (missing or not).
      if (!reference) c.problems.push_back(e.path + ": broken symlink -> " + e.target);
    } else if (e.link == LinkKind::kAbsolute) {
      c.absolute_links.push_back(e.path);
      c.notes.push_back(e.path + ": absolute symlink -> " + e.target +
                        " (dangles in a container with another mount root)");
    }
    if (!reference && e.resolved && e.size == 0 && MustNotBeEmpty(e.path))
      c.problems.push_back(e.path + ": 0 bytes");
    if (!reference && e.resolved && EndsWith(e.path, ".safetensors") && e.size > 0 && e.size < 8)
      c.problems.push_back(e.path + ": " + std::to_string(e.size) +
                           " bytes, too short for a safetensors header");
  }

  if (!target.snapshot) {
    c.problems.insert(c.problems.begin(),
                      "no snapshot of revision " + revision +
                          (target.layout == "absent" ? " (the repo is not in the cache)" : ""));
  }
  if (reference) {
    c.verified_against_reference = true;
    c.files_total = reference->size();
    for (const ListedFile& f : *reference) {
      const SnapshotEntry* e = target.Find(f.path);
      bool ok = false;
      if (!target.snapshot) {
        // Already said: no snapshot at all.
      } else if (e == nullptr) {
        c.problems.push_back(f.path + ": missing");
      } else if (e->link == LinkKind::kBroken) {
        c.problems.push_back(f.path + ": broken symlink -> " + e->target);
      } else if (!e->resolved) {
        c.problems.push_back(f.path + ": not a regular file");
      } else if (e->size != f.size) {
        c.problems.push_back(f.path + ": " + std::to_string(e->size) + " bytes, expected " +
                             std::to_string(f.size) +
                             (e->size < f.size ? " (truncated)" : " (too long)"));
      } else {
        ok = true;
      }
      if (ok) {
        ++c.files_ok;
        c.present_bytes += f.size;
      } else {
        uint64_t have = 0;
        if (auto it = partial.find(f.blob); !f.blob.empty() && it != partial.end())
          have = std::min(it->second, f.size);
        c.missing_bytes += f.size - have;
      }
    }
  } else {
    c.files_total = target.entries.size();
    for (const SnapshotEntry& e : target.entries)
      if (e.resolved) {
        ++c.files_ok;
        c.present_bytes += e.size;
      }
    if (target.snapshot && target.entries.empty())
      c.problems.push_back("snapshot " + revision + " is empty");
  }
  c.complete = c.problems.empty();
  if (!c.complete)
    for (const std::string& t : target.top_files)
      c.notes.push_back("marker " + t + " present (a marker is not proof of a download)");
  return c;
}

std::vector<std::string> CheckSafetensors(const std::vector<HeaderSample>& headers,
                                          const std::map<std::string, std::string>& indexes,
                                          const Listing& present) {
  std::vector<std::string> problems;
  std::map<std::string, SafetensorsHeader> parsed;
  std::set<std::string> sampled;
  for (const HeaderSample& h : headers) {
    sampled.insert(h.path);
    Result<SafetensorsHeader> r = ParseSafetensorsHeader(h.header, h.header_length, h.size);
    if (!r.ok())
      problems.push_back(h.path + ": " + r.status().message());
    else
      parsed[h.path] = std::move(r.value());
  }
  std::set<std::string> files;
  for (const ListedFile& f : present) {
    files.insert(f.path);
    if (EndsWith(f.path, ".safetensors") && !sampled.count(f.path))
      problems.push_back(f.path + ": header not read");
  }
  for (const auto& [index_path, content] : indexes) {
    Json j = Json::parse(content, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      problems.push_back(index_path + ": not JSON");
      continue;
    }
    auto wm = j.find("weight_map");
    if (wm == j.end() || !wm->is_object()) {
      problems.push_back(index_path + ": no weight_map");
      continue;
    }
    const std::string dir = Dir(index_path);
    std::map<std::string, std::vector<std::string>> by_shard;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) {
        problems.push_back(index_path + ": weight_map entry '" + it.key() + "' is not a file name");
        continue;
      }
      by_shard[dir + it.value().get<std::string>()].push_back(it.key());
    }
    for (const auto& [shard, tensors] : by_shard) {
      if (!files.count(shard)) {
        problems.push_back(shard + ": missing (" + index_path + " maps " +
                           std::to_string(tensors.size()) + " tensors to it)");
        continue;
      }
      auto h = parsed.find(shard);
      if (h == parsed.end()) continue;  // its header problem is already listed
      std::set<std::string> names;
      for (const SafetensorsTensor& t : h->second.tensors) names.insert(t.name);
      size_t absent = 0;
      std::string first;
      for (const std::string& t : tensors)
        if (!names.count(t) && absent++ == 0) first = t;
      if (absent > 0)
        problems.push_back(shard + ": " + std::to_string(absent) + " tensor(s) of " + index_path +
                           " not in its header (first: " + first + ")");
    }
  }
  return problems;
}

std::string JoinProblems(const std::vector<std::string>& problems, size_t max) {
  std::string out;
  for (size_t i = 0; i < problems.size() && i < max; ++i) out += (i ? "; " : "") + problems[i];
  if (problems.size() > max) out += "; and " + std::to_string(problems.size() - max) + " more";
  return out;
}

}  // namespace fleet
