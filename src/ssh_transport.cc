// SshTransport over libssh 0.10.
//
// One exec channel per command, driven by channel callbacks: every byte the
// server sends is handed to our sink as soon as libssh decodes it, so libssh
// never holds unread data (its window re-grows by itself) and a single poll(2)
// on the session socket is the only wait. Stdin is written only into the
// window the server has granted, so a write never blocks while the server
// waits for us to drain output: no size of input or output can deadlock.
#include "src/ssh_transport.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>  // ssh_send_keepalive: a global request that wants a reply
#include <libssh/sftp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "manifests/own_fault.h"
#include "src/clock.h"
#include "src/shell_quote.h"
#include "src/transport_internal.h"

namespace fleet {

namespace {

using transport_internal::CommandSnippet;
using transport_internal::StdinPull;
using SteadyClock = std::chrono::steady_clock;

// Largest stdin piece per ssh_channel_write: small enough that output keeps
// being drained between pieces.
constexpr size_t kWriteChunk = 256 * 1024;
// SFTP write size: OpenSSH's sftp-server takes messages up to 256 KiB.
constexpr size_t kSftpChunk = 64 * 1024;
// Upper bound on one wait, so that a wake-up libssh could have swallowed
// costs at most this much rather than a hang.
constexpr int kMaxWaitMs = 1000;
// Keepalive intervals without a packet from the server before a command
// gives up (the same count TCP_USER_TIMEOUT uses; see SetKeepalive).
constexpr int kStallKeepalives = 3;

void InitLibssh() {
  static std::once_flag once;
  std::call_once(once, [] { ssh_init(); });
}

// What one command's channel has produced so far. Filled by the callbacks.
struct ChannelState {
  const std::function<bool(std::string_view)>* on_stdout = nullptr;
  CommandResult result;
  uint64_t bytes_in = 0;
  bool aborted = false;
  bool eof = false;
  bool got_status = false;
  bool got_signal = false;
  std::string signal_name;
  bool core_dumped = false;
};

int OnData(ssh_session, ssh_channel, void* data, uint32_t len, int is_stderr, void* userdata) {
  auto* st = static_cast<ChannelState*>(userdata);
  std::string_view chunk(static_cast<const char*>(data), len);
  st->bytes_in += len;
  if (is_stderr != 0) {
    st->result.err.append(chunk);
  } else if (st->on_stdout != nullptr) {
    // Once aborted, the rest is dropped; an exception must not unwind
    // through libssh's C frames.
    if (!st->aborted) {
      try {
        if (!(*st->on_stdout)(chunk)) st->aborted = true;
      } catch (...) {
        st->aborted = true;
      }
    }
  } else {
    st->result.out.append(chunk);
  }
  return static_cast<int>(len);
}

void OnEof(ssh_session, ssh_channel, void* userdata) {
  static_cast<ChannelState*>(userdata)->eof = true;
}

void OnExitStatus(ssh_session, ssh_channel, int exit_status, void* userdata) {
  auto* st = static_cast<ChannelState*>(userdata);
  st->result.exit_code = exit_status;
  st->got_status = true;
}

void OnExitSignal(ssh_session, ssh_channel, const char* signal, int core, const char*, const char*,
                  void* userdata) {
  auto* st = static_cast<ChannelState*>(userdata);
  st->got_signal = true;
  st->signal_name = signal != nullptr ? signal : "?";
  st->core_dumped = core != 0;
}

std::string FormatAddress(const std::string& address, int port) {
  if (address.find(':') != std::string::npos) {
    return "[" + address + "]:" + std::to_string(port);
  }
  return address + ":" + std::to_string(port);
}

// How OpenSSH names the host in known_hosts.
std::string KnownHostsName(const std::string& address, int port) {
  if (port == 22) return address;
  return "[" + address + "]:" + std::to_string(port);
}

// A command for the person to paste: the address quoted once (a safe one
// reads as it is).
std::string KeyscanCommand(const std::string& address, int port) {
  if (port == 22) return ShellCommand({"ssh-keyscan", address});
  return ShellCommand({"ssh-keyscan", "-p", std::to_string(port), address});
}

std::string RandomHex() {
  static std::mutex mu;
  static std::random_device device;
  static std::mt19937_64 rng(device());
  std::lock_guard<std::mutex> lock(mu);
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

std::string SftpErrorName(int code) {
  switch (code) {
    case SSH_FX_EOF:
      return "end of file";
    case SSH_FX_NO_SUCH_FILE:
      return "no such file or directory";
    case SSH_FX_PERMISSION_DENIED:
      return "permission denied";
    case SSH_FX_FAILURE:
      return "failure (disk full, or not a directory?)";
    case SSH_FX_NO_CONNECTION:
    case SSH_FX_CONNECTION_LOST:
      return "connection lost";
    case SSH_FX_OP_UNSUPPORTED:
      return "operation not supported";
    case SSH_FX_FILE_ALREADY_EXISTS:
      return "file already exists";
    case SSH_FX_WRITE_PROTECT:
      return "read-only file system";
    default:
      return "SFTP error " + std::to_string(code);
  }
}

// Kernel-side liveness for an otherwise silent connection; see the header.
void SetKeepalive(int fd, int keepalive_s) {
  if (fd < 0 || keepalive_s <= 0) return;
  int on = 1;
  int idle = keepalive_s;
  int count = 3;
  unsigned int user_timeout_ms = static_cast<unsigned int>(keepalive_s) * 3000;
  setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &idle, sizeof(idle));
  setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &count, sizeof(count));
  setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout_ms, sizeof(user_timeout_ms));
}

}  // namespace

