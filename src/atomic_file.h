// The one way fleet replaces a file on the controller: a reader sees the
// old content or the new, whole, and once the call returns OK the new one
// survives a power loss. The state, its backup and history, saved plans,
// watch reports and LocalTransport::WriteFile all write through it.
#ifndef FLEET_SRC_ATOMIC_FILE_H_
#define FLEET_SRC_ATOMIC_FILE_H_

#include <functional>
#include <string>
#include <string_view>

#include "src/status.h"

namespace fleet {

struct AtomicWriteOptions {
  // The new file's mode, set on the temp file with fchmod, so that the
  // umask cannot widen or narrow it. 0600: the state and what holds
  // secrets (plans, reports) are their owner's only.
  int mode = 0600;
  // true: the temp file is "<dir>/.<base>.fleet-tmp.XXXXXX" (mkostemp),
  // for writers that may write the same path at once. false:
  // "<path>.tmp.<pid>", a name the state store finds again and removes
  // when the process that left it has died.
  bool unique_temp = false;
  // Runs once the temp file is durable, just before the rename (the state
  // store's backup of the old file). An error stops the write.
  std::function<Status()> before_rename;
};

// Writes `data` to a temp file in `path`'s directory, fsyncs it, renames it
// over `path` and fsyncs the directory. On an error before the rename the
// temp file is removed and `path` is as it was. Errors read
// "<what> <file>: <reason>" (e.g. "fsync /x/state.json.tmp.12: ...").
// *renamed (may be null) says whether the rename happened: an error after
// it (the directory's fsync) means the new content is in place but may not
// survive a power loss.
Status WriteFileAtomic(const std::string& path, std::string_view data,
                       const AtomicWriteOptions& options = {}, bool* renamed = nullptr);

}  // namespace fleet

#endif  // FLEET_SRC_ATOMIC_FILE_H_
