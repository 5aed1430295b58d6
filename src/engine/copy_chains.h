// Fan-outs as chains: the direct copies of one thing from one source over
// one fabric to two or more targets become one pipelined chain
// (CopyRoute::chain), source -> t1 -> t2 -> ... -> tN, the broadcast NCCL's
// ring does: each target writes what it receives and forwards it as it
// arrives, so the source's link carries each byte once and the fan-out
// takes about one copy's time whatever N. Without it the source sends
// every byte once per target and the time grows with N.
//
// A chain, not a tree: the pipeline's depth costs latency (a buffer per
// hop), not throughput, and on a switched fabric each node's link then
// carries the payload once in and once out, which a full-duplex link does
// at full rate both ways.
#ifndef FLEET_SRC_ENGINE_COPY_CHAINS_H_
#define FLEET_SRC_ENGINE_COPY_CHAINS_H_

#include <vector>

#include "src/plan.h"

namespace fleet {

// Sets `chain` on every change of each fan-out in `changes`: the changes
// that copy (not noops, no error) the same `what` from the same node over
// the same fabric, directly, to two or more targets with a known fabric
// address; the chain's hops in the order of the changes. Leaves the others
// alone. `enabled` false (FLEET_FABRIC_CHAIN=off: the bench's baseline)
// clears every chain instead.
void ChainFanOuts(std::vector<PlanChange>* changes, bool enabled);

// False when the process's settings say FLEET_FABRIC_CHAIN=off.
bool FanOutChainsEnabled();

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_COPY_CHAINS_H_
