// The per-file bind list of a model: every file of a snapshot resolved to
// the real blob behind it, to be mounted read-only at its snapshot path.
//
// Why: a runtime that opens shards with O_NOFOLLOW gets ELOOP on the hub
// cache's symlinks (the log's EXL3 incident). Binding each real file at its
// snapshot path gives the container regular files only, with the names the
// loader expects.
#ifndef FLEET_PROVIDERS_SHARED_BIND_LIST_H_
#define FLEET_PROVIDERS_SHARED_BIND_LIST_H_

#include <string>
#include <vector>

#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct BindMount {
  std::string host;       // absolute, every symlink resolved: a regular file
  std::string container;  // where the container sees it
};

// One snapshot file as the node resolved it (what the bind-list script
// prints): its path in the snapshot, the fully resolved path ("" when it
// does not resolve) and whether that is a regular file.
struct ResolvedFile {
  std::string path;
  std::string real;
  bool regular = false;
};

// Builds the list from resolved files. `container_root` is the folder the
// snapshot appears as in the container ("/model"); empty: the snapshot's own
// path `snapshot_path` (e.g. /srv/hf/hub/models--a--b/snapshots/<rev>).
// Fails, naming the file, when a file does not resolve to a regular file.
Result<std::vector<BindMount>> BuildBindList(const std::vector<ResolvedFile>& files,
                                             const std::string& snapshot_path,
                                             const std::string& container_root);

// Resolves the snapshot of `repo`@`revision` in the hub cache `cache` on the
// node behind `t` (hub or legacy layout) and builds its bind list. One
// command on the node.
Result<std::vector<BindMount>> ModelBindList(Transport* t, const std::string& cache,
                                             const std::string& repo, const std::string& revision,
                                             const std::string& container_root);

// "host<TAB>container\n" per mount.
std::string FormatBindList(const std::vector<BindMount>& mounts);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_BIND_LIST_H_
