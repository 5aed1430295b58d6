#include "providers/shared/fabric_chain.h"

#include <chrono>
#include <memory>

#include "providers/shared/fabric_forward_sh.h"
#include "providers/shared/fabric_stream.h"

namespace fleet {

namespace {

// The line fabric_listen.sh's relay prints on stderr when its forward failed.
constexpr char kForwardMark[] = "fabric-forward: ";

std::string Chomp(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// Moves the "fabric-forward: " line of a hop's stderr into forward_problem.
void TakeForwardProblem(FabricHopResult* hop) {
  if (!hop->target.ok()) return;
  std::string& err = hop->target->err;
  size_t at = err.find(kForwardMark);
  if (at == std::string::npos) return;
  size_t eol = err.find('\n', at);
  hop->forward_problem =
      err.substr(at + sizeof kForwardMark - 1,
                 eol == std::string::npos ? eol : eol - at - sizeof kForwardMark + 1);
  err.erase(at, eol == std::string::npos ? eol : eol - at + 1);
  hop->forward_stalled =
      hop->forward_problem.starts_with("exit " + std::to_string(kFabricStalledExit) + ":");
}

// Why the hops behind hop k (behind the source: k = -1) can get no whole
// stream although their listeners may still wait; "" when they can.
std::string SilentBefore(const FabricChainSpec& spec, const FabricChainResult& r, int k) {
  const std::string stall = std::to_string(spec.limits.stall_s);
  if (k < 0) {
    if (!r.source.ok()) return "the source was lost: " + r.source.status().message();
    if (r.source->exit_code != kFabricStalledExit) return "";
    return "the chain's first hop answered the source nothing for " + stall + " s";
  }
  const FabricHopResult& hop = r.hops[k];
  if (!hop.target.ok()) return spec.hops[k].node + ", before it in the chain, was lost";
  if (!hop.forward_stalled) return "";
  return "the hop after " + spec.hops[k].node + " answered it nothing for " + stall + " s";
}

}  // namespace

std::string FabricForwardCommand(const std::string& next_address, int next_port,
                                 const std::string& next_identity, const FabricLimits& limits) {
  // fabric_forward.sh is the send's SOURCE_CMD: shell text it evals, as
  // its header says (no process more on the stream's path).
  return FabricSendScript(next_address, next_port, next_identity,
                          std::string(kFabricForwardScript, kFabricForwardScriptSize), limits);
}

std::string FabricHopResult::Problem() const {
  if (!target.ok()) return target.status().message();
  if (target->exit_code == 0) return "";
  std::string err = Chomp(target->err);
  if (err.size() > 600) err = err.substr(0, 600) + "...";
  return "exited " + std::to_string(target->exit_code) + (err.empty() ? "" : ": " + err);
}

std::string FabricChainResult::SourceProblem() const {
  if (!source.ok()) return source.status().message();
  if (source->exit_code == 0) return "";
  return "exited " + std::to_string(source->exit_code) + ": " + Chomp(source->err);
}

FabricChainResult FabricChain(const FabricChainSpec& spec) {
  FabricChainResult result;
  const auto start = spec.clock->SteadyNow();
  const size_t n = spec.hops.size();
  result.hops.resize(n);
  std::vector<std::string> ids(n), pems(n);
  for (size_t k = 0; k < n; ++k) {
    ids[k] = fabric_internal::RandomIdentity();
    pems[k] = FabricSessionPem(fabric_internal::RandomKeyHex(), spec.clock->UnixSeconds());
    if (pems[k].empty() || ids[k].size() < 7) {
      result.source = Status::Error("cannot make the transfer's keys");
      result.unconnected = true;
      return result;
    }
  }
  // From the last hop to the first: each forward needs the next one's port.
  std::vector<std::unique_ptr<fabric_internal::Listener>> listeners(n);
  std::vector<int> ports(n, -1);
  size_t up_from = n;  // listeners [up_from, n) are up
  while (up_from > 0) {
    const size_t k = up_from - 1;
    const FabricHop& hop = spec.hops[k];
    const bool last = k + 1 == n;
    const std::string forward = last ? ""
                                     : FabricForwardCommand(spec.hops[k + 1].address, ports[k + 1],
                                                            ids[k + 1], spec.limits);
    listeners[k] = std::make_unique<fabric_internal::Listener>(
        hop.transport,
        FabricListenScript(hop.address, ids[k], hop.target_cmd, spec.limits, forward),
        pems[k] + (last ? "" : pems[k + 1]));
    ports[k] = listeners[k]->WaitPort();
    if (ports[k] < 0) break;
    up_from = k;
  }
  std::string not_started;  // why, where the chain did not start
  if (up_from > 0) {
    // Hop up_from - 1's listener did not come up; those behind it wait for
    // a connection that will not come.
    result.unconnected = true;
    const std::string& why = not_started =
        "not started: " + spec.hops[up_from - 1].node + "'s listener did not come up";
    result.source = Status::Error(why);
    for (size_t k = up_from; k < n; ++k) listeners[k]->Cancel(why);
    // The hops before it never listened: not lost, just not reached.
    for (size_t k = 0; k + 1 < up_from; ++k) result.hops[k].target = CommandResult{1, "", why};
  } else {
    result.source = spec.source->Run(
        FabricSendScript(spec.hops[0].address, ports[0], ids[0], spec.source_cmd, spec.limits),
        pems[0]);
    if (result.source.ok() && result.source->exit_code == kFabricUnconnectedExit)
      result.unconnected = true;
    // The hops behind hop 0 then get a stream that did not end cleanly.
    if (result.source.ok() && NeverConnected(result.source->exit_code))
      listeners[0]->Cancel("the source did not connect: " + result.SourceProblem());
  }
  // In chain order: a hop that went silent stops all those behind it at
  // once (the first of them may be the lost node, whose end waits for the
  // keepalive).
  auto stop_behind = [&](int k) {
    const std::string why = SilentBefore(spec, result, k);
    for (size_t j = k + 1; !why.empty() && j < n; ++j)
      if (listeners[j]) listeners[j]->Cancel(why);
    return !why.empty();
  };
  bool stopped = !result.unconnected && stop_behind(-1);
  for (size_t k = 0; k < n; ++k) {
    if (!listeners[k]) continue;
    result.hops[k].target = listeners[k]->Join();
    TakeForwardProblem(&result.hops[k]);
    if (!stopped) stopped = stop_behind(static_cast<int>(k));
    // No byte left the source, so whatever such a hop got is not the
    // payload: the failed hop's relay may have forwarded its own empty
    // input, with a clean end, before the hop's stop came.
    if (!not_started.empty() && k >= up_from && result.hops[k].delivered())
      result.hops[k].target = CommandResult{1, "", "fabric: stopped: " + not_started};
  }
  result.seconds = std::chrono::duration<double>(spec.clock->SteadyNow() - start).count();
  return result;
}

}  // namespace fleet