Status ConnectFailure(const std::string& libssh_error, long timeout_s) {
  // libssh's words when socket() failed (EMFILE...): the controller's own
  // failure, not a dark node. It reports no errno for it.
  if (libssh_error.find("Socket create failed") != std::string::npos)
    return Status::OwnFault("cannot connect: the controller's own failure: " + libssh_error);
  return Status::Unreachable("cannot connect (timeout " + std::to_string(timeout_s) +
                             " s): " + libssh_error);
}

SshTransport::SshTransport(const SshEndpoint& endpoint)
    : endpoint_(endpoint),
      user_(endpoint.user.empty() ? transport_internal::CurrentUserName() : endpoint.user),
      identity_(transport_internal::ExpandHome(endpoint.identity)),
      known_hosts_(transport_internal::ExpandHome(endpoint.known_hosts)),
      describe_(endpoint.node + " (" + user_ + "@" +
                FormatAddress(endpoint.address, endpoint.port) + ")"),
      rx_counter_(std::make_unique<ssh_counter_struct>()) {
  InitLibssh();
}

SshTransport::~SshTransport() {
  std::lock_guard<std::mutex> lock(mu_);
  DisconnectLocked();
}

std::string SshTransport::Describe() const { return describe_; }

int SshTransport::LocalPort() {
  std::lock_guard<std::mutex> l(mu_);
  if (session_ == nullptr) return 0;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(ssh_get_fd(session_), reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
}

std::string SshTransport::LibsshError() const {
  if (session_ == nullptr) return "no session";
  const char* e = ssh_get_error(session_);
  return (e != nullptr && *e != '\0') ? e : "unknown libssh error";
}

void SshTransport::DisconnectLocked() {
  if (session_ != nullptr) {
    if (ssh_is_connected(session_) != 0) ssh_disconnect(session_);
    ssh_free(session_);
    session_ = nullptr;
  }
  broken_ = false;
}

Status SshTransport::Connect() {
  std::lock_guard<std::mutex> lock(mu_);
  if (SessionLooksAliveLocked()) return Status::OK();
  return ConnectLocked().Prefixed(describe_);
}

bool SshTransport::SessionLooksAliveLocked() {
  if (session_ == nullptr || broken_ || ssh_is_connected(session_) == 0) {
    return false;
  }
  // A peer that closed the connection while we were idle (sshd restarted,
  // ClientAliveCountMax, a reboot) has left EOF or an error on the socket.
  char byte;
  ssize_t n = recv(ssh_get_fd(session_), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return false;
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
    return false;
  }
  return true;
}

// Errors from here on are "what failed: detail"; public callers prefix them
// with Describe() (and the command).
Status SshTransport::ConnectLocked() {
  constexpr int kHandshakeAttempts = 3;
  Status s = ConnectOnceLocked();
  for (int attempt = 1; !s.ok() && handshake_dropped_ && attempt < kHandshakeAttempts; ++attempt) {
    RealClock()->SleepFor(std::chrono::milliseconds(500 * attempt));
    s = ConnectOnceLocked();
  }
  if (!s.ok() && handshake_dropped_)
    return Status::Error(s.message() +
                         " (the server dropped the connection during the handshake, " +
                         std::to_string(kHandshakeAttempts) + " attempts)");
  return s;
}

Status SshTransport::ConnectOnceLocked() {
  DisconnectLocked();
  handshake_dropped_ = false;
  if (known_hosts_.empty()) {
    return Status::Error(
        "no known_hosts file given; refusing to connect without strict "
        "host-key checking");
  }
  session_ = ssh_new();
  if (session_ == nullptr) return Status::Error("ssh_new failed");
  ssh_set_counters(session_, nullptr, rx_counter_.get());

  int port = endpoint_.port;
  int one = 1;
  bool process_config = false;
  long timeout_s = endpoint_.connect_timeout_s > 0 ? endpoint_.connect_timeout_s : 10;
  struct Option {
    ssh_options_e key;
    const void* value;
    const char* name;
  };
  const Option options[] = {
      {SSH_OPTIONS_HOST, endpoint_.address.c_str(), "host"},
      {SSH_OPTIONS_PORT, &port, "port"},
      {SSH_OPTIONS_USER, user_.c_str(), "user"},
      // Without TCP_NODELAY small packets wait on delayed ACKs: an 8 MiB
      // SFTP upload took 7.6 s instead of 0.1 s.
      {SSH_OPTIONS_NODELAY, &one, "nodelay"},
      // ~/.ssh/config must not change what the manifests say.
      {SSH_OPTIONS_PROCESS_CONFIG, &process_config, "process_config"},
      {SSH_OPTIONS_KNOWNHOSTS, known_hosts_.c_str(), "known_hosts"},
      // Only the endpoint's file is trusted, never the system-wide one.
      {SSH_OPTIONS_GLOBAL_KNOWNHOSTS, "/dev/null", "global_known_hosts"},
      {SSH_OPTIONS_STRICTHOSTKEYCHECK, &one, "strict_host_key_check"},
      {SSH_OPTIONS_TIMEOUT, &timeout_s, "timeout"},
  };
  for (const Option& o : options) {
    if (o.key == SSH_OPTIONS_USER && user_.empty()) continue;
    if (ssh_options_set(session_, o.key, o.value) != SSH_OK) {
      Status s = Status::Error(std::string("setting ssh option ") + o.name + ": " + LibsshError());
      DisconnectLocked();
      return s;
    }
  }
  if (ssh_connect(session_) != SSH_OK) {
    // Refused, timed out, no route: the node is not there (maybe powered
    // off). Host-key and auth failures come later and are not this.
    Status s = ConnectFailure(LibsshError(), timeout_s);
    if (s.own_fault()) NoteOwnFault();
    DisconnectLocked();
    return s;
  }
  Status s = CheckHostKeyLocked();
  if (s.ok()) s = AuthenticateLocked();
  if (!s.ok()) {
    DisconnectLocked();
    return s;
  }
  SetKeepalive(ssh_get_fd(session_), endpoint_.keepalive_s);
  return Status::OK();
}

Status SshTransport::CheckHostKeyLocked() {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session_, &key) != SSH_OK) {
    return Status::Error("cannot read the server's host key: " + LibsshError());
  }
  std::string type = ssh_key_type_to_char(ssh_key_type(key));
  std::string fingerprint = "(unknown fingerprint)";
  unsigned char* hash = nullptr;
  size_t hash_len = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &hash_len) == SSH_OK) {
    char* fp = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, hash_len);
    if (fp != nullptr) {
      fingerprint = fp;
      ssh_string_free_char(fp);
    }
    ssh_clean_pubkey_hash(&hash);
  }
  std::string line;
  char* b64 = nullptr;
  if (ssh_pki_export_pubkey_base64(key, &b64) == SSH_OK) {
    line = KnownHostsName(endpoint_.address, endpoint_.port) + " " + type + " " + b64;
    ssh_string_free_char(b64);
  }
  ssh_key_free(key);

  const std::string offered = type + " " + fingerprint;
  const std::string how_to_add =
      "check the fingerprint out of band (`" + KeyscanCommand(endpoint_.address, endpoint_.port) +
      " | ssh-keygen -lf -`), then add this line to " + known_hosts_ + ": " + line;
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return Status::OK();
    case SSH_KNOWN_HOSTS_CHANGED:
      return Status::Error("host key has CHANGED (" + offered + "), known_hosts " + known_hosts_ +
                           " says otherwise; refusing (possible man-in-the-middle or a "
                           "re-installed node; fix the known_hosts entry)");
    case SSH_KNOWN_HOSTS_OTHER:
      return Status::Error("host key type changed: the node offers " + offered +
                           " but known_hosts " + known_hosts_ +
                           " holds a key of another type for it; refusing (possible "
                           "man-in-the-middle or a re-installed node). If the new key is "
                           "genuine, " +
                           how_to_add);
    case SSH_KNOWN_HOSTS_NOT_FOUND:
    case SSH_KNOWN_HOSTS_UNKNOWN:
      // libssh 0.10 answers UNKNOWN for a missing file too: say which.
      if (access(known_hosts_.c_str(), F_OK) != 0) {
        return Status::Error("known_hosts file " + known_hosts_ + " does not exist, so host key " +
                             offered + " cannot be verified; refusing. To trust it, " + how_to_add);
      }
      return Status::Error("host key " + offered + " is not in known_hosts " + known_hosts_ +
                           "; refusing. To trust it, " + how_to_add);
    case SSH_KNOWN_HOSTS_ERROR:
    default:
      return Status::Error("cannot check the host key against known_hosts " + known_hosts_ + ": " +
                           LibsshError());
  }
}

