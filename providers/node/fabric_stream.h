// FabricStream: one byte stream from a command on one node to a command on
// another, over the fabric between them, with no byte through the controller.
//
// Mechanism: `openssl s_server` / `s_client` (TLS 1.3, external PSK), which
// every Debian/Ubuntu node has (the `openssl` package; ca-certificates
// depends on it). No node-to-node SSH key, no daemon, nothing installed:
//
//   target: timeout T openssl s_server -naccept 1 -psk K -accept ADDR:PORT | TARGET_CMD
//   source: SOURCE_CMD | timeout T openssl s_client -psk K -connect ADDR:PORT
//
// - the listener binds the target's fabric address only, on a free port it
//   picks, and accepts one connection (-naccept 1): a wrong key or a
//   foreign client uses it up and the transfer fails;
// - K is 32 random bytes made for this transfer, with a random identity;
//   it is on the openssl command lines for the transfer's duration (visible
//   in the node's process list to its other local users), never in fleet's
//   output, plan or state;
// - TLS 1.3 encrypts and authenticates every record: a stream cut short
//   (the source killed) ends without close_notify, which s_server reports
//   ("unexpected eof"): the target side then fails even if TARGET_CMD took
//   what it got;
// - lifetime: a watchdog kills the listener if nobody connects within
//   `accept_timeout_s`; both ends run under `timeout T`; the target
//   script's temp dir goes with it. If fleet dies, the listener still ends
//   by those timeouts.
#ifndef FLEET_PROVIDERS_NODE_FABRIC_STREAM_H_
#define FLEET_PROVIDERS_NODE_FABRIC_STREAM_H_

#include <string>

#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct FabricStreamSpec {
  Transport* source = nullptr;  // connected; used by this stream only while it runs
  std::string source_cmd;       // prints the payload on stdout
  Transport* target = nullptr;  // connected
  std::string target_cmd;       // reads the payload on stdin; its stdout comes back
  std::string target_address;   // the target's fabric IPv4: the listener binds it
  int accept_timeout_s = 60;    // the listener dies if nobody connects by then
  int timeout_s = 6 * 3600;     // both ends die after this, whatever happens
  // Test hook: the key the source uses ("" = the right one).
  std::string source_key_override;
};

struct FabricStreamResult {
  Result<CommandResult> source = Status::Error("not run");
  Result<CommandResult> target = Status::Error("not run");  // out: TARGET_CMD's stdout
  bool listening = false;                                   // the listener came up
  double seconds = 0;
  bool ok() const { return Problem().empty(); }
  // What went wrong, naming the side ("" when both exited 0).
  std::string Problem() const;
};

FabricStreamResult FabricStream(const FabricStreamSpec& spec);

// The scripts, for tests and review (key and identity are hex).
std::string FabricListenScript(const std::string& address, const std::string& key,
                               const std::string& identity, const std::string& target_cmd,
                               int accept_timeout_s, int timeout_s);
std::string FabricSendScript(const std::string& address, int port, const std::string& key,
                             const std::string& identity, const std::string& source_cmd,
                             int timeout_s);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_FABRIC_STREAM_H_
