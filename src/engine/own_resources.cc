#include "src/engine/own_resources.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "manifests/own_fault.h"

namespace fleet {

FileLimit RaiseFileLimit() {
  FileLimit out;
  rlimit l{};
  if (getrlimit(RLIMIT_NOFILE, &l) != 0) {
    out.error = "getrlimit: " + ErrnoText(errno);
    return out;
  }
  if (l.rlim_cur < l.rlim_max) {
    rlimit raised = l;
    raised.rlim_cur = l.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
      l = raised;
    else
      out.error = "setrlimit: " + ErrnoText(errno);
  }
  out.soft = l.rlim_cur;
  out.hard = l.rlim_max;
  return out;
}

Status CheckOwnHeadroom() {
  const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) {
    NoteOwnFault();
    return Status::OwnFault("cannot open a socket: " + ErrnoText(errno));
  }
  close(s);
  const int f = open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (f < 0) {
    NoteOwnFault();
    return Status::OwnFault("cannot open a file: " + ErrnoText(errno));
  }
  close(f);
  return Status::OK();
}

}  // namespace fleet
