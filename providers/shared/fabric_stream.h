// FabricStream: one byte stream from a command on one node to a command on
// another, over the fabric between them, with no byte through the controller.
//
// Mechanism: `openssl s_server` / `s_client` (TLS 1.3, external PSK), which
// every Debian/Ubuntu node has (the `openssl` package; ca-certificates
// depends on it). No node-to-node SSH key, no daemon, nothing installed:
//
//   target: timeout T openssl s_server -naccept 1 -psk_session D/psk -accept ADDR:PORT | TARGET_CMD
//   source: SOURCE_CMD | timeout T openssl s_client -psk_session D/psk -connect ADDR:PORT
//
// - the listener binds the target's fabric address only, on a free port it
//   picks, and accepts one connection (-naccept 1): a wrong key or a
//   foreign client uses it up and the transfer fails;
// - the key is 32 random bytes made for this transfer, with a random
//   identity. It reaches each node on the SSH channel's stdin (never a
//   command line or an environment variable, which other local users can
//   read in /proc), and lives there in D/psk, mode 0600 in D, a 0700
//   mktemp dir the script removes when it ends; never in fleet's output,
//   plan or state. The handshake is psk_dhe_ke (X25519): forward secret;
//   the cipher suite is pinned (TLS_AES_128_GCM_SHA256), as an external PSK
//   must match the negotiated suite's hash;
// - TLS 1.3 encrypts and authenticates every record: a stream cut short
//   (the source killed) ends without close_notify, which s_server reports
//   ("unexpected eof"): the target side then fails even if TARGET_CMD took
//   what it got;
// - the source gives up connecting after `connect_timeout_s` (a fabric
//   link down, no route): it has sent no byte then, the listener is stopped
//   at once, and the result says `unconnected`: the caller may take the
//   path through the controller;
// - a peer that goes silent (power lost, a cable pulled: no FIN, no RST)
//   would hold a sender until TCP gives up (~15 min), and every hop
//   before it with it, as each one's pipe fills: the send script stops
//   sending once its connection has retransmitted or probed without an
//   answer for `stall_s` seconds in a row (/proc/net/tcp) and exits
//   kFabricStalledExit. A receiver that is only slow answers the
//   probes of its zero window and is waited for;
// - lifetime: the listener prints a heartbeat line every 0.5 s until a
//   connection comes and every second after, until its stream ends; fleet
//   stops it by not reading one (cancel: also mid-stream, for a listener
//   whose sender went silent), and a channel closed under it (fleet gone)
//   stops it at the next one. A watchdog kills it if nobody connects
//   within `accept_timeout_s`; both ends run under `timeout T`; the
//   scripts' temp dirs go with them.
#ifndef FLEET_PROVIDERS_SHARED_FABRIC_STREAM_H_
#define FLEET_PROVIDERS_SHARED_FABRIC_STREAM_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "src/clock.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

// How long each end of a stream waits for what.
struct FabricLimits {
  int accept_timeout_s = 60;   // the listener dies if nobody connects by then
  int connect_timeout_s = 10;  // the source gives up connecting after this
  int stall_s = 30;            // a sender stops after this long without an answer
  int timeout_s = 6 * 3600;    // both ends die after this, whatever happens
};

struct FabricStreamSpec {
  Transport* source = nullptr;  // connected; used by this stream only while it runs
  std::string source_cmd;       // prints the payload on stdout
  Transport* target = nullptr;  // connected
  std::string target_cmd;       // reads the payload on stdin; its stdout comes back
  std::string target_address;   // the target's fabric IPv4: the listener binds it
  FabricLimits limits;
  // Test hook: the key the source uses, 64 hex digits ("" = the right one).
  std::string source_key_override;
  // Times the stream (FabricStreamResult::seconds) and dates its TLS
  // session: the step's (StepContext::clock). Never null.
  Clock* clock = RealClock();
};

