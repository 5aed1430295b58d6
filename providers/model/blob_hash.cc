#include "providers/model/blob_hash.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
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

std::vector<LocalHashResult> HashLocalFiles(const std::vector<LocalHashJob>& jobs, int threads,
                                            std::atomic<uint64_t>* bytes_done) {
  std::vector<LocalHashResult> out(jobs.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    std::vector<char> buf(1 << 20);
    for (size_t i = next++; i < jobs.size(); i = next++) {
      LocalHashResult& r = out[i];
      r.path = jobs[i].path;
      r.blob = jobs[i].blob;
      BlobHashKind kind = BlobHashKindOf(r.blob);
      if (kind == BlobHashKind::kNone) {
        r.error = "blob name '" + r.blob + "' is not a sha256 or git sha1";
        continue;
      }
      int fd = open(r.path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) {
        r.error = std::string("cannot open: ") + strerror(errno);
        continue;
      }
      posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
      off_t size = lseek(fd, 0, SEEK_END);
      lseek(fd, 0, SEEK_SET);
      BlobHasher h(kind, size < 0 ? 0 : static_cast<uint64_t>(size));
      while (true) {
        ssize_t n = read(fd, buf.data(), buf.size());
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
          r.error = std::string("read error: ") + strerror(errno);
          break;
        }
        if (n == 0) break;
        h.Update(std::string_view(buf.data(), static_cast<size_t>(n)));
        if (bytes_done) *bytes_done += static_cast<uint64_t>(n);
      }
      close(fd);
      if (r.error.empty()) r.digest = h.HexDigest();
    }
  };
  int n = std::max(1, std::min<int>(threads, static_cast<int>(jobs.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace fleet
