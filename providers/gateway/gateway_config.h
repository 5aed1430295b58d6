// What a gateway routes, and the HAProxy config fleet writes for it.
//
// A gateway is one HAProxy frontend on its port: a chat or completion is
// routed by the `model` of its JSON body to a backend per model, whose
// servers are the heads of the deployments serving that model (replicas are
// balanced, each health-checked on its deployment's health path). The
// gateway answers `GET /v1/models` itself from the routed models, an
// unknown model with an OpenAI-shaped 404 naming the routed ones, and
// `/metrics` with HAProxy's own Prometheus exporter.
//
// Every answer to /v1/models carries the header x-fleet-config: <hash of
// the routes and settings>, so a probe reads which config the running
// HAProxy has loaded, not only which one is written on the node.
#ifndef FLEET_PROVIDERS_GATEWAY_GATEWAY_CONFIG_H_
#define FLEET_PROVIDERS_GATEWAY_GATEWAY_CONFIG_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/gateway/gateway_keys.h"

namespace fleet {

// One route: a model name clients ask for, to one serve's head.
struct GatewayRoute {
  std::string model;       // the served model name
  std::string deployment;  // manifest name
  std::string node;        // the head's node
  std::string host;        // the head's address, as the gateway reaches it
  int port = 0;
  std::string health_path = "/health";
  // The deployment's max_request: the largest body the gateway holds for
  // it (the gateway's buffer is the largest of its routes').
  uint64_t max_request = uint64_t{4} << 20;
  // The gateway's health check of this serve: how long one check may wait
  // for an answer (health.request_timeout) and how many failed in a row
  // drop the serve (health.grace).
  int check_timeout_s = 5;
  int fall = 2;
  // The head's node follows demand (power state on_demand): it may sleep,
  // and a gateway with `wake` gives the model a backup server at fleet's
  // wake listener.
  bool wakes = false;