Status SshTransport::AuthenticateLocked() {
  std::vector<std::string> tried;
  if (!identity_.empty()) {
    ssh_key key = nullptr;
    if (ssh_pki_import_privkey_file(identity_.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
      tried.push_back("identity " + identity_ +
                      ": cannot load the private key (missing, unreadable, "
                      "or passphrase-protected: use ssh-agent for those)");
    } else {
      int rc = ssh_userauth_publickey(session_, nullptr, key);
      ssh_key_free(key);
      if (rc == SSH_AUTH_SUCCESS) return Status::OK();
      if (rc == SSH_AUTH_ERROR) {
        // Not a refusal: the session failed (the server went away).
        handshake_dropped_ = true;
        return Status::Error("authenticating as " + user_ + " with identity " + identity_ + ": " +
                             LibsshError());
      }
      tried.push_back("identity " + identity_ + ": public key refused by the server (is it in ~" +
                      user_ + "/.ssh/authorized_keys?)");
    }
  } else {
    tried.push_back("no identity file given");
  }
  const char* agent = std::getenv("SSH_AUTH_SOCK");
  if (agent != nullptr && *agent != '\0') {
    int rc = ssh_userauth_agent(session_, nullptr);
    if (rc == SSH_AUTH_SUCCESS) return Status::OK();
    if (rc == SSH_AUTH_ERROR) {
      tried.push_back(std::string("ssh-agent (") + agent + "): " + LibsshError());
    } else {
      tried.push_back(std::string("ssh-agent (") + agent + "): no key accepted");
    }
  } else {
    tried.push_back("ssh-agent: SSH_AUTH_SOCK not set");
  }
  std::string msg = "authentication failed for user " + user_ + " (identity " +
                    (identity_.empty() ? std::string("none") : identity_) + "): ";
  for (size_t i = 0; i < tried.size(); ++i) {
    if (i > 0) msg += "; ";
    msg += tried[i];
  }
  return Status::Error(msg);
}

Result<CommandResult> SshTransport::Run(const std::string& command, std::string_view stdin_data) {
  return Exec(command, transport_internal::StdinFromView(stdin_data), nullptr);
}

Result<CommandResult> SshTransport::RunStreaming(
    const std::string& command, const std::function<bool(std::string_view chunk)>& on_stdout,
    std::string_view stdin_data) {
  return Exec(command, transport_internal::StdinFromView(stdin_data), &on_stdout);
}

Result<CommandResult> SshTransport::RunWithInput(
    const std::string& command, const std::function<bool(std::string* chunk)>& next_stdin) {
  return Exec(command, transport_internal::StdinFromCallback(next_stdin), nullptr);
}

Result<CommandResult> SshTransport::Exec(const std::string& command, const StdinPull& input,
                                         const std::function<bool(std::string_view)>* on_stdout) {
  std::lock_guard<std::mutex> lock(mu_);
  return ExecLocked(command, input, on_stdout);
}

namespace {

// One command on one channel: callbacks set, stdin fed, output drained, exit
// status read, channel freed. Every failure is "lost": the session is then
// marked broken (reconnect before next use). The transport's mutex is held
// throughout.
class ChannelRun {
 public:
  ChannelRun(SshTransport::Session session, int keepalive_s, const ssh_counter_struct* rx,
             const StdinPull& input, const std::function<bool(std::string_view)>* on_stdout,
             std::string context, std::function<std::string()> libssh_error, bool* broken)
      : session_(session),
        keepalive_s_(keepalive_s),
        rx_(rx),
        heard_packets_(rx->in_packets),
        input_(input),
        context_(std::move(context)),
        libssh_error_(std::move(libssh_error)),
        broken_(broken) {
    st_.on_stdout = on_stdout;
    callbacks_.userdata = &st_;
    callbacks_.channel_data_function = OnData;
    callbacks_.channel_eof_function = OnEof;
    callbacks_.channel_exit_status_function = OnExitStatus;
    callbacks_.channel_exit_signal_function = OnExitSignal;
    ssh_callbacks_init(&callbacks_);
  }
  ~ChannelRun() { Release(); }
  ChannelRun(const ChannelRun&) = delete;
  ChannelRun& operator=(const ChannelRun&) = delete;

  // Opens a session channel; false (nothing freed, nothing marked) when the
  // session refuses, so the caller may reconnect and try once more.
  bool TryOpen(SshTransport::Session session) {
    session_ = session;
    ch_ = ssh_channel_new(session_);
    if (ch_ != nullptr && ssh_channel_open_session(ch_) == SSH_OK) return true;
    if (ch_ != nullptr) ssh_channel_free(ch_);
    ch_ = nullptr;
    return false;
  }

  Status Lost(const std::string& what) {
    std::string detail = libssh_error_();
    *broken_ = true;
    Release();
    return Status::Error(context_ + ": " + what + ": " + detail);
  }

  Status Exec(const std::string& command) {
    // Callbacks before the exec request: early output must not land in
    // libssh's own buffers, where our callbacks would never see it.
    ssh_set_channel_callbacks(ch_, &callbacks_);
    const SteadyClock::time_point asked = RealClock()->SteadyNow();
    if (ssh_channel_request_exec(ch_, command.c_str()) != SSH_OK) {
      // libssh gives no reason when the blocking request timed out (a
      // stopped sshd session: "unknown libssh error"); the wait says it.
      const auto waited =
          std::chrono::duration_cast<std::chrono::seconds>(RealClock()->SteadyNow() - asked);
      return Lost(waited.count() >= 2
                      ? "no answer to the exec request for " + std::to_string(waited.count()) + " s"
                      : "exec request failed");
    }
    last_activity_ = RealClock()->SteadyNow();
    return Status::OK();
  }

  // Phase 1: until the server's EOF, feed stdin within the window and drain
  // stdout/stderr.
  Status PumpUntilEof() {
    const int fd = ssh_get_fd(session_);
    while (true) {
      if (stdin_open_ && pending_.empty() && !input_(&pending_)) {
        if (!CloseStdin()) return Lost("connection lost sending EOF");
      }
      Status s = WriteWithinWindow();
      if (!s.ok()) return s;
      uint64_t before = st_.bytes_in;
      int rc = ssh_channel_poll(ch_, 0);
      if (rc == SSH_ERROR) return Lost("connection lost");
      if (st_.bytes_in != before) last_activity_ = RealClock()->SteadyNow();
      if (st_.aborted || rc == SSH_EOF || st_.eof) return Status::OK();
      bool can_write = stdin_open_ && (pending_.empty() || ssh_channel_window_size(ch_) > 0);
      if (can_write) continue;
      pollfd pfd = {fd, POLLIN, 0};
      if (poll(&pfd, 1, kMaxWaitMs) == 0) KeepAlive();
      if (Status a = CheckAlive(); !a.ok()) return a;
    }
  }

  bool aborted() const { return st_.aborted; }

  // The consumer wants no more: stop the command and drop the channel.
  Status Abort() {
    ssh_channel_request_send_signal(ch_, "TERM");
    ssh_channel_close(ch_);
    Release();
    return Status::Error(context_ + ": aborted: the output consumer stopped reading");
  }

  // Phase 2: output is over but the command may still read stdin (e.g.
  // `exec >&-; cat > file`). No output can block us now, so blocking writes
  // (which wait for the window) are safe.
  Status FinishStdin() {
    while (stdin_open_) {
      if (pending_.empty()) {
        if (!input_(&pending_)) {
          if (!CloseStdin()) return Lost("connection lost sending EOF");
        }
        continue;
      }
      if (ssh_channel_is_closed(ch_) != 0) break;
      KeepAlive();
      if (Status a = CheckAlive(); !a.ok()) return a;
      // Blocks at most the session timeout when the window is shut.
      int rc = ssh_channel_write(ch_, pending_.data(),
                                 static_cast<uint32_t>(std::min(pending_.size(), kWriteChunk)));
      if (rc < 0) {
        if (ssh_is_connected(session_) == 0) {
          return Lost("connection lost writing stdin");
        }
        break;
      }
      pending_.remove_prefix(static_cast<size_t>(rc));
    }
    return Status::OK();
  }

  // Phase 3: the exit status (or signal) follows EOF.
  Status WaitExitStatus() {
    while (!st_.got_status && !st_.got_signal && ssh_channel_is_closed(ch_) == 0) {
      ssh_channel_get_exit_status(ch_);  // waits up to the session timeout
      if (ssh_is_connected(session_) == 0) return Lost("connection lost");
      KeepAlive();
      if (Status a = CheckAlive(); !a.ok()) return a;
    }
    if (ssh_is_connected(session_) == 0 && !st_.got_status && !st_.got_signal) {
      return Lost("connection lost");
    }
    Release();
    return Status::OK();
  }

  // What the command printed and how it ended. REQUIRES: WaitExitStatus ok.
  CommandResult TakeResult() {
    CommandResult result = std::move(st_.result);
    if (st_.got_signal && !st_.got_status) {
      result.exit_code = -1;
      transport_internal::AppendSignalNote(st_.signal_name, st_.core_dumped, &result.err);
    } else if (!st_.got_status) {
      result.exit_code = -1;
      if (!result.err.empty() && result.err.back() != '\n') {
        result.err.push_back('\n');
      }
      result.err.append("the server closed the channel without an exit status\n");
    }
    return result;
  }

 private:
  // Frees the channel; the callbacks go first, since they point at `st_`
  // and libssh may still see packets for the channel.
  void Release() {
    if (ch_ != nullptr) {
      ssh_remove_channel_callbacks(ch_, &callbacks_);
      ssh_channel_free(ch_);
      ch_ = nullptr;
    }
  }

  bool CloseStdin() {
    stdin_open_ = false;
    pending_ = {};
    return ssh_channel_send_eof(ch_) == SSH_OK || ssh_is_connected(session_) != 0;
  }

  // Writes what the window allows of the pending stdin, without blocking.
  Status WriteWithinWindow() {
    if (!stdin_open_ || pending_.empty() || ssh_channel_window_size(ch_) == 0) return Status::OK();
    size_t n = std::min<size_t>({pending_.size(), ssh_channel_window_size(ch_), kWriteChunk});
    int rc = ssh_channel_write(ch_, pending_.data(), static_cast<uint32_t>(n));
    if (rc < 0) {
      if (ssh_is_connected(session_) == 0) {
        return Lost("connection lost writing stdin");
      }
      // The command closed its stdin (or exited): drop the rest, as
      // OpenSSH does; the exit code tells the story.
      stdin_open_ = false;
      pending_ = {};
    } else {
      pending_.remove_prefix(static_cast<size_t>(rc));
      if (rc > 0) last_activity_ = RealClock()->SteadyNow();
    }
    return Status::OK();
  }

  // Nothing heard for keepalive_s: ask the server for an answer
  // (keepalive@openssh.com with want_reply; OpenSSH answers REQUEST_FAILURE).
  // A live server's answer is a packet, which CheckAlive counts; the request
  // also keeps middleboxes and TCP_USER_TIMEOUT busy. Waits for the answer
  // at most the session timeout.
  void KeepAlive() {
    if (keepalive_s_ <= 0) return;
    Heard();
    const auto every = std::chrono::seconds(keepalive_s_);
    SteadyClock::time_point now = RealClock()->SteadyNow();
    if (now - last_heard_ < every || now - last_ping_ < every) return;
    last_ping_ = now;
    ssh_send_keepalive(session_);
    last_activity_ = RealClock()->SteadyNow();
  }

  // Notes a packet received since the last look (libssh counts them in rx_).
  void Heard() {
    if (rx_->in_packets != heard_packets_) {
      heard_packets_ = rx_->in_packets;
      last_heard_ = RealClock()->SteadyNow();
    }
  }

  // A server that sends nothing for 3 * keepalive_s, not even answers to
  // keepalives, is stalled (a stopped sshd, a hung node whose kernel still
  // ACKs): the command fails naming the node instead of waiting forever.
  // Every wait in this class is bounded (kMaxWaitMs, or libssh's session
  // timeout), so this is checked at least that often.
  Status CheckAlive() {
    if (keepalive_s_ <= 0) return Status::OK();
    Heard();
    const int stall_s = kStallKeepalives * keepalive_s_;
    if (RealClock()->SteadyNow() - last_heard_ < std::chrono::seconds(stall_s)) return Status::OK();
    *broken_ = true;
    Release();
    return Status::Error(context_ + ": no answer from the node for " + std::to_string(stall_s) +
                         " s, not even to keepalives (stalled?); giving up on this connection");
  }

  SshTransport::Session session_;
  const int keepalive_s_;
  const ssh_counter_struct* rx_;  // the session's received packets
  uint64_t heard_packets_;
  SteadyClock::time_point last_heard_ = RealClock()->SteadyNow();
  SteadyClock::time_point last_ping_ = RealClock()->SteadyNow();
  const StdinPull& input_;
  const std::string context_;
  const std::function<std::string()> libssh_error_;
  bool* broken_;
  ChannelState st_;
  ssh_channel_callbacks_struct callbacks_ = {};
  ssh_channel ch_ = nullptr;
  std::string_view pending_;
  bool stdin_open_ = true;
  SteadyClock::time_point last_activity_ = RealClock()->SteadyNow();
};

}  // namespace

Result<CommandResult> SshTransport::ExecLocked(
    const std::string& command, const StdinPull& input,
    const std::function<bool(std::string_view)>* on_stdout) {
  const std::string context = describe_ + ": running " + CommandSnippet(command);
  bool fresh = false;
  if (!SessionLooksAliveLocked()) {
    Status s = ConnectLocked();
    if (!s.ok()) return s.Prefixed(context);
    fresh = true;
  }
  ChannelRun run(
      session_, endpoint_.keepalive_s, rx_counter_.get(), input, on_stdout, context,
      [this] { return LibsshError(); }, &broken_);
  // Opening a channel sends nothing of the command yet, so if a session that
  // looked alive turns out dead here, one reconnect and retry is safe.
  for (int attempt = 0; !run.TryOpen(session_); ++attempt) {
    if (fresh || attempt > 0) return run.Lost("cannot open a channel");
    Status s = ConnectLocked();
    if (!s.ok()) return s.Prefixed(context + ": reconnecting");
  }
  Status s = run.Exec(command);
  if (s.ok()) s = run.PumpUntilEof();
  if (s.ok() && run.aborted()) return run.Abort();
  if (s.ok()) s = run.FinishStdin();
  if (s.ok()) s = run.WaitExitStatus();
  if (!s.ok()) return s;
  return run.TakeResult();
}

Status SshTransport::WriteFile(const std::string& remote_path, std::string_view data, int mode) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string context = describe_ + ": writing " + remote_path;
  size_t slash = remote_path.rfind('/');
  std::string dir = slash == std::string::npos ? "" : remote_path.substr(0, slash + 1);
  std::string base = slash == std::string::npos ? remote_path : remote_path.substr(slash + 1);
  if (base.empty()) return Status::Error(context + ": not a file name");
  if (!SessionLooksAliveLocked()) {
    Status s = ConnectLocked();
    if (!s.ok()) return s.Prefixed(context);
  }
  const std::string tmp = dir + "." + base + ".fleet-tmp." + RandomHex();
  Status s = UploadLocked(tmp, data, mode);
  if (!s.ok()) return s.Prefixed(context);

  auto mv = ExecLocked(ShellCommand({"mv", "-f", "-T", "--", tmp, remote_path}),
                       transport_internal::StdinFromView({}), nullptr);
  if (mv.ok() && mv->exit_code == 0) return Status::OK();
  std::string why =
      mv.ok() ? "mv -f " + tmp + " failed (exit " + std::to_string(mv->exit_code) + "): " + mv->err
              : mv.status().message();
  while (!why.empty() && why.back() == '\n') why.pop_back();
  ExecLocked(ShellCommand({"rm", "-f", "--", tmp}), transport_internal::StdinFromView({}), nullptr);
  return Status::Error(context + ": " + why);
}

