#include "providers/shared/blob_hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <thread>

namespace fleet {

namespace {

bool IsLowerHex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

std::string Hex(const unsigned char* d, unsigned n) {
  static const char* kHex = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (unsigned i = 0; i < n; ++i) {
    s += kHex[d[i] >> 4];
    s += kHex[d[i] & 15];
  }
  return s;
}

}  // namespace

BlobHashKind BlobHashKindOf(std::string_view blob) {
  if (blob.size() == 64 && IsLowerHex(blob)) return BlobHashKind::kSha256;
  if (blob.size() == 40 && IsLowerHex(blob)) return BlobHashKind::kGitSha1;
  return BlobHashKind::kNone;
}

BlobHasher::BlobHasher(BlobHashKind kind, uint64_t size) {
  if (kind == BlobHashKind::kNone) return;
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) return;
  const EVP_MD* md = kind == BlobHashKind::kSha256 ? EVP_sha256() : EVP_sha1();
  if (EVP_DigestInit_ex(ctx, md, nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    return;
  }
  ctx_ = ctx;
  if (kind == BlobHashKind::kGitSha1) {
    std::string header = "blob " + std::to_string(size);
    header.push_back('\0');
    Update(header);
  }
}

BlobHasher::~BlobHasher() {
  if (ctx_ != nullptr) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_));
}

void BlobHasher::Update(std::string_view data) {
  if (ctx_ != nullptr) EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data.data(), data.size());
}

std::string BlobHasher::HexDigest() {
  if (ctx_ == nullptr) return "";
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned n = 0;
  if (EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), d, &n) != 1) return "";
  return Hex(d, n);
}

std::string HashBlobData(BlobHashKind kind, std::string_view data) {
  BlobHasher h(kind, data.size());
  h.Update(data);
  return h.HexDigest();
}

namespace {

// Why mmap: hashing a page-cached file through read() copies every byte out
// of the page cache first; mapped, the node's fleet-probe measured ~15% less
// CPU per byte (system time about halved), and this hasher the same
// (bench/model_bench.sh's "fleet EVP hasher" lines). Files are mapped a
// window at a time, hashed in steps that move `bytes_done`.
constexpr uint64_t kLocalWindowBytes = uint64_t{64} << 20;
constexpr uint64_t kLocalStepBytes = uint64_t{8} << 20;

// Why the touch ahead: each new 4 KiB page's first read waits for its
// address translation and first lines; prefetching a byte two pages ahead
// starts both while the current page is hashed (fleet-probe's HashStep
// explains the figures; it is one file compiled on nodes, so it cannot share
// this). The touch stays inside the mapping: a pointer past its end is
// undefined.
constexpr size_t kPageBytes = 4096;
constexpr size_t kTouchAheadBytes = 2 * kPageBytes;

// Feeds `n` bytes at `data` to `h`, page by page, touching ahead.
// REQUIRES: `mapped` (>= n) bytes from `data` on are mapped.
void UpdateTouchingAhead(const char* data, size_t n, size_t mapped, BlobHasher* h) {
  for (size_t at = 0; at < n; at += kPageBytes) {
    if (at + kTouchAheadBytes < mapped) __builtin_prefetch(data + at + kTouchAheadBytes);
    h->Update(std::string_view(data + at, std::min(kPageBytes, n - at)));
  }
}

// A file that shrinks under its mapping raises SIGBUS in the thread reading
// it: that thread's jump (set while it hashes a window) makes it an error for
// that file. Any other SIGBUS goes to the handler there was before.
thread_local sigjmp_buf* tls_sigbus_jump = nullptr;
struct sigaction previous_sigbus;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  if (tls_sigbus_jump != nullptr) siglongjmp(*tls_sigbus_jump, 1);
  if (previous_sigbus.sa_flags & SA_SIGINFO) {
    previous_sigbus.sa_sigaction(sig, info, context);
  } else if (previous_sigbus.sa_handler != SIG_DFL && previous_sigbus.sa_handler != SIG_IGN) {
    previous_sigbus.sa_handler(sig);
  } else {
    signal(sig, SIG_DFL);
    raise(sig);
  }
}

void CatchSigbusOnce() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = OnSigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous_sigbus);
  });
}

// Feeds bytes [offset, offset + length) of `fd` to `h` through a mapping;
// "" or why not.
std::string HashWindow(int fd, uint64_t offset, size_t length, BlobHasher* h,
                       std::atomic<uint64_t>* bytes_done) {
  void* data = mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset));
  if (data == MAP_FAILED) return std::string("mmap: ") + strerror(errno);
  madvise(data, length, MADV_SEQUENTIAL);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {  // 1: the handler's blocked SIGBUS is unblocked again
    tls_sigbus_jump = nullptr;
    munmap(data, length);
    return "the file shrank while it was hashed";
  }
  tls_sigbus_jump = &jump;
  for (size_t at = 0; at < length;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kLocalStepBytes, length - at));
    UpdateTouchingAhead(static_cast<const char*>(data) + at, n, length - at, h);
    at += n;
    if (bytes_done) *bytes_done += n;
  }
  tls_sigbus_jump = nullptr;
  munmap(data, length);
  return "";
}

// Hashes one job's file into `r` (digest, or error).
void HashLocalFile(const LocalHashJob& job, std::atomic<uint64_t>* bytes_done, LocalHashResult* r) {
  r->path = job.path;
  r->blob = job.blob;
  const BlobHashKind kind = BlobHashKindOf(r->blob);
  if (kind == BlobHashKind::kNone) {
    r->error = "blob name '" + r->blob + "' is not a sha256 or git sha1";
    return;
  }
  const int fd = open(r->path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  if (fd < 0) {
    r->error = std::string("cannot open: ") + strerror(errno);
    return;
  }
  struct stat before, after;
  if (fstat(fd, &before) != 0 || !S_ISREG(before.st_mode)) {
    r->error = "cannot hash: not a regular file";
    close(fd);
    return;
  }
  const uint64_t size = static_cast<uint64_t>(before.st_size);
  BlobHasher h(kind, size);
  for (uint64_t offset = 0; r->error.empty() && offset < size; offset += kLocalWindowBytes)
    r->error =
        HashWindow(fd, offset, static_cast<size_t>(std::min(kLocalWindowBytes, size - offset)), &h,
                   bytes_done);
  if (r->error.empty() && (fstat(fd, &after) != 0 || after.st_size != before.st_size))
    r->error = "the file changed size while it was hashed";
  close(fd);
  if (r->error.empty()) r->digest = h.HexDigest();
}

}  // namespace

std::vector<LocalHashResult> HashLocalFiles(const std::vector<LocalHashJob>& jobs, int threads,
                                            std::atomic<uint64_t>* bytes_done) {
  CatchSigbusOnce();
  std::vector<LocalHashResult> out(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++)
      HashLocalFile(jobs[i], bytes_done, &out[i]);
  };
  int n = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace fleet