  auto operator<=>(const GatewayRoute&) const = default;
  // "qwen3.8 -> dgx3:30000": how the plan shows it.
  std::string Text() const;
};

// What a gateway declares on one node (DesiredResource::attributes).
struct GatewayWant {
  std::string gateway;    // manifest name
  std::string container;  // "fleet-gw-<gateway>"
  std::string cli;        // the node's container CLI
  std::string image;      // ImageSpec name
  std::string image_ref;
  int port = 0;
  int drain_s = 60;
  std::vector<GatewayRoute> routes;  // sorted
  // keys: or keys_env: declared: every request needs a key (its digest in
  // `keys`); false: the gateway is open.
  bool keyed = false;
  std::vector<GatewayKeyGrant> keys;  // sorted by name
  // Why the keys could not be read (a plan error); never a key's text.
  std::string keys_error;
  // wake: where the gateway reaches fleet's wake listener ("HOST:PORT"; ""
  // without `wake`) and how long a request may wait there (wake.hold).
  std::string wake_listener;
  int wake_hold_s = 0;
  // sha256 of what the container is started with (its fleet.spec label):
  // a change replaces the container. The routes are not part of it: a
  // change of routes is a reload.
  std::string spec;
  // sha256 of the routes and settings the config is rendered from.
  std::string config;
  // Routed deployments whose model name is not known: a plan error.
  std::vector<std::string> unnamed;
  // Routes left out because a word of theirs could change the config's
  // meaning (GatewayRouteProblem), each "deployment 'a' on dgx1: <why>": a
  // plan error.
  std::vector<std::string> unsafe;
};

// What a gateway's state record holds: the routes and settings its HAProxy
// answered with when apply ended, and its container.
struct GatewayRecord {
  GatewayWant want;
  std::string container_id;
};

// PlanChange::detail of a gateway step: enough to remove it when the
// manifests no longer say how.
struct GatewayDetail {
  std::string gateway;
  std::string cli;
};

// The same serve (model, deployment, node, address): what a reload moves
// clients to or away from, whatever the check settings.
bool SameServe(const GatewayRoute& a, const GatewayRoute& b);

// HAProxy's tune.bufsize for `want`: its routes' largest max_request, plus
// room for the headers and HAProxy's own use of the buffer. A request is
// held whole in one such buffer while its `model` is read.
uint64_t GatewayBufferSize(const GatewayWant& want);

// Model -> the name of its HAProxy backend ("model_qwen3.8"), the `proxy`
// label of its metrics.
std::map<std::string, std::string> GatewayBackendNames(const GatewayWant& want);

// "fleet-gw-<gateway>".
std::string GatewayContainerName(const std::string& gateway);
// Where the config lives on the node, relative to the node user's home.
std::string GatewayConfigDir(const std::string& gateway);
// Where the container sees that directory (bound read-only).
inline constexpr const char* kGatewayConfigMount = "/usr/local/etc/haproxy";
inline constexpr const char* kGatewayConfigHeader = "x-fleet-config";
inline constexpr const char* kGatewayLabel = "fleet.gateway";
// The response header naming the server that answered: "<deployment>_<node>".
inline constexpr const char* kGatewayServedByHeader = "x-fleet-served-by";
// The backup server of a model that may sleep: fleet's wake listener.
inline constexpr const char* kGatewayWakeServer = "fleet_wake";

// "" when every word of `route` that RenderHaproxyConfig writes is safe to
// write (no character of it can change the config's meaning), else why
// not: the model passes the served name check (manifests/served_name.h),
// the deployment and node are names, the host an address, the health path
// a plain HTTP path.
std::string GatewayRouteProblem(const GatewayRoute& route);

// Fills want->spec and want->config from the other fields.
// REQUIRES: want->routes sorted.
void SealGatewayWant(GatewayWant* want);

// The HAProxy config of `want` (master-worker; reloaded by SIGUSR2). A
// route with a GatewayRouteProblem is left out of it (the plan refuses
// such a route before; this is the writer's own line of defence). Only
// the OpenAI API (/v1/...) is forwarded to a serve; any other path but the
// gateway's own /health and /metrics is answered 404 by HAProxy itself.
// With keys, every request but /health, /metrics and /metrics/keys needs
// `Authorization: Bearer KEY` whose SHA-256 is a grant's (else an
// OpenAI-shaped 401, before any body is read), and a grant of the model it
// asks for (else 403); /v1/models lists the key's models; /metrics/keys
// counts each key's requests (a stick table; reset by a reload).
// With a wake listener, the backend of a model with a route that wakes
// also has a `backup` server "fleet_wake" at the listener: HAProxy sends it
// a request only while every serve of the model is down, and waits for its
// answer up to wake.hold plus a minute.
// Its "# fleet-route <model> <deployment> <node> <host>:<port>" comment lines
// let a probe read the routes back (ParseConfigRoutes) and its
// "# fleet-config <hash>" line the config written.
std::string RenderHaproxyConfig(const GatewayWant& want);
std::vector<GatewayRoute> ParseConfigRoutes(const std::string& config);

// The plan's lines for a change of routes: "+ <new route>", "- <old route>",
// in model order.
std::vector<std::string> RouteDifferences(const std::vector<GatewayRoute>& before,
                                          const std::vector<GatewayRoute>& after);

void to_json(nlohmann::json& j, const GatewayRoute& v);
void from_json(const nlohmann::json& j, GatewayRoute& v);
void to_json(nlohmann::json& j, const GatewayWant& v);
void from_json(const nlohmann::json& j, GatewayWant& v);
void to_json(nlohmann::json& j, const GatewayRecord& v);
void from_json(const nlohmann::json& j, GatewayRecord& v);
void to_json(nlohmann::json& j, const GatewayDetail& v);
void from_json(const nlohmann::json& j, GatewayDetail& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_GATEWAY_GATEWAY_CONFIG_H_
