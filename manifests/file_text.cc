#include "manifests/file_text.h"

#include <fcntl.h>
#include <unistd.h>

#include "manifests/own_fault.h"

namespace fleet {
namespace {

FileText Failed(const std::string& what, const std::string& display, int err) {
  FileText f;
  f.error_no = err;
  f.own_fault = IsOwnErrno(err);
  f.error = "cannot " + what + " " + display + ": " + ErrnoText(err);
  if (f.own_fault) NoteOwnFault();
  return f;
}

}  // namespace

FileText ReadFileText(const std::string& path, const std::string& display) {
  // Plain open/read (not ifstream): a stream that failed to open reads as
  // empty and hides the errno.
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) return Failed("open", display, errno);
  FileText f;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return Failed("read", display, err);
    }
    if (n == 0) break;
    f.text.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  f.ok = true;
  return f;
}

}  // namespace fleet
