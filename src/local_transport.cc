// LocalTransport: /bin/sh -c on this machine, with pipes and poll(2).
#include "src/local_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include "src/atomic_file.h"
#include "src/clock.h"
#include "src/transport_internal.h"

extern char** environ;

namespace fleet {

namespace {

using transport_internal::CommandSnippet;
using transport_internal::StdinPull;

constexpr size_t kChunk = 64 * 1024;

// Owns one file descriptor.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Close(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void Reset(int fd) {
    Close();
    fd_ = fd;
  }
  int Close() {
    int rc = 0;
    if (fd_ >= 0) rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_ = -1;
};

// Blocks SIGPIPE in the calling thread for its lifetime, so that writing to
// a command that stopped reading its stdin fails with EPIPE instead of
// killing fleet; the SIGPIPE such a write raised is consumed before the
// thread's mask is restored. Process-wide SIG_IGN would be simpler but is
// not a library's decision to make.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_set_);
    sigaddset(&pipe_set_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_set_, &old_);
  }
  ~SigpipeBlock() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero = {0, 0};
        sigtimedwait(&pipe_set_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_set_;
  sigset_t old_;
  bool was_pending_ = false;
};

std::string Errno(int err) { return std::strerror(err); }

bool MakePipe(Fd* read_end, Fd* write_end) {
  // O_CLOEXEC: another thread may spawn a command at the same moment, and a
  // copy of our stdin write end in its child would keep ours from seeing EOF.
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  return true;
}

void SetNonBlocking(int fd) {
  int flags = fcntl(fd, F_GETFL);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Spawns /bin/sh -c command with the given stdio; returns the pid or -errno.
pid_t SpawnShell(const std::string& command, int in_fd, int out_fd, int err_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in_fd, 0);
  posix_spawn_file_actions_adddup2(&actions, out_fd, 1);
  posix_spawn_file_actions_adddup2(&actions, err_fd, 2);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // The child must not inherit our blocked SIGPIPE nor an ignored one: a
  // pipeline on the node relies on SIGPIPE to stop early writers.
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int sig : {SIGPIPE, SIGINT, SIGQUIT, SIGHUP, SIGTERM, SIGCHLD}) {
    sigaddset(&defaults, sig);
  }
  posix_spawnattr_setsigdefault(&attr, &defaults);
  // Its own process group, so an abort can stop the whole pipeline, as it
  // would end on a remote node when the channel closes.
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP);

  const char* argv[] = {"sh", "-c", command.c_str(), nullptr};
  pid_t pid = -1;
  int rc = posix_spawn(&pid, "/bin/sh", &actions, &attr, const_cast<char* const*>(argv), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  return rc == 0 ? pid : -rc;
}

int WaitChild(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return status;
}

// Stops an aborted command: TERM to its process group, KILL if it is still
// there after two seconds (a command may ignore TERM), then reaps it.
void StopChild(pid_t pid) {
  kill(-pid, SIGTERM);
  for (int i = 0; i < 100; ++i) {
    int status = 0;
    pid_t rc = waitpid(pid, &status, WNOHANG);
    if (rc == pid || (rc < 0 && errno != EINTR)) return;
    RealClock()->SleepFor(std::chrono::milliseconds(20));
  }
  kill(-pid, SIGKILL);
  WaitChild(pid);
}

// Feeds the command's stdin from `input` and drains its stdout and stderr
// into `result` (stdout to `on_stdout` when given) until all three pipes
// are closed, or the consumer stops reading (*aborted). Returns an I/O
// error, or "".
std::string PumpPipes(const StdinPull& input,
                      const std::function<bool(std::string_view)>* on_stdout, Fd* in_w, Fd* out_r,
                      Fd* err_r, CommandResult* result, bool* aborted) {
  std::string buffer(kChunk, '\0');
  std::string_view pending;
  while (in_w->open() || out_r->open() || err_r->open()) {
    while (in_w->open() && pending.empty()) {
      if (!input(&pending)) in_w->Close();
    }
    pollfd fds[3];
    int nfds = 0;
    int in_idx = -1, out_idx = -1, err_idx = -1;
    if (in_w->open()) {
      in_idx = nfds;
      fds[nfds++] = {in_w->get(), POLLOUT, 0};
    }
    if (out_r->open()) {
      out_idx = nfds;
      fds[nfds++] = {out_r->get(), POLLIN, 0};
    }
    if (err_r->open()) {
      err_idx = nfds;
      fds[nfds++] = {err_r->get(), POLLIN, 0};
    }
    if (poll(fds, nfds, -1) < 0) {
      if (errno == EINTR) continue;
      return "poll: " + Errno(errno);
    }
    if (in_idx >= 0 && fds[in_idx].revents != 0) {
      ssize_t n = write(in_w->get(), pending.data(), std::min(pending.size(), kChunk));
      if (n > 0) {
        pending.remove_prefix(static_cast<size_t>(n));
      } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
        // EPIPE: the command exited or closed its stdin without reading it
        // all. Like sshd, drop the rest: its exit code tells the story.
        in_w->Close();
      }
    }
    for (int idx : {out_idx, err_idx}) {
      if (idx < 0 || fds[idx].revents == 0) continue;
      Fd& fd = idx == out_idx ? *out_r : *err_r;
      ssize_t n = read(fd.get(), buffer.data(), buffer.size());
      if (n > 0) {
        std::string_view chunk(buffer.data(), static_cast<size_t>(n));
        if (idx == err_idx) {
          result->err.append(chunk);
        } else if (on_stdout != nullptr) {
          if (!(*on_stdout)(chunk)) *aborted = true;
        } else {
          result->out.append(chunk);
        }
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        fd.Close();
      }
    }
    if (*aborted) return "";
  }
  return "";
}