Status SshTransport::UploadLocked(const std::string& tmp_path, std::string_view data, int mode) {
  sftp_session sftp = sftp_new(session_);
  if (sftp == nullptr) {
    broken_ = ssh_is_connected(session_) == 0;
    return Status::Error("cannot open an SFTP channel: " + LibsshError());
  }
  auto sftp_fail = [&](const std::string& what, sftp_file file) {
    std::string detail = SftpErrorName(sftp_get_error(sftp));
    std::string libssh = LibsshError();
    if (!libssh.empty() && libssh != detail) detail += " (" + libssh + ")";
    if (file != nullptr) sftp_close(file);
    if (ssh_is_connected(session_) == 0) {
      broken_ = true;
    } else {
      sftp_unlink(sftp, tmp_path.c_str());
    }
    sftp_free(sftp);
    return Status::Error(what + ": " + detail);
  };
  if (sftp_init(sftp) != SSH_OK) return sftp_fail("cannot start SFTP", nullptr);
  sftp_file file = sftp_open(sftp, tmp_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_TRUNC, 0600);
  if (file == nullptr) {
    std::string detail = SftpErrorName(sftp_get_error(sftp));
    sftp_free(sftp);
    return Status::Error("cannot create the temp file " + tmp_path + ": " + detail);
  }
  while (!data.empty()) {
    size_t n = std::min(data.size(), kSftpChunk);
    ssize_t written = sftp_write(file, data.data(), n);
    if (written <= 0) return sftp_fail("SFTP write to " + tmp_path, file);
    data.remove_prefix(static_cast<size_t>(written));
  }
  if (sftp_extension_supported(sftp, "fsync@openssh.com", "1") != 0 && sftp_fsync(file) != 0) {
    return sftp_fail("SFTP fsync of " + tmp_path, file);
  }
  if (sftp_close(file) != SSH_NO_ERROR) {
    return sftp_fail("SFTP close of " + tmp_path, nullptr);
  }
  // Explicit chmod: the mode given to open is filtered by the server's umask.
  if (sftp_chmod(sftp, tmp_path.c_str(), static_cast<mode_t>(mode)) != 0) {
    return sftp_fail("SFTP chmod of " + tmp_path, nullptr);
  }
  sftp_free(sftp);
  return Status::OK();
}

}  // namespace fleet
