// Transport: how fleet reaches a node (the Env seam of the engine).
//
// The planner and providers only see this interface; SshTransport (libssh)
// and LocalTransport (`address: local`) implement it, and tests can run the
// engine against either.
#ifndef FLEET_SRC_TRANSPORT_H_
#define FLEET_SRC_TRANSPORT_H_

#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "src/status.h"

namespace fleet {

struct CommandResult {
  int exit_code = -1;  // the remote command's exit status; -1 if killed by a signal
  std::string out;
  std::string err;
};

struct SshEndpoint {
  std::string node;     // node name, used in every message
  std::string address;  // host name or IP, or "local"
  int port = 22;
  std::string user;         // empty: the current user
  std::string identity;     // private key file; empty: ssh-agent only
  std::string known_hosts;  // REQUIRED for ssh: strict host-key checking against it
  int connect_timeout_s = 10;
  int keepalive_s = 15;
};

class Transport {
 public:
  virtual ~Transport() = default;

  // Opens the connection (for ssh: TCP, host-key check, key auth).
  // Idempotent. The error names the node and what failed, e.g.
  // "dgx1 (127.0.0.1:22001): host key mismatch ...".
  virtual Status Connect() = 0;

  // Runs `command` with /bin/sh on the node, feeding `stdin_data`, and
  // collects its output. A non-zero exit is NOT an error Status: it is in
  // CommandResult.exit_code. Status errors are transport failures only.
  // Thread-safe: calls on one transport are serialised or multiplexed.
  virtual Result<CommandResult> Run(const std::string& command,
                                    std::string_view stdin_data = {}) = 0;

  // Runs `command`, calling `on_stdout` with each chunk of its standard
  // output as it arrives (for streams too big to hold in memory, e.g. an
  // image or a model file). `on_stdout` returning false aborts the command.
  // stderr is collected into CommandResult.err; CommandResult.out stays empty.
  // `stdin_data` is fed first, then EOF (e.g. a secret the command reads
  // before it starts, kept off its command line).
  virtual Result<CommandResult> RunStreaming(
      const std::string& command, const std::function<bool(std::string_view chunk)>& on_stdout,
      std::string_view stdin_data = {}) = 0;

  // Runs `command` feeding it standard input pulled from `next_stdin` until it
  // returns false (EOF). Output is collected as in Run.
  virtual Result<CommandResult> RunWithInput(
      const std::string& command, const std::function<bool(std::string* chunk)>& next_stdin) = 0;

  // Writes `data` to `remote_path` atomically (temp name, then mv -f) with
  // permission bits `mode`.
  virtual Status WriteFile(const std::string& remote_path, std::string_view data, int mode) = 0;

  // "dgx1 (kilork@127.0.0.1:22001)": used to prefix remote errors.
  virtual std::string Describe() const = 0;

  // The port of the controller's end of its connection to the node, as the
  // controller sees it; 0 when there is no connection (or no socket: local).
  // The node's SSH_CONNECTION names the same end as the node sees it: a
  // NAT between them shows as another port.
  virtual int LocalPort() { return 0; }
};

// Creates the transport for an endpoint: LocalTransport when address is
// "local", SshTransport otherwise. Does not connect.
std::unique_ptr<Transport> MakeTransport(const SshEndpoint& endpoint);

}  // namespace fleet

#endif  // FLEET_SRC_TRANSPORT_H_
