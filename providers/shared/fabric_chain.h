// FabricChain: one byte stream from a command on one node through a chain
// of nodes, source -> hop 0 -> hop 1 -> ... -> hop N-1: each hop writes
// what it receives (its TARGET_CMD) and forwards it to the next as it
// arrives, so the source's link carries each byte once whatever N, and no
// hop stores a whole file before passing it on.
//
// Each link of the chain is a FabricStream's: TLS 1.3 with an external
// PSK made for that link alone, over the SSH channel's stdin of its two
// ends (a middle hop gets two keys: its listener's and the next link's),
// never on a command line; the listener binds the hop's fabric address and
// accepts one connection. A middle hop runs
//   s_server | tee -p | TARGET_CMD      and   tee's copy | s_client -> next
// (`tee -p`: a next hop gone does not stop this hop's own write, and this
// hop's write failing does not stop the forward). A hop whose own stream
// did not end cleanly (a hop before it lost) cuts its forward without
// close_notify, so every hop behind it fails too: a truncated stream never
// passes for a whole one.
//
// Listeners start from the last hop to the first (each forward needs the
// next one's port), then the source connects to hop 0. A hop that went
// silent (its sender stalled, or its node lost) leaves the hops behind it
// waiting for bytes that will not come: their listeners are stopped, and
// those hops fail as after a stream that did not end cleanly.
#ifndef FLEET_PROVIDERS_SHARED_FABRIC_CHAIN_H_
#define FLEET_PROVIDERS_SHARED_FABRIC_CHAIN_H_

#include <string>
#include <vector>

#include "providers/shared/fabric_stream.h"
#include "src/clock.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

struct FabricHop {
  std::string node;        // for messages
  Transport* transport;    // connected; used by this chain only while it runs
  std::string target_cmd;  // reads the payload on stdin; its stdout comes back
  std::string address;     // the hop's fabric IPv4: its listener binds it
};

struct FabricChainSpec {
  Transport* source = nullptr;  // connected
  std::string source_cmd;       // prints the payload on stdout
  std::vector<FabricHop> hops;  // at least one
  FabricLimits limits;
  // Times the chain (FabricChainResult::seconds) and dates its TLS
  // sessions: the step's (StepContext::clock). Never null.
  Clock* clock = RealClock();
};

struct FabricHopResult {
  // The hop's script: exit 0 when the stream reached it whole and its
  // TARGET_CMD succeeded; out: TARGET_CMD's stdout. Not ok: the channel
  // itself failed (the node lost).
  Result<CommandResult> target = Status::Error("not run");
  std::string forward_problem;   // its forward to the next hop failed ("" when fine or last)
  bool forward_stalled = false;  // ... because the next hop answered nothing (kFabricStalledExit)
  bool delivered() const { return target.ok() && target->exit_code == 0; }
  std::string Problem() const;  // "" when delivered
};

struct FabricChainResult {
  Result<CommandResult> source = Status::Error("not run");
  std::vector<FabricHopResult> hops;  // one per spec hop
  // No connection was made to hop 0 and no payload byte left the source,
  // or a listener did not come up (no byte was sent then either).
  bool unconnected = false;
  double seconds = 0;
  std::string SourceProblem() const;  // "" when the source's side ended well
};

FabricChainResult FabricChain(const FabricChainSpec& spec);

// A middle hop's FORWARD_CMD for FabricListenScript: the send to the next
// hop's listener at `next_address`:`next_port` (identity `next_identity`)
// of the copy of the stream the listener's `tee -p` gives it on fd 3
// (fabric_forward.sh). Its key is the second PEM of the listen script's
// stdin. The hop then exits with its target_cmd's status; a failed forward
// is one stderr line "fabric-forward: ...".
std::string FabricForwardCommand(const std::string& next_address, int next_port,
                                 const std::string& next_identity, const FabricLimits& limits);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_FABRIC_CHAIN_H_
