// The Hugging Face hub cache as huggingface_hub writes it, read from a node:
//
//   <cache>/models--org--name/refs/main             commit id (no newline)
//   <cache>/models--org--name/snapshots/<rev>/<file> RELATIVE symlink
//                                                     -> ../../blobs/<blob>
//   <cache>/models--org--name/blobs/<blob>           sha256 (LFS) or git sha1
//   <cache>/models--org--name/blobs/<blob>.incomplete an unfinished download
//
// and the legacy layout some huggingface_hub versions write when given the
// parent of `hub/` as --cache-dir: `<cache>/../models--org--name`.
//
// HubProbeScript is the read-only sh fragment of the model probe (the hot
// path: a handful of processes, whatever the number of files); ParseHubProbe
// turns its output into a HubProbe. The script needs GNU find (-printf).
#ifndef FLEET_PROVIDERS_SHARED_HUB_CACHE_H_
#define FLEET_PROVIDERS_SHARED_HUB_CACHE_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fleet {

// "org/name" -> "models--org--name".
std::string HubRepoDirName(std::string_view repo);

// A node-side path as one shell word: "~/x" becomes "$HOME"/'x' so that the
// node expands it; anything else goes through ShellQuote.
std::string NodePathWord(const std::string& path);

enum class LinkKind {
  kNone,      // a regular file
  kRelative,  // what huggingface_hub writes; survives a different mount root
  kAbsolute,  // dangles inside a container whose mount root differs
  kBroken,    // the target does not exist (or loops)
};
const char* LinkKindName(LinkKind k);

// One file of a snapshot.
struct SnapshotEntry {
  std::string path;  // relative to snapshots/<rev>/
  LinkKind link = LinkKind::kNone;
  std::string target;     // the link text, "" for a regular file
  std::string blob;       // blob name when the target is .../blobs/<name>
  bool resolved = false;  // the path leads to a regular file
  uint64_t size = 0;      // of that file (the link followed)
};

struct IncompleteBlob {
  std::string name;  // "<blob>.incomplete"
  uint64_t size = 0;
  int64_t mtime = 0;  // seconds since the epoch
};

// The staging lock fleet holds on a node while it writes a model
// (<cache>/.fleet-staging-<dir>.lock/owner: "pid host boot_id start
// controller").
struct StagingLock {
  std::string owner;  // the raw owner line
  long pid = 0;       // the keeper shell's, on `host`
  std::string host;
  std::string boot_id;
  int64_t since = 0;
  // The fleet process the keeper works for: ThisControllerId() of it. Empty
  // in a lock an older fleet took.
  std::string controller;
  bool pid_alive = false;  // kill -0 on the probed node
  // `controller` names a fleet process of the controller's host that is
  // gone (ControllerIsGone), judged where the probe's output was read; apply
  // then ends the keeper and takes the lock over.
  bool controller_gone = false;
};

// The fields of an owner line; missing or malformed ones stay unset.
StagingLock ParseStagingLockOwner(const std::string& line);

struct DiskFree {
  bool known = false;
  std::string path;   // the path df was asked about
  std::string mount;  // its mount point
  uint64_t avail_bytes = 0;
};

struct HubProbe {
  std::string layout = "absent";            // "hub" | "legacy" | "absent"
  std::string repo_link;                    // <cache>/<dir> is a symlink to this
  std::map<std::string, std::string> refs;  // "main" -> commit
  std::vector<std::string> snapshots;       // revisions with a snapshot folder
  bool snapshot = false;                    // snapshots/<rev>/ exists
  std::vector<SnapshotEntry> entries;       // sorted by path
  std::vector<IncompleteBlob> incomplete;
  std::vector<std::string> top_files;  // files beside refs/ (e.g. a `.done` marker)
  bool staged_mark = false;            // fleet staged this revision here (staged_mark.h)
  std::optional<StagingLock> lock;
  DiskFree disk;                           // of the cache's filesystem
  std::map<std::string, DiskFree> stores;  // by store name: stores this node mounts
  int64_t now = 0;                         // node clock, when there are .incomplete blobs
  std::vector<std::string> errors;         // the probe could not read something
  // A floating revision (a branch): refs/<branch> was read and the
  // snapshot it names listed. `resolved` is what the ref file holds as read
  // ("" when there is none); IsCommit() says whether it names a commit.
  bool floating = false;
  std::string resolved;
  bool IsCommit() const;

  nlohmann::json ToJson() const;
  static HubProbe FromJson(const nlohmann::json& j);
  const SnapshotEntry* Find(const std::string& path) const;
};

struct HubProbeTarget {
  std::string cache;     // the hub cache folder (node's paths.hf_cache or a store's path)
  std::string repo;      // org/name
  std::string revision;  // 40 hex (ignored when `branch` is set)
  // Other stores the node mounts, for "a store that fits": (name, path).
  std::vector<std::pair<std::string, std::string>> stores;
  // A floating revision: the snapshot listed is the one refs/<branch> names
  // on the node (read in the same round trip).
  std::string branch;
};

// The read-only sh fragment. Every interpolated value is quoted.
std::string HubProbeScript(const HubProbeTarget& t);

// Parses what HubProbeScript printed. Unknown lines are ignored.
HubProbe ParseHubProbe(const std::string& output);

// 40 lowercase hex digits: a commit id as the hub cache writes it.
bool IsCommitId(const std::string& s);

// A branch name that is safe to read as refs/<branch> (no "..", no leading
// "/", git's usual characters).
bool IsSafeBranchName(const std::string& s);

// "1.5 GB", "636 GB", "12 MB", "512 B" (decimal units, like the hub shows).
std::string HumanBytes(uint64_t bytes);

// The decimal digits `s` starts with as a number (0 when none): how the
// probes' sizes, pids and times are read; stops at the first non-digit.
uint64_t LeadingDecimal(const std::string& s);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_HUB_CACHE_H_
