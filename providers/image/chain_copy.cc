#include "providers/image/chain_copy.h"

#include <memory>
#include <optional>
#include <set>
#include <thread>

#include "providers/shared/fabric_chain.h"
#include "providers/shared/fabric_route.h"
#include "src/provider.h"
#include "src/shell_quote.h"

namespace fleet {

namespace image_chain {

using Target = ImageChainDelivery::Target;

struct Member {
  std::string node, address, cli;
  std::unique_ptr<Transport> t;
};

bool Holds(Transport* t, const std::string& cli, const std::string& config) {
  Result<ImageLookup> l = InspectImage(t, cli, config);
  return l.ok() && l->found && l->id == config;
}

// One hop's checks before the chain (its own connection, so that the hops
// are checked at once): reachable, lacking the image, its fabric address
// still up. Sets `out` when the hop is no part of the chain.
std::optional<Member> CheckHop(const CopyRoute::Hop& hop, const std::string& config,
                               const Manifest& m, Target* out) {
  Result<std::unique_ptr<Transport>> t = ConnectNode(m, hop.node);
  if (!t.ok()) {
    out->problem = "unreachable when the chain started: " + t.status().message();
    return std::nullopt;
  }
  const std::string cli = m.nodes.at(hop.node).container_cli;
  if (Holds(t->get(), cli, config)) {
    out->already = true;
    return std::nullopt;
  }
  Result<std::string> problem = FabricAddressProblem(t->get(), hop.node, hop.address);
  if (!problem.ok() || !problem->empty()) {
    out->on_its_own = true;
    out->problem = problem.ok() ? *problem : problem.status().message();
    return std::nullopt;
  }
  return Member{hop.node, hop.address, cli, std::move(t.value())};
}

// The chain's hops the image can go to, checked at once; the others'
// outcomes are set here.
std::vector<Member> Reachable(const CopyRoute& route, const std::string& config, const Manifest& m,
                              Transport* source, ImageChainDelivery* d) {
  const size_t n = route.chain.size();
  std::vector<std::optional<Member>> found(n);
  std::vector<Target> outs(n);
  std::vector<std::thread> checks;
  for (size_t k = 0; k < n; ++k)
    checks.emplace_back([&, k] { found[k] = CheckHop(route.chain[k], config, m, &outs[k]); });
  for (std::thread& t : checks) t.join();
  std::vector<std::string> addresses;
  for (const std::optional<Member>& x : found)
    if (x) addresses.push_back(x->address);
  Result<std::set<std::string>> unrouted = UnroutedAddresses(source, addresses);
  std::vector<Member> hops;
  for (size_t k = 0; k < n; ++k) {
    if (found[k] && !unrouted.ok()) {
      outs[k].on_its_own = true;
      outs[k].problem = unrouted.status().message();
    } else if (found[k] && unrouted->count(found[k]->address)) {
      outs[k].on_its_own = true;
      outs[k].problem = route.from + " has no route to " + found[k]->address;
    } else if (found[k]) {
      hops.push_back(std::move(*found[k]));
    }
    d->targets[route.chain[k].node] = outs[k];
  }
  return hops;
}

std::string Route(const std::string& from, const std::vector<Member*>& hops) {
  std::string line = from;
  for (const Member* h : hops) line += " \u2192 " + h->node;
  return line;
}

// One stream from `from` through `hops`; the outcome of each hop.
void StreamThrough(Transport* from, const std::string& from_cli, const std::string& from_node,
                   const std::vector<Member*>& hops, const std::string& config,
                   ImageChainDelivery* d, const ProgressFn& progress, Clock* clock) {
  FabricChainSpec spec;
  spec.clock = clock;
  spec.source = from;
  spec.source_cmd = ShellCommand({from_cli, "save", config});
  for (Member* h : hops)
    spec.hops.push_back({h->node, h->t.get(), ShellCommand({h->cli, "load"}), h->address});
  const std::string route = Route(from_node, hops);
  if (progress)
    progress("copying " + ShortId(config) + " " + route + " over the fabric, one chain: `" +
             spec.source_cmd + "` | TLS-PSK | `load` at each hop, forwarded as it arrives");
  FabricChainResult r = FabricChain(spec);
  for (size_t k = 0; k < hops.size(); ++k) {
    Target& out = d->targets[hops[k]->node];
    const FabricHopResult& hop = r.hops[k];
    out.delivered = hop.delivered() && !r.unconnected;
    out.on_its_own = r.unconnected;
    if (out.delivered) {
      out.problem.clear();
      out.loaded = ParseLoadedNames(hop.target->out + "\n" + hop.target->err);
    } else if (r.unconnected) {
      out.problem = "no connection over the fabric: " + r.SourceProblem();
    } else if (!hop.target.ok()) {
      out.lost = true;
      out.problem = hops[k]->node + " was lost mid-transfer (" + hop.Problem() + ")";
    } else {
      out.problem = "the stream " + route + " failed at " + hops[k]->node + ": " + hop.Problem() +
                    (r.SourceProblem().empty() ? "" : "; source: " + r.SourceProblem());
    }
  }
  if (progress) {
    char took[64];
    snprintf(took, sizeof took, "%.1f s", r.seconds);
    std::string lost;
    for (size_t k = 0; k < hops.size(); ++k)
      if (!r.hops[k].target.ok()) lost += (lost.empty() ? "" : ", ") + hops[k]->node;
    progress("chain " + route + ": " + took + (lost.empty() ? "" : "; lost: " + lost));
  }
}

ImageChainDelivery Run(const CopyRoute& route, const std::string& config, const Manifest& m,
                       const ProgressFn& progress, Clock* clock) {
  ImageChainDelivery d;
  Result<std::unique_ptr<Transport>> source = ConnectNode(m, route.from);
  if (!source.ok()) {
    for (const CopyRoute::Hop& hop : route.chain)
      d.targets[hop.node] = Target{false, {}, false, true, false, source.status().message()};
    return d;
  }
  const std::string source_cli = m.nodes.at(route.from).container_cli;
  std::vector<Member> members = Reachable(route, config, m, source->get(), &d);
  std::vector<Member*> hops;
  for (Member& h : members) hops.push_back(&h);
  if (hops.empty()) return d;
  StreamThrough(source->get(), source_cli, route.from, hops, config, &d, progress, clock);
  // Re-route once: the hops that failed but answer still, from the last
  // hop before the first of them that holds the image whole, else the source.
  std::vector<Member*> again;
  Member* holder = nullptr;
  for (Member* h : hops) {
    const Target& out = d.targets[h->node];
    if (out.delivered && again.empty()) holder = h;
    if (!out.delivered && !out.on_its_own && !out.lost) again.push_back(h);
  }
  if (again.empty()) return d;
  if (holder != nullptr && !Holds(holder->t.get(), holder->cli, config)) holder = nullptr;
  const std::string from = holder ? holder->node : route.from;
  if (progress)
    progress("re-routing " + Route(from, again) + " after: " + d.targets[again[0]->node].problem);
  StreamThrough(holder ? holder->t.get() : source->get(), holder ? holder->cli : source_cli, from,
                again, config, &d, progress, clock);
  for (Member* h : again)
    if (d.targets[h->node].delivered) d.targets[h->node].via = from;
  return d;
}

}  // namespace image_chain

ImageChainDelivery RunImageChain(const CopyRoute& route, const std::string& config,
                                 const Manifest& m, const ProgressFn& progress, Clock* clock) {
  return image_chain::Run(route, config, m, progress, clock);
}

}  // namespace fleet
