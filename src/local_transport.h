// LocalTransport: runs commands on this machine (`address: local`).
//
// Each command is `/bin/sh -c COMMAND` in a child process of its own (its own
// process group), wired to pipes; stdin is fed while stdout and stderr are
// drained, so no size of input or output can deadlock. Calls need no shared
// state, so concurrent calls from several threads simply run side by side.
#ifndef FLEET_SRC_LOCAL_TRANSPORT_H_
#define FLEET_SRC_LOCAL_TRANSPORT_H_

#include <functional>
#include <string>
#include <string_view>

#include "src/status.h"
#include "src/transport.h"
#include "src/transport_internal.h"

namespace fleet {

class LocalTransport : public Transport {
 public:
  // Only endpoint.node is used (in messages).
  explicit LocalTransport(const SshEndpoint& endpoint);

  // Nothing to open: always OK.
  Status Connect() override;

  Result<CommandResult> Run(const std::string& command,
                            std::string_view stdin_data = {}) override;

  // An abort (on_stdout returned false) sends SIGTERM to the command's
  // process group and returns an error Status.
  Result<CommandResult> RunStreaming(
      const std::string& command,
      const std::function<bool(std::string_view chunk)>& on_stdout,
      std::string_view stdin_data = {}) override;

  Result<CommandResult> RunWithInput(
      const std::string& command,
      const std::function<bool(std::string* chunk)>& next_stdin) override;

  // Temp file in the same directory, write, fchmod(mode), fsync, rename over
  // remote_path, fsync the directory. The file is never seen half-written.
  Status WriteFile(const std::string& remote_path, std::string_view data,
                   int mode) override;

  // "<node> (local)".
  std::string Describe() const override;

 private:
  Result<CommandResult> Exec(
      const std::string& command, const transport_internal::StdinPull& input,
      const std::function<bool(std::string_view)>* on_stdout);

  std::string describe_;
};

}  // namespace fleet

#endif  // FLEET_SRC_LOCAL_TRANSPORT_H_
