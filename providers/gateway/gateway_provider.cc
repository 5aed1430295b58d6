#include "providers/gateway/gateway_provider.h"

#include <algorithm>

#include "providers/gateway/gateway_steps.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/smoke_check.h"
#include "state/state.h"

namespace fleet {
namespace {

// The head's address as another node reaches it: the node's address, or
// the one a `--host` argument binds the serve to.
std::string RouteHost(const NodeSpec& node, const ContainerSpec& spec) {
  if (spec.health_host != "127.0.0.1") return spec.health_host;
  return ClientAddress(node);
}

GatewayWant WantFor(const Manifest& m, const GatewaySpec& g, const NodeSpec& node,
                    const std::vector<GatewayRoute>& routes,
                    const std::vector<std::string>& unnamed,
                    const std::vector<std::string>& unsafe) {
  GatewayWant w;
  w.gateway = g.name;
  w.container = GatewayContainerName(g.name);
  w.cli = node.container_cli;
  w.image = g.image;
  if (auto it = m.images.find(g.image); it != m.images.end()) w.image_ref = it->second.ref;
  w.port = g.port;
  w.drain_s = g.drain_s;
  w.routes = routes;
  w.unnamed = unnamed;
  w.unsafe = unsafe;
  if (g.wake.present)
    w.wake_listener = g.wake.listener_host + ":" + std::to_string(g.wake.listener_port);
  w.wake_hold_s = g.wake.present ? g.wake.hold_s : 0;
  // The keys are read here, on the controller, each plan: only their
  // digests go into the want (and so the plan, the state and the config).
  w.keyed = !g.keys_path.empty() || !g.keys_env.empty();
  if (w.keyed) {
    Result<std::vector<GatewayKey>> keys = LoadGatewayKeys(g);
    if (keys.ok())
      w.keys = KeyGrants(*keys);
    else
      w.keys_error = keys.status().message();
  }
  SealGatewayWant(&w);
  return w;
}

std::string RouteCount(const GatewayWant& w) {
  return std::to_string(w.routes.size()) + (w.routes.size() == 1 ? " route" : " routes");
}

// The routes the gateway serves now: those apply last confirmed loaded (the
// record), else those written on the node.
std::vector<GatewayRoute> RoutesBefore(const ResourceRecord* record, const GatewayProbe& p) {
  if (record != nullptr && record->attributes.is_object()) {
    std::vector<GatewayRoute> recorded = record->attributes.get<GatewayRecord>().want.routes;
    if (!recorded.empty()) return recorded;
  }
  return p.written_routes;
}

// The serves this gateway stops routing to: their removal waits for the
// reload (create before destroy), or, where it must come first, the model
// has no serve behind the gateway meanwhile.
std::vector<PlanChange::RemovalAfter> RoutedAway(const GatewayWant& want,
                                                 const ResourceRecord* record,
                                                 const GatewayProbe& p) {
  std::vector<PlanChange::RemovalAfter> out;
  for (const GatewayRoute& r : RoutesBefore(record, p)) {
    if (std::any_of(want.routes.begin(), want.routes.end(),
                    [&](const GatewayRoute& w) { return SameServe(w, r); }))
      continue;
    const std::string serve = ResourceAddress("deployment", r.deployment, r.node);
    out.push_back({serve, "gateway " + want.gateway + " answers 503 for " + r.model +
                              " from the stop of " + serve +
                              " until this reload (its new nodes are not free: stop first)"});
  }
  return out;
}

// A routed serve replaced in place stops before its successor binds its
// port: the plan says the gateway has nothing to send that model to
// meanwhile (unless another serve of it stays up).
std::vector<std::string> ReplacedInPlace(const GatewayWant& want, const DiffContext& ctx) {
  std::vector<std::string> out;
  if (ctx.planned == nullptr) return out;
  for (const GatewayRoute& r : want.routes) {
    const std::string serve = ResourceAddress("deployment", r.deployment, r.node);
    const bool replaced = std::any_of(
        ctx.planned->begin(), ctx.planned->end(),
        [&](const PlanChange& c) { return c.address == serve && c.action == Action::kReplace; });
    const int serves = std::count_if(want.routes.begin(), want.routes.end(),
                                     [&](const GatewayRoute& x) { return x.model == r.model; });
    if (replaced && serves == 1)
      out.push_back("gateway " + want.gateway + " answers 503 for " + r.model + " while " + serve +
                    " is replaced in place (the new container needs the old one's port)");
  }
  return out;
}

}  // namespace

std::vector<GatewayRoute> GatewayRoutes(const Manifest& m, std::vector<std::string>* unnamed,
                                        std::vector<std::string>* unsafe) {
  std::vector<GatewayRoute> routes;
  for (const auto& [name, d] : m.deployments) {
    if (!d.routed) continue;
    for (const std::string& node : d.nodes) {
      Result<ContainerSpec> spec = RenderContainerSpec(m, name, node);
      auto n = m.nodes.find(node);
      if (!spec.ok() || n == m.nodes.end() || spec->rank > 0) continue;  // a worker
      GatewayRoute r{d.served_model, name,         node, RouteHost(n->second, *spec),
                     d.port,         d.health.path};
      r.max_request = d.max_request_bytes;
      r.check_timeout_s = d.health.request_timeout_s;
      r.fall = d.health.grace_rounds;
      r.wakes = n->second.power.present && n->second.power.state == "on_demand";
      if (r.model.empty()) r.model = ExpectedServedModel(m, *spec);
      if (r.model.empty()) {
        if (std::find(unnamed->begin(), unnamed->end(), name) == unnamed->end())
          unnamed->push_back(name);
        continue;
      }
      if (const std::string problem = GatewayRouteProblem(r); !problem.empty()) {
        if (unsafe != nullptr)
          unsafe->push_back("deployment " + name + " on " + node + ": " + problem);
        continue;
      }
      routes.push_back(std::move(r));
    }
  }
  std::sort(routes.begin(), routes.end());
  return routes;
}

std::vector<DesiredResource> GatewayProvider::Expand(const Manifest& m) const {
  std::vector<DesiredResource> out;
  if (m.gateways.empty()) return out;
  std::vector<std::string> unnamed, unsafe;
  const std::vector<GatewayRoute> routes = GatewayRoutes(m, &unnamed, &unsafe);
  for (const auto& [name, g] : m.gateways)
    for (const std::string& node : g.nodes) {
      auto n = m.nodes.find(node);
      if (n == m.nodes.end()) continue;  // the loader reports unknown nodes
      DesiredResource r;
      r.address = ResourceAddress("gateway", name, node);
      r.type = "gateway";
      r.name = name;
      r.node = node;
      r.attributes = WantFor(m, g, n->second, routes, unnamed, unsafe);
      r.depends_on = {NodeAddress(node), ResourceAddress("image", g.image, node)};
      // A reload waits for the serves it routes to: a moved serve answers
      // before clients are sent to it.
      for (const GatewayRoute& route : routes)
        r.depends_on.push_back(ResourceAddress("deployment", route.deployment, route.node));
      r.loc = g.loc;
      out.push_back(std::move(r));
    }
  return out;
}

std::string GatewayProvider::UnplannedCost(const DesiredResource&) const {
  return "its clients get no answer";
}

std::string GatewayProvider::ProbeScript(const DesiredResource& r, const NodeSpec&) const {
  return GatewayProbeScript(r.attributes.get<GatewayWant>());
}

ActualResource GatewayProvider::ParseProbe(const DesiredResource& r, const std::string& output,
                                           const NodeFacts&) const {
  ActualResource a;
  a.probed = true;
  const GatewayProbe p = ParseGatewayProbe(output);
  a.exists = p.exists;
  a.attributes = p;
  if (!p.cli_found)
    a.error =
        "container_cli '" + r.attributes.get<GatewayWant>().cli + "' not found on the node's PATH";
  return a;
}

PlanChange GatewayProvider::Diff(const DesiredResource& desired, const ActualResource& actual,
                                 const ResourceRecord* record, const DiffContext& ctx) const {
  PlanChange c = ChangeFor(desired);
  const GatewayWant want = desired.attributes.get<GatewayWant>();
  c.after = want;
  c.before = record != nullptr ? record->attributes : nlohmann::json();
  const GatewayProbe p = actual.attributes.get<GatewayProbe>();
  const std::string what = "gateway " + want.gateway;
  if (!want.unnamed.empty()) {
    c.error = what + ": deployment " + want.unnamed.front() +
              " serves no model name fleet can read (no --served-model-name or --model in its "
              "recipe); set its served_model, or gateway: false";
  } else if (!want.keys_error.empty()) {
    c.error = what + ": " + want.keys_error;
  } else if (!want.unsafe.empty()) {
    c.error = what + " cannot route " + want.unsafe.front() +
              " (a word of its route could change the meaning of the gateway's HAProxy config)";
  } else if (!actual.error.empty()) {
    c.error = what + " on " + desired.node + ": " + actual.error;
  } else if (!p.exists) {
    c.action = Action::kCreate;
    c.summary =
        "start " + what + " on port " + std::to_string(want.port) + " (" + RouteCount(want) + ")";
    c.reasons = RouteDifferences({}, want.routes);
  } else if (p.spec != want.spec) {
    c.action = Action::kReplace;
    c.summary = "replace " + what + " (its image or port changed)";
    c.reasons = RouteDifferences(p.written_routes, want.routes);
    c.reasons.insert(c.reasons.begin(), "the container's spec " + p.spec.substr(0, 12) +
                                            " is not the declared " + want.spec.substr(0, 12));
  } else if (p.state != "running") {
    c.action = Action::kUpdate;
    c.summary = "start " + what + " (" + p.state + ")";
    c.reasons = RouteDifferences(p.written_routes, want.routes);
  } else if (p.loaded != want.config) {
    c.action = Action::kUpdate;
    c.summary = "reload " + what + " with its new routes (hitless: no request dropped)";
    c.reasons = RouteDifferences(RoutesBefore(record, p), want.routes);
    if (c.reasons.empty())
      c.reasons.push_back("the running HAProxy answers with config " +
                          (p.loaded.empty() ? std::string("(none)") : p.loaded.substr(0, 12)) +
                          ", not the one declared");
  }
  c.detail = GatewayDetail{want.gateway, want.cli};
  if (c.action != Action::kNoop) c.before_removals = RoutedAway(want, record, p);
  for (std::string& gap : ReplacedInPlace(want, ctx)) c.reasons.push_back(std::move(gap));
  return c;
}

PlanChange GatewayProvider::DiffDestroy(const DesiredResource& desired,
                                        const ActualResource& actual, const ResourceRecord* record,
                                        const DiffContext&) const {
  PlanChange c = ChangeFor(desired);
  const GatewayWant want = desired.attributes.get<GatewayWant>();
  c.before = record != nullptr ? record->attributes : nlohmann::json();
  c.detail = GatewayDetail{want.gateway, want.cli};
  if (actual.exists || record != nullptr) {
    c.action = Action::kDelete;
    c.summary = "stop gateway " + want.gateway;
  }
  return c;
}

PlanChange GatewayProvider::DiffOrphan(const ResourceRecord& record, const DiffContext&) const {
  PlanChange c = ForgetRecord(record);
  const GatewayWant was = record.attributes.get<GatewayWant>();
  c.summary = "stop gateway " + was.gateway + " (no longer declared)";
  c.detail = GatewayDetail{was.gateway, was.cli};
  return c;
}

Result<nlohmann::json> GatewayProvider::Apply(const PlanChange& change,
                                              const StepContext& ctx) const {
  if (change.action == Action::kDelete) {
    const GatewayDetail detail = change.detail.get<GatewayDetail>();
    Status s = RemoveGateway(ctx, detail.cli, detail.gateway);
    if (!s.ok()) return s;
    return nlohmann::json();
  }
  GatewayWant want = change.after.get<GatewayWant>();
  Result<CommandResult> probed = RunOnNode(ctx, GatewayProbeScript(want));
  if (!probed.ok()) return probed.status();
  const GatewayProbe now = ParseGatewayProbe(probed->out);
  ContainerSpec image;  // what StagedImage reads
  image.cli = want.cli;
  image.container = want.container;
  image.image = want.image;
  image.image_ref = want.image_ref;
  image.node = change.node;
  Status s = WriteGatewayConfig(ctx, want);
  const bool fresh = !now.exists || now.spec != want.spec;
  if (s.ok() && fresh) {
    Result<std::string> image_id = StagedImage(ctx, image);
    if (!image_id.ok()) return image_id.status();
    if (now.exists) s = RemoveContainer(ctx, want.cli, want.container);
    if (s.ok()) s = RunGateway(ctx, want, *image_id);
  } else if (s.ok() && now.state != "running") {
    s = StartGateway(ctx, want);
  } else if (s.ok() && now.loaded != want.config) {
    s = ReloadGateway(ctx, want);
  }
  if (s.ok()) s = WaitGatewayLoaded(ctx, want);
  if (s.ok()) s = WaitGatewayDrained(ctx, want);
  if (!s.ok()) return s;
  Result<std::string> id = GatewayContainerId(ctx, want);
  if (!id.ok()) return id.status();
  return nlohmann::json(GatewayRecord{want, *id});
}

}  // namespace fleet
