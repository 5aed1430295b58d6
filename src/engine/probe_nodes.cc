#include "src/engine/probe_nodes.h"

#include <openssl/rand.h>
#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "providers/node/node_provider.h"
#include "providers/shared/gpu_facts.h"
#include "src/engine/probe_script.h"

namespace fleet {

namespace {

std::string RandomNonce() {
  unsigned char b[8];
  if (RAND_bytes(b, sizeof b) != 1) return "0";
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned char c : b) {
    s += hex[c >> 4];
    s += hex[c & 15];
  }
  return s;
}

// Runs fn(i) for i in [0, n) on up to `parallelism` threads.
void ParallelFor(size_t n, int parallelism, const std::function<void(size_t)>& fn) {
  std::atomic<size_t> next{0};
  size_t workers = std::min<size_t>(n, std::max(1, parallelism));
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i = next++; i < n; i = next++) fn(i);
    });
  for (auto& t : threads) t.join();
}

// Two fragments around the others: the node's clock at the start and the end
// of the probe script, so that -v can tell the time on the node from the
// time on the wire.
constexpr const char* kClockBegin = "@clock.begin";
constexpr const char* kClockEnd = "@clock.end";
constexpr const char* kClockScript = "date +%s%N 2>/dev/null";

// The section of a provider's InventoryScript: "inventory" is no type, so no
// resource's address.
std::string InventoryAddress(const std::string& type, const std::string& node) {
  return "inventory." + type + "@" + node;
}

// "probe dgx1: 0.41 s (ssh 0.12 s; on the node 0.290 s; fleet-probe 0.05 s,
// no CUDA context: fleet serve fleet-x runs on the node ...)": the wall time
// of the node's probe (connect + the one round trip), the part that was not
// the script running on the node, the script's own time there, and what
// fleet-probe took and decided.
std::string DescribeProbeTime(const std::string& node, double wall_s,
                              const std::map<std::string, ProbeSection>& sections,
                              const NodeFacts& facts) {
  std::string s = fmt::format("probe {}: {:.2f} s", node, wall_s);
  auto clock = [&](const char* key) -> long double {
    auto it = sections.find(key);
    if (it == sections.end()) return -1;
    try {
      return std::stold(it->second.output);
    } catch (...) {
      return -1;
    }
  };
  const long double begin = clock(kClockBegin), end = clock(kClockEnd);
  std::vector<std::string> parts;
  if (begin > 0 && end >= begin) {
    const double node_s = double(end - begin) / 1e9;
    parts.push_back(fmt::format("ssh {:.2f} s", std::max(0.0, wall_s - node_s)));
    // In ms: what a converged plan costs on the node (bench/plan_bench.sh).
    parts.push_back(fmt::format("on the node {:.3f} s", node_s));
  }
  GpuFacts gpu;
  if (facts.gpu_probe_s >= 0 && GpuFactsFromJson(facts.gpu, &gpu))
    parts.push_back(
        fmt::format("fleet-probe {:.3f} s, {}", facts.gpu_probe_s, gpu.context_decision));
  for (size_t i = 0; i < parts.size(); ++i) s += (i == 0 ? " (" : "; ") + parts[i];
  return parts.empty() ? s : s + ")";
}

// One node's probe, which ProbeNodes runs for every node in parallel.
class NodeProber {
 public:
  explicit NodeProber(const ProbeSetting& setting) : s_(setting) {}

  // Reads `node`'s switch into `facts`, when it has one and there is a
  // controller.
  void ReadSwitch(const std::string& node, NodeFacts* facts) const;

  void ProbeNode(const std::string& node, const std::vector<const DesiredResource*>& resources,
                 bool inventory, ProbeResult& out) const;

 private:
  const Provider* ProviderFor(const std::string& type) const {
    for (const auto& p : *s_.providers)
      if (p->type() == type) return p.get();
    return nullptr;
  }

  const ProbeSetting& s_;
};

void NodeProber::ReadSwitch(const std::string& node, NodeFacts* facts) const {
  if (s_.power == nullptr) return;
  const NodeSpec& spec = s_.manifest->nodes.at(node);
  if (!spec.power.present || spec.power.switch_entity.empty()) return;
  Result<std::string> state = s_.power->GetState(spec.power.switch_entity);
  if (state.ok()) {
    facts->power_switch_state = *state;
  } else {
    facts->power_switch_error = state.status().message();
    facts->power_switch_refused = !state.status().unreachable();
  }
}

