// Staging a model from one node (or store) to another through the
// controller, streamed: `cat` on the source | `cat >> <blob>.incomplete` on
// the target, then a size check and a rename. Nothing lands on the
// controller's disk and at most a few MiB per stream sit in its memory.
//
// Resumable: the caller passes only the files that are not already right
// on the target, with the bytes an earlier attempt left in the .incomplete
// blob (the copy continues from there). Every file copied from its start
// is hashed on the way through (OpenSSL EVP) and checked against its blob
// name before the rename, so a corrupt source never lands as a blob.
#ifndef FLEET_PROVIDERS_MODEL_MODEL_COPY_H_
#define FLEET_PROVIDERS_MODEL_MODEL_COPY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "providers/shared/hub_remote.h"
#include "src/clock.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// A fresh transport to one side, connected, used by one stream only.
using TransportMaker = std::function<Result<std::unique_ptr<Transport>>()>;

struct CopySide {
  TransportMaker connect;
  HubLocation loc;
};

struct CopyItem {
  std::string path;  // in the snapshot
  uint64_t size = 0;
  std::string blob;     // "" when the source file is not a blob (copied as a plain file)
  uint64_t offset = 0;  // bytes already in the target's .incomplete file
};

struct CopyOptions {
  int streams = 2;   // files in flight at once (each: one connection per side)
  bool hash = true;  // check files copied from byte 0 against their blob name
  std::function<void(uint64_t bytes)> on_bytes;  // called from stream threads
  // Times the streams over the fabric: the step's (StepContext::clock).
  // Never null.
  Clock* clock = RealClock();
};

struct CopyReport {
  uint64_t bytes = 0;
  std::vector<std::string> hashed;  // paths whose content matched their blob name
};

// Copies `items` from src to dst. dst's repo folder is <cache>/models--x
// (the caller fixes a legacy layout first). Stops at the first failure.
Result<CopyReport> CopyModelFiles(const CopySide& src, const CopySide& dst,
                                  const std::vector<CopyItem>& items, const CopyOptions& options);

// The same when one node sees both folders (a store it mounts and its own
// cache, or two stores): the bytes move on that node (`cp`), not through the
// controller. `on_bytes` is called once per file.
Result<CopyReport> CopyModelFilesOnNode(Transport* t, const HubLocation& src,
                                        const HubLocation& dst, const std::vector<CopyItem>& items,
                                        const std::function<void(uint64_t bytes)>& on_bytes);

// The target-side script pieces, shared with the copy over the fabric
// (providers/model/fabric_copy.cc).
namespace model_copy_internal {

// Copies one item over connections of its own stream; sets *hashed when the
// content was checked against its blob name.
using CopyOneFn =
    std::function<Status(Transport* src, Transport* dst, const CopyItem& item, bool* hashed)>;

// Runs `copy_one` over `items`, largest first, `streams` at once, each stream
// with one connection per side. Stops at the first failure.
Result<CopyReport> CopyInStreams(const CopySide& src, const CopySide& dst,
                                 const std::vector<CopyItem>& items, int streams,
                                 const CopyOneFn& copy_one);

struct Paths {
  std::string inc;    // shell word: where the bytes go
  std::string final;  // shell word: the file once complete
  std::string link;   // shell word: the snapshot path ("" when final is it)
  std::string rel;    // the relative link text
};
// c, d, r and m (the repo folder <cache>/models--x) for a target-side script.
std::string TargetPrelude(const HubLocation& loc);
Paths TargetPaths(const CopyItem& item);
// Checks the .incomplete file's size, renames it, links the snapshot path.
std::string FinishScript(const Paths& p, const CopyItem& item);
// The target's writer of a stream (after TargetPrelude): makes the folders,
// starts the .incomplete file afresh at offset 0, appends stdin to it.
std::string CopyWriterCommand(const Paths& p, const CopyItem& item);
// A node's copy of `from` (a shell word: the source's file as the node sees
// it) into the .incomplete file, whole or from item.offset on (after both
// sides' preludes); exits 1 when it fails.
std::string CopyOnNodeCommand(const std::string& from, const Paths& p, const CopyItem& item);
}  // namespace model_copy_internal

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_COPY_H_