struct FabricStreamResult {
  Result<CommandResult> source = Status::Error("not run");
  Result<CommandResult> target = Status::Error("not run");  // out: TARGET_CMD's stdout
  bool listening = false;                                   // the listener came up
  // No connection was made and no payload byte left the source (the
  // listener did not come up, or the source could not connect to it); the
  // listener is stopped. The caller may copy another way.
  bool unconnected = false;
  double seconds = 0;
  bool ok() const { return Problem().empty(); }
  // What went wrong, naming the side ("" when both exited 0).
  std::string Problem() const;
};

FabricStreamResult FabricStream(const FabricStreamSpec& spec);

// The commands that run fabric_listen.sh and fabric_send.sh (beside this
// file, embedded at build time) with their values as quoted arguments, for
// tests and review. Each reads the PSK session file (FabricSessionPem) on
// its stdin; no secret is on its command line. `target_cmd` and
// `source_cmd` are shell text the script evals (the target's may read $d,
// the listener's private dir, and $port). With `forward_cmd` (a chain's
// middle hop: FabricForwardCommand), the listener also sends what it
// receives on to the next hop.
std::string FabricListenScript(const std::string& address, const std::string& identity,
                               const std::string& target_cmd, const FabricLimits& limits,
                               const std::string& forward_cmd = "");
std::string FabricSendScript(const std::string& address, int port, const std::string& identity,
                             const std::string& source_cmd, const FabricLimits& limits);

// The exit status of the send script when it could not connect (no byte sent).
constexpr int kFabricUnconnectedExit = 75;
// ... when the source command failed before a connection was made (no byte
// sent either, but another path would fail alike).
constexpr int kFabricSourceFailedUnconnectedExit = 76;
// ... when the receiver answered nothing for stall_s: it or its link is
// gone, and its listener (and whatever is behind it) waits for bytes that
// will not come: stop them.
constexpr int kFabricStalledExit = 74;
// The send script ended without reaching the listener, which then waits
// for nobody: stop it.
inline bool NeverConnected(int send_exit) {
  return send_exit == kFabricUnconnectedExit || send_exit == kFabricSourceFailedUnconnectedExit;
}

// `openssl s_server/s_client -psk_session` input: a TLS 1.3 session (PEM)
// holding `key_hex` (64 hex digits) as its PSK, for TLS_AES_128_GCM_SHA256,
// valid from a week before `now_s` (unix seconds) to a week after (node
// clocks may be off). "" when OpenSSL fails or the key is not 64 hex digits.
std::string FabricSessionPem(const std::string& key_hex, int64_t now_s);

// Shared with FabricChain (fabric_chain.cc).
namespace fabric_internal {

std::string RandomKeyHex();    // 64 hex digits, "" when the RNG fails
std::string RandomIdentity();  // "fleet-" + 12 hex digits

// A listen script (FabricListenScript) running on a node, its stdout read
// in a thread of its own from construction on.
class Listener {
 public:
  Listener(Transport* t, const std::string& script, const std::string& stdin_data);
  ~Listener();  // joins
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  // The port it listens on once its ready line came; -1 when it ended first.
  int WaitPort();
  // Stops it at its next heartbeat, waiting for a connection or mid-stream
  // (a stream cut so is not whole, and its hop fails). Join then gives
  // exit 1 and `why` on stderr; a node lost meanwhile stays an error.
  void Cancel(const std::string& why = "");
  // Waits for its end; out is what it printed after the ready line,
  // heartbeats left out.
  Result<CommandResult> Join();

 private:
  bool OnStdout(std::string_view chunk);
  std::mutex mu_;
  std::condition_variable cv_;
  int port_ = -1;
  bool ended_ = false, cancel_ = false;
  bool stopped_ = false;      // a heartbeat came after Cancel: the stop is ours
  std::string why_;           // Cancel's
  std::string head_, after_;  // stdout before and after the ready line
  Result<CommandResult> result_ = Status::Error("not run");
  std::thread thread_;  // last: starts once the members above exist
};

}  // namespace fabric_internal

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_FABRIC_STREAM_H_
