// SshTransport: one libssh session per node, one exec channel per command.
//
// Connect() opens TCP, checks the host key strictly against the endpoint's
// known_hosts file (never the system one, never writing to it), then
// authenticates with the identity file and, if SSH_AUTH_SOCK is set, the
// ssh-agent. Every call takes one mutex, so calls from several threads are
// serialised on the one session (libssh sessions are not thread-safe).
//
// Keepalive (libssh 0.10 has no client option for it): the socket gets
// kernel TCP keepalive (idle/interval = keepalive_s, 3 probes) and
// TCP_USER_TIMEOUT = 3 * keepalive_s, so a dead peer turns into an error, not
// a hang; while a command is silent for keepalive_s, an SSH_MSG_IGNORE is sent
// on the session. An idle session is not pinged from a background thread:
// before each command the socket is checked (a peer that closed it shows EOF)
// and a session found dead before anything was sent is reopened once,
// transparently, because the command cannot have run.
//
// A connection lost while a command runs is an error naming the node and the
// command; the next call reconnects (once per call).
//
// A node that stops answering while its TCP connection stays up (a stopped
// or hung sshd, a node whose kernel still ACKs) is not a connection lost to
// the kernel: while a command waits, a keepalive@openssh.com request that
// wants a reply is sent after keepalive_s without a packet from the server,
// and after 3 * keepalive_s (45 s by default) without any packet the command
// fails: "<node> (...): running '...': no answer from the node for 45 s".
// Every libssh wait is bounded by the session timeout (connect_timeout_s),
// so the failure comes at most that much later. A node that accepts TCP but
// never speaks SSH fails Connect after connect_timeout_s.
#ifndef FLEET_SRC_SSH_TRANSPORT_H_
#define FLEET_SRC_SSH_TRANSPORT_H_

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "src/status.h"
#include "src/transport.h"
#include "src/transport_internal.h"

struct ssh_session_struct;
struct ssh_counter_struct;

namespace fleet {

// What a failed ssh_connect means, read once from libssh's message (all it
// reports): socket() failing is the controller's own fault (own_fault());
// anything else (refused, timed out, no route) a node that is not there
// (kUnreachable).
Status ConnectFailure(const std::string& libssh_error, long timeout_s);

class SshTransport : public Transport {
 public:
  // Does not connect. "~/" in identity and known_hosts is expanded.
  explicit SshTransport(const SshEndpoint& endpoint);
  ~SshTransport() override;
  SshTransport(const SshTransport&) = delete;
  SshTransport& operator=(const SshTransport&) = delete;

  Status Connect() override;

  Result<CommandResult> Run(const std::string& command, std::string_view stdin_data = {}) override;

  // Chunks are what the server sends per packet (at most 32 KiB with
  // OpenSSH). An abort (on_stdout returned false) sends TERM to the command,
  // closes its channel and returns an error Status.
  Result<CommandResult> RunStreaming(const std::string& command,
                                     const std::function<bool(std::string_view chunk)>& on_stdout,
                                     std::string_view stdin_data = {}) override;

  Result<CommandResult> RunWithInput(
      const std::string& command,
      const std::function<bool(std::string* chunk)>& next_stdin) override;

  // SFTP upload to ".NAME.fleet-tmp.RANDOM" in the same directory, fsync (if
  // the server offers fsync@openssh.com), chmod to mode, then `mv -f -T` over
  // remote_path on an exec channel (SFTP in libssh 0.10 cannot rename over an
  // existing file). The temp file is removed on failure.
  Status WriteFile(const std::string& remote_path, std::string_view data, int mode) override;

  // "dgx1 (kilork@127.0.0.1:22001)".
  std::string Describe() const override;
  int LocalPort() override;

 public:
  using Session = ssh_session_struct*;

 private:
  // All REQUIRES mu_ held.
  // Connects and authenticates; a connection the server drops during the
  // handshake (before authentication answered) is tried again, up to
  // three times: an sshd under load or restarting does that.
  Status ConnectLocked();
  Status ConnectOnceLocked();
  void DisconnectLocked();
  bool SessionLooksAliveLocked();
  Status EnsureConnectedLocked(const std::string& why);
  Status CheckHostKeyLocked();
  Status AuthenticateLocked();
  Result<CommandResult> ExecLocked(const std::string& command,
                                   const transport_internal::StdinPull& input,
                                   const std::function<bool(std::string_view)>* on_stdout);
  Result<CommandResult> Exec(const std::string& command, const transport_internal::StdinPull& input,
                             const std::function<bool(std::string_view)>* on_stdout);
  Status UploadLocked(const std::string& tmp_path, std::string_view data, int mode);
  std::string LibsshError() const;

  const SshEndpoint endpoint_;
  const std::string user_;         // endpoint.user or the current user
  const std::string identity_;     // expanded
  const std::string known_hosts_;  // expanded
  const std::string describe_;

  std::mutex mu_;
  Session session_ = nullptr;       // guarded by mu_; non-null: authenticated
  bool broken_ = false;             // guarded by mu_: reconnect before next use
  bool handshake_dropped_ = false;  // guarded by mu_: set by ConnectOnceLocked
  // Packets received, counted by libssh (ssh_set_counters) across sessions;
  // guarded by mu_. A command that sees it still for 3 * keepalive_s fails.
  std::unique_ptr<ssh_counter_struct> rx_counter_;
};

}  // namespace fleet

#endif  // FLEET_SRC_SSH_TRANSPORT_H_
