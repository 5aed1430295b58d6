// Blob hashes of the hub cache, computed with OpenSSL EVP while streaming.
//
// A blob's name is its content hash: sha256 hex (64 digits) for LFS files
// (the weights), git's blob sha1 (40 digits: sha1("blob <size>\0" + data))
// for the small files git stores itself (config.json, tokenizer files).
// So every file of a snapshot can be checked against its own name.
#ifndef FLEET_PROVIDERS_SHARED_BLOB_HASH_H_
#define FLEET_PROVIDERS_SHARED_BLOB_HASH_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "src/status.h"

namespace fleet {

enum class BlobHashKind { kNone, kSha256, kGitSha1 };

// From the blob's name: 64 lowercase hex -> sha256, 40 -> git sha1.
BlobHashKind BlobHashKindOf(std::string_view blob);

// Incremental hash of one blob (EVP; thread-compatible, one per stream).
class BlobHasher {
 public:
  // `size` is the blob's full size (git's sha1 hashes it first).
  BlobHasher(BlobHashKind kind, uint64_t size);
  ~BlobHasher();
  BlobHasher(const BlobHasher&) = delete;
  BlobHasher& operator=(const BlobHasher&) = delete;
  void Update(std::string_view data);
  std::string HexDigest();  // finishes; call once
  bool ok() const { return ctx_ != nullptr; }

 private:
  void* ctx_ = nullptr;  // EVP_MD_CTX*
};

// Hashes `data` whole (tests, small files).
std::string HashBlobData(BlobHashKind kind, std::string_view data);

// sh, for a node: sets $sha256 to the command that prints the sha256 of its
// stdin (or of its file arguments) as "HEX ...": OpenSSL's CLI where the
// node has it (the CPU's SHA extensions: 1.8 GB per CPU-second here against
// coreutils' sha256sum's 0.35), else sha256sum. Unquoted, it splits into
// its words.
inline constexpr char kChooseSha256Cli[] =
    "if command -v openssl >/dev/null 2>&1; then sha256='openssl dgst -sha256 -r'; "
    "else sha256=sha256sum; fi\n";

struct LocalHashJob {
  std::string path;  // file on this machine
  std::string blob;  // expected name (its kind decides the hash)
};
struct LocalHashResult {
  std::string path;
  std::string blob;
  std::string digest;  // "" when the file could not be read
  std::string error;
  bool ok() const { return error.empty() && digest == blob; }
};

// Hashes the files on this machine, `threads` files at a time, each mapped
// (mmap) 64 MiB at a time. `bytes_done` (optional) is bumped as data is
// hashed (8 MiB steps), for progress. A file that is not a regular file, or
// shrinks or grows while it is hashed, gets an error, not a digest (a SIGBUS
// from a shrinking mapping is caught: the first call installs a handler that
// passes any other SIGBUS on to the one before).
std::vector<LocalHashResult> HashLocalFiles(const std::vector<LocalHashJob>& jobs, int threads,
                                            std::atomic<uint64_t>* bytes_done = nullptr);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_BLOB_HASH_H_
