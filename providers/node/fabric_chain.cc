#include "providers/node/fabric_chain.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include "providers/node/fabric_stream.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

constexpr char kForwardMark[] = "fabric-forward: ";

// The forward's payload: tee's copy on fd 3, then the verdict on the
// stream into this hop ($up: the listen script's dir, where its s_server's
// exit status and stderr land once it ended). Not clean: this command
// fails, so the send script cuts the forward without close_notify.
constexpr char kForwardPayload[] =
    "cat <&3 || exit 1\n"
    "i=0; until [ -e \"$up/rc\" ]; do\n"
    "  i=$((i + 1)); [ $i -lt 600 ] || exit 1; sleep 0.05\ndone\n"
    "if [ \"$(cat \"$up/rc\")\" != 0 ] || grep -qv SSL_get_servername \"$up/err\"; then\n"
    "  echo 'the stream into this hop did not end cleanly' >&2; exit 1\nfi\n";

// Sets fwd (in the relay, where $port is its listener's) once a
// connection to this hop is established, or once its s_server ended after
// one ($d/rc 0, or its errors); leaves it empty when the listener ended
// without one (stopped, or started again elsewhere): then nothing is sent
// to the next hop's port.
constexpr char kAwaitUpstream[] =
    "up_est=$(printf ':%04X [0-9A-F]*:[0-9A-F]* 01' \"$port\"); fwd=\n"
    "while [ -d \"$d\" ]; do\n"
    "  if grep -q \"$up_est\" /proc/net/tcp 2>/dev/null; then fwd=1; break; fi\n"
    "  if [ -e \"$d/rc\" ]; then\n"
    "    { [ \"$(cat \"$d/rc\")\" = 0 ] || [ -s \"$d/err\" ]; } && fwd=1; break\n"
    "  fi\n"
    "  sleep 0.01\n"
    "done\n";

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

// The port each hop's listener tries first: the spec's, else picked here
// at random, all different (hops may share an address).
std::vector<int> FirstPorts(const FabricChainSpec& spec) {
  if (spec.first_ports.size() == spec.hops.size()) return spec.first_ports;
  std::random_device rd;
  std::uniform_int_distribution<int> pick(kFabricPortBase, kFabricPortBase + kFabricPortSpan - 1);
  std::vector<int> ports;
  while (ports.size() < spec.hops.size())
    if (int p = pick(rd); std::find(ports.begin(), ports.end(), p) == ports.end())
      ports.push_back(p);
  return ports;
}

std::unique_ptr<fabric_internal::Listener> StartHop(const FabricChainSpec& spec, size_t k,
                                                    const std::vector<std::string>& ids,
                                                    const std::vector<std::string>& pems,
                                                    int first_port, int next_port) {
  const FabricHop& hop = spec.hops[k];
  const bool last = k + 1 == spec.hops.size();
  const std::string cmd = last ? hop.target_cmd
                               : FabricRelayCommand(hop.target_cmd, spec.hops[k + 1].address,
                                                    next_port, ids[k + 1], spec.limits);
  return std::make_unique<fabric_internal::Listener>(
      hop.transport, FabricListenScript(hop.address, ids[k], cmd, spec.limits, first_port),
      pems[k] + (last ? "" : pems[k + 1]));
}

// Starts every hop's listener at once, each forward pointed at the port
// the next hop tries first: a fan-out's setup costs one listener's start,
// not one per hop (issue 31). A hop whose port was taken on its node
// listens on another, and the hop before it is started again, pointed
// there. Returns each hop's port, -1 where its listener did not come up.
std::vector<int> StartListeners(const FabricChainSpec& spec, const std::vector<std::string>& ids,
                                const std::vector<std::string>& pems,
                                std::vector<std::unique_ptr<fabric_internal::Listener>>* out,
                                int* restarted) {
  auto& listeners = *out;
  const size_t n = spec.hops.size();
  const std::vector<int> first = FirstPorts(spec);
  std::vector<int> ports(n, -1), forward_to(n, 0);
  for (size_t k = 0; k < n; ++k) {
    forward_to[k] = k + 1 < n ? first[k + 1] : 0;
    listeners[k] = StartHop(spec, k, ids, pems, first[k], forward_to[k]);
  }
  for (size_t k = 0; k < n; ++k) ports[k] = listeners[k]->WaitPort();
  // From the last hop back: a restarted hop may itself move.
  for (size_t k = n - 1; k > 0; --k) {
    if (ports[k] < 0 || ports[k - 1] < 0 || forward_to[k - 1] == ports[k]) continue;
    listeners[k - 1]->Cancel("started again: " + spec.hops[k].node + " listens on port " +
                             std::to_string(ports[k]));
    listeners[k - 1]->Join();
    forward_to[k - 1] = ports[k];
    listeners[k - 1] = StartHop(spec, k - 1, ids, pems, first[k - 1], forward_to[k - 1]);
    ports[k - 1] = listeners[k - 1]->WaitPort();
    ++*restarted;
  }
  return ports;
}

}  // namespace

