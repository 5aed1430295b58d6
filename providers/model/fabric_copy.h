// Staging model files from one node to another over the fabric: each file
// is one FabricStream (`cat`/`tail -c +N` on the source, `cat >>` into the
// blob's .incomplete file on the target), no byte through the controller.
// Resumable per file as the copy through the controller (an .incomplete
// file is continued from its size). The target hashes every file whole
// before the rename (sha256sum for LFS blobs, git's blob sha1 for the
// others), resumed ones included: a corrupt or foreign stream never lands
// under a blob name, and the partial file is removed.
#ifndef FLEET_PROVIDERS_MODEL_FABRIC_COPY_H_
#define FLEET_PROVIDERS_MODEL_FABRIC_COPY_H_

#include "providers/model/model_copy.h"
#include "providers/shared/fabric_route.h"
#include "src/provider.h"

namespace fleet {

// `route` must be direct. options.streams files at once, each with its own
// pair of transports; options.on_bytes is called once per finished file.
// *unconnected is set (with the error) when a file's stream could make no
// connection over the fabric (no byte of it sent): the caller may copy
// what is still missing another way.
Result<CopyReport> CopyModelFilesOverFabric(const CopySide& src, const CopySide& dst,
                                            const std::vector<CopyItem>& items,
                                            const FabricRoute& route, const CopyOptions& options,
                                            bool* unconnected);

// The target-side check of a finished .incomplete file against its blob
// name (shell; exits 1 and removes the file on a mismatch). "" when the
// item has no hashable blob name.
std::string VerifyOnTargetScript(const model_copy_internal::Paths& p, const CopyItem& item);

// A target's writer of a whole file (offset 0; after TargetPrelude, it
// makes its folders) that hashes the bytes as it writes them, so the check
// overlaps the stream instead of re-reading the file after it (a chain's
// hops): its stdout is the hash line of what it
// received (`openssl dgst -sha256 -r`'s, or sha256sum's where the node has
// no openssl; sha1sum's of git's blob header and the data).
// Plain `cat` into the .incomplete file when the item has no hashable blob
// name. A short write shows in FinishScript's size check.
std::string HashingWriterCommand(const model_copy_internal::Paths& p, const CopyItem& item);

// "" when a HashingWriterCommand's stdout `out` names the item's blob (or
// the item has no hashable blob name), else why not.
std::string StreamHashProblem(std::string_view out, const CopyItem& item);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_FABRIC_COPY_H_
