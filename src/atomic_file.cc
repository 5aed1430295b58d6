#include "src/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace fleet {
namespace {

Status SysError(const std::string& what, const std::string& path, int err) {
  return Status::Error(what + " " + path + ": " + std::strerror(err));
}

// Closes the descriptor it holds when it goes out of scope.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Close() {
    if (fd_ < 0) return 0;
    const int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

Status FsyncFd(int fd, const std::string& path) {
  while (::fsync(fd) != 0)
    if (errno != EINTR) return SysError("fsync", path, errno);
  return Status::OK();
}

std::string DirName(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

Status WriteFileAtomic(const std::string& path, std::string_view data,
                       const AtomicWriteOptions& options, bool* renamed) {
  if (renamed != nullptr) *renamed = false;
  const std::string dir = DirName(path);
  const size_t slash = path.find_last_of('/');
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty()) return Status::Error("write " + path + ": not a file name");

  std::string tmp;
  int raw = -1;
  if (options.unique_temp) {
    tmp = (dir == "/" ? "" : dir) + "/." + base + ".fleet-tmp.XXXXXX";
    raw = ::mkostemp(tmp.data(), O_CLOEXEC);
  } else {
    tmp = path + ".tmp." + std::to_string(::getpid());
    ::unlink(tmp.c_str());  // ours, from an earlier write that failed
    do {
      raw = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    } while (raw < 0 && errno == EINTR);
  }
  if (raw < 0) return SysError("create", tmp, errno);
  Fd fd(raw);

  Status s;
  if (::fchmod(fd.get(), static_cast<mode_t>(options.mode)) != 0) s = SysError("chmod", tmp, errno);
  while (s.ok() && !data.empty()) {
    const ssize_t n = ::write(fd.get(), data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      s = SysError("write", tmp, errno);
      break;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  if (s.ok()) s = FsyncFd(fd.get(), tmp);
  if (s.ok() && fd.Close() != 0) s = SysError("close", tmp, errno);
  if (s.ok() && options.before_rename) s = options.before_rename();
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = SysError("rename over", path, errno);
  if (!s.ok()) {
    fd.Close();
    ::unlink(tmp.c_str());
    return s;
  }
  if (renamed != nullptr) *renamed = true;
  // The rename itself must survive a crash too.
  int dfd;
  do {
    dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } while (dfd < 0 && errno == EINTR);
  if (dfd < 0) return SysError("open directory", dir, errno);
  Fd dir_fd(dfd);
  return FsyncFd(dir_fd.get(), dir);
}

}  // namespace fleet