std::string FabricRelayCommand(const std::string& target_cmd, const std::string& next_address,
                               int next_port, const std::string& next_identity,
                               const FabricLimits& limits) {
  const std::string send =
      FabricSendScript(next_address, next_port, next_identity, kForwardPayload, limits);
  // fd 4: the pipe to the forward; fd 5: this hop's stdout (the channel).
  // The forward connects once this hop's own upstream connected
  // (kAwaitUpstream): all hops' listeners start at once (FabricChain), and
  // the next one listens by the time the source connects to the first.
  return "awk '/^-----BEGIN/ { n++ } n == 2' \"$d/psk\" >\"$d/psk2\" || exit 1\n"
         "exec 5>&1\n"
         "{ tee -p /dev/fd/4 | (\n" +
         target_cmd + "\n) 4>&- >&5; echo $? >\"$d/lrc\"; } 4>&1 | {\n" + kAwaitUpstream +
         "if [ -n \"$fwd\" ]; then up=\"$d\" sh -c " + ShellQuote(send) +
         " 3<&0 <\"$d/psk2\" >/dev/null 2>\"$d/ferr\"; echo $? >\"$d/frc\"\n"
         "else echo 'no stream came to this hop' >\"$d/ferr\"; echo 1 >\"$d/frc\"; fi; }\n"
         "frc=$(cat \"$d/frc\" 2>/dev/null); lrc=$(cat \"$d/lrc\" 2>/dev/null)\n"
         "[ \"$frc\" = 0 ] || echo \"" +
         kForwardMark +
         "exit ${frc:-?}: $(tr '\\n' ' ' <\"$d/ferr\" | head -c 600)\" >&2\n"
         "exit ${lrc:-1}\n";
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
  const auto start = std::chrono::steady_clock::now();
  const size_t n = spec.hops.size();
  result.hops.resize(n);
  std::vector<std::string> ids(n), pems(n);
  for (size_t k = 0; k < n; ++k) {
    ids[k] = fabric_internal::RandomIdentity();
    pems[k] = FabricSessionPem(fabric_internal::RandomKeyHex());
    if (pems[k].empty() || ids[k].size() < 7) {
      result.source = Status::Error("cannot make the transfer's keys");
      result.unconnected = true;
      return result;
    }
  }
  std::vector<std::unique_ptr<fabric_internal::Listener>> listeners(n);
  const std::vector<int> ports = StartListeners(spec, ids, pems, &listeners, &result.restarted);
  const auto down = std::find(ports.begin(), ports.end(), -1);
  if (down != ports.end()) {
    // A listener did not come up: the others wait for a connection that
    // will not come. They are stopped (not lost: they answered).
    result.unconnected = true;
    const std::string why =
        "not started: " + spec.hops[down - ports.begin()].node + "'s listener did not come up";
    result.source = Status::Error(why);
    for (size_t k = 0; k < n; ++k)
      if (ports[k] > 0) listeners[k]->Cancel(why);
  } else {
    result.source = spec.source->Run(
        FabricSendScript(spec.hops[0].address, ports[0], ids[0], spec.source_cmd, spec.limits),
        pems[0]);
    if (result.source.ok() && result.source->exit_code == kFabricUnconnectedExit)
      result.unconnected = true;
    // No hop got a connection: each waits for one that will not come.
    if (result.source.ok() && NeverConnected(result.source->exit_code))
      for (auto& listener : listeners)
        listener->Cancel("the source did not connect: " + result.SourceProblem());
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
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace fleet