void NodeProber::ProbeNode(const std::string& node,
                           const std::vector<const DesiredResource*>& resources, bool inventory,
                           ProbeResult& out) const {
  NodeFacts& facts = out.facts[node];
  const NodeSpec& spec = s_.manifest->nodes.at(node);
  Transport* t = s_.connections->Get(node);
  const auto started = s_.clock->SteadyNow();
  Status s = t->Connect();
  if (!s.ok()) {
    facts.reachable = false;
    facts.unreachable_reason = s.message();
    if (!s.unreachable()) out.node_errors[node] = s.message();
    return;
  }
  // Node facts first: the other fragments' parsers may need them.
  // A resource with no fragment is read from the node facts alone (an
  // image pinned by digest: the node's image listing).
  // The node's clock only for -v, which prints the time on the node: two
  // `date` processes cost every plan ~6 ms there otherwise.
  const bool clocked = spdlog::should_log(spdlog::level::info);
  std::vector<ProbeFragment> fragments;
  if (clocked) fragments.push_back({kClockBegin, kClockScript});
  std::set<std::string> from_facts;
  for (const DesiredResource* r : resources) {
    const Provider* p = ProviderFor(r->type);
    std::string script = p->ProbeScript(*r, spec);
    if (!script.empty()) fragments.push_back({r->address, script});
    if (script.empty()) from_facts.insert(r->address);
  }
  if (inventory)
    for (const auto& p : *s_.providers) {
      std::string script = p->InventoryScript(node, *s_.manifest);
      if (!script.empty()) fragments.push_back({InventoryAddress(p->type(), node), script});
    }
  if (clocked) fragments.push_back({kClockEnd, kClockScript});
  const std::string nonce = RandomNonce();
  Result<CommandResult> run = t->Run(BuildProbeScript(fragments, nonce));
  const double wall_s = std::chrono::duration<double>(s_.clock->SteadyNow() - started).count();
  spdlog::debug("{}: probed {} resource(s) in one round trip", node,
                fragments.size() - (clocked ? 2 : 0));
  if (!run.ok()) {
    facts.reachable = false;
    facts.unreachable_reason = run.status().message();
    if (!run.status().unreachable()) out.node_errors[node] = run.status().message();
    return;
  }
  std::map<std::string, ProbeSection> sections = SplitProbeOutput(run->out, nonce);
  facts = ParseNodeFacts(sections[NodeAddress(node)].output);
  spdlog::info("{}", DescribeProbeTime(node, wall_s, sections, facts));
  for (const DesiredResource* r : resources) {
    // The node itself is read from the node's facts even when its own
    // fragment printed nothing (a probe cut short).
    const Provider* p = ProviderFor(r->type);
    auto it = sections.find(r->address);
    if (it == sections.end() && !p->IsNodeItself() && !from_facts.count(r->address)) continue;
    ActualResource a = p->ParseProbe(*r, it == sections.end() ? "" : it->second.output, facts);
    if (it != sections.end() && it->second.exit_code != 0 && a.error.empty())
      a.error = it->second.exit_code == -1
                    ? "its probe fragment ended the node's probe shell (an exit?)"
                    : "probe exited " + std::to_string(it->second.exit_code);
    out.actual[r->address] = std::move(a);
  }
  for (const auto& p : *s_.providers) {
    auto it = sections.find(InventoryAddress(p->type(), node));
    if (it != sections.end() && it->second.exit_code == 0)
      out.inventory[node][p->type()] = it->second.output;
  }
}

}  // namespace

ProbeResult ProbeNodes(const ProbeSetting& setting, const std::vector<DesiredResource>& desired,
                       int parallelism, const std::set<std::string>& inventory_nodes) {
  const NodeProber prober(setting);
  std::map<std::string, std::vector<const DesiredResource*>> by_node;
  for (const DesiredResource& r : desired) by_node[r.node].push_back(&r);
  std::vector<std::string> nodes;
  for (const auto& [n, _] : by_node) nodes.push_back(n);

  std::vector<ProbeResult> partial(nodes.size());
  ParallelFor(nodes.size(), parallelism, [&](size_t i) {
    const std::string& node = nodes[i];
    // The switch is read while the node is probed (one HTTP request beside
    // the SSH round trip), whatever the probe finds.
    NodeFacts switch_read;
    const NodeSpec& spec = setting.manifest->nodes.at(node);
    std::thread reader;
    if (setting.power != nullptr && spec.power.present)
      reader = std::thread([&] { prober.ReadSwitch(node, &switch_read); });
    prober.ProbeNode(node, by_node[node], inventory_nodes.count(node) > 0, partial[i]);
    if (reader.joinable()) reader.join();
    NodeFacts& facts = partial[i].facts[node];
    facts.power_switch_state = std::move(switch_read.power_switch_state);
    facts.power_switch_error = std::move(switch_read.power_switch_error);
    facts.power_switch_refused = switch_read.power_switch_refused;
  });

  ProbeResult merged;
  for (ProbeResult& p : partial) {
    merged.facts.merge(p.facts);
    merged.actual.merge(p.actual);
    merged.node_errors.merge(p.node_errors);
    merged.inventory.merge(p.inventory);
  }
  return merged;
}

}  // namespace fleet