// The exit code of a reaped command; a signal is -1 and a note on stderr.
void SetExitCode(int status, CommandResult* result) {
  if (WIFEXITED(status)) {
    result->exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result->exit_code = -1;
    const char* name = sigabbrev_np(WTERMSIG(status));
    transport_internal::AppendSignalNote(name != nullptr ? name : std::to_string(WTERMSIG(status)),
                                         WCOREDUMP(status), &result->err);
  }
}

}  // namespace

LocalTransport::LocalTransport(const SshEndpoint& endpoint)
    : describe_((endpoint.node.empty() ? std::string("local") : endpoint.node) + " (local)") {}

Status LocalTransport::Connect() { return Status::OK(); }

std::string LocalTransport::Describe() const { return describe_; }

Result<CommandResult> LocalTransport::Run(const std::string& command, std::string_view stdin_data) {
  return Exec(command, transport_internal::StdinFromView(stdin_data), nullptr);
}

Result<CommandResult> LocalTransport::RunStreaming(
    const std::string& command, const std::function<bool(std::string_view chunk)>& on_stdout,
    std::string_view stdin_data) {
  return Exec(command, transport_internal::StdinFromView(stdin_data), &on_stdout);
}

Result<CommandResult> LocalTransport::RunWithInput(
    const std::string& command, const std::function<bool(std::string* chunk)>& next_stdin) {
  return Exec(command, transport_internal::StdinFromCallback(next_stdin), nullptr);
}

Result<CommandResult> LocalTransport::Exec(const std::string& command, const StdinPull& input,
                                           const std::function<bool(std::string_view)>* on_stdout) {
  auto fail = [&](const std::string& what) {
    return Result<CommandResult>::Error(describe_ + ": running " + CommandSnippet(command) + ": " +
                                        what);
  };
  Fd in_r, in_w, out_r, out_w, err_r, err_w;
  if (!MakePipe(&in_r, &in_w) || !MakePipe(&out_r, &out_w) || !MakePipe(&err_r, &err_w)) {
    return fail("cannot create pipes: " + Errno(errno));
  }
  SigpipeBlock sigpipe_block;
  pid_t pid = SpawnShell(command, in_r.get(), out_w.get(), err_w.get());
  if (pid < 0) return fail("cannot start /bin/sh: " + Errno(-pid));
  // Our copies of the child's ends must go, or we never see EOF.
  in_r.Close();
  out_w.Close();
  err_w.Close();
  SetNonBlocking(in_w.get());
  SetNonBlocking(out_r.get());
  SetNonBlocking(err_r.get());

  CommandResult result;
  bool aborted = false;
  const std::string io_error =
      PumpPipes(input, on_stdout, &in_w, &out_r, &err_r, &result, &aborted);
  if (aborted || !io_error.empty()) {
    in_w.Close();
    out_r.Close();
    err_r.Close();
    StopChild(pid);
    if (aborted) return fail("aborted: the output consumer stopped reading");
    return fail(io_error);
  }
  int status = WaitChild(pid);
  if (status < 0) return fail("waitpid: " + Errno(errno));
  SetExitCode(status, &result);
  return result;
}

Status LocalTransport::WriteFile(const std::string& remote_path, std::string_view data, int mode) {
  // A unique temp name: two steps may write the same node file at once.
  AtomicWriteOptions options;
  options.mode = mode;
  options.unique_temp = true;
  Status s = WriteFileAtomic(remote_path, data, options);
  return s.ok() ? s : Status::Error(describe_ + ": writing " + remote_path + ": " + s.message());
}

}  // namespace fleet
