#include "providers/gateway/gateway_config.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>

#include "manifests/served_name.h"
#include "providers/shared/blob_hash.h"

namespace fleet {
namespace {

// Bumped when RenderHaproxyConfig writes something else for the same
// routes, so that every gateway reloads into the new text.
// 3: only /v1/ paths are forwarded; the routed models are one ACL line each.
// 4: the buffer follows max_request, checks follow health, keys, /health
//    carries the config header.
constexpr int kConfigFormat = 4;

// Room in the buffer beyond the largest body: the request line and headers
// (HAProxy refuses headers over the buffer less tune.maxrewrite anyway),
// HTX's block records, and tune.maxrewrite's reserve.
constexpr uint64_t kBufferHeadroom = uint64_t{256} << 10;

// The buffer of a gateway that routes nothing yet: the default max_request.
constexpr uint64_t kDefaultMaxRequest = uint64_t{4} << 20;

// The stick table that counts each key's requests.
constexpr const char* kKeyTable = "fleet_keys";

// The models routed, each once, in order, with its backend's servers.
std::map<std::string, std::vector<const GatewayRoute*>> ByModel(const GatewayWant& w) {
  std::map<std::string, std::vector<const GatewayRoute*>> out;
  for (const GatewayRoute& r : w.routes) out[r.model].push_back(&r);
  return out;
}

// The backend of each routed model, named for it so that HAProxy's metrics
// read per model (proxy="model_qwen3.8"): characters a proxy name cannot
// hold become '_', and a name two models would share gets the model's index.
std::map<std::string, std::string> BackendNames(const GatewayWant& w) {
  std::map<std::string, std::string> out;
  std::set<std::string> used;
  int i = 0;
  for (const auto& [model, unused] : ByModel(w)) {
    std::string name = "model_" + model;
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
    if (!used.insert(name).second) name += "_" + std::to_string(i);
    used.insert(name);
    out[model] = name;
    ++i;
  }
  return out;
}

std::string ModelList(const GatewayWant& w) {
  nlohmann::json data = nlohmann::json::array();
  for (const auto& [model, unused] : ByModel(w))
    data.push_back({{"id", model}, {"object", "model"}, {"owned_by", "fleet"}});
  return nlohmann::json{{"object", "list"}, {"data", data}}.dump();
}

std::string OpenAiError(const std::string& message, const std::string& type,
                        const std::string& code, const nlohmann::json& param = "model") {
  return nlohmann::json{
      {"error", {{"message", message}, {"type", type}, {"param", param}, {"code", code}}}}
      .dump();
}

// Every byte of `s` is a letter, a digit or one of `extra`.
bool Only(const std::string& s, std::string_view extra) {
  return std::all_of(s.begin(), s.end(), [&](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || extra.find(c) != std::string_view::npos;
  });
}

// A manifest name (node, deployment): what the loader accepts.
bool IsName(const std::string& s) {
  return !s.empty() && std::isalnum(static_cast<unsigned char>(s[0])) && Only(s, "-_");
}

std::string NotRouted(const GatewayWant& w) {
  std::string names;
  for (const auto& [model, unused] : ByModel(w)) names += (names.empty() ? "" : ", ") + model;
  return OpenAiError("the model is not routed by gateway " + w.gateway +
                         "; routed: " + (names.empty() ? "(none)" : names) +
                         " (a body that did not arrive whole within the wait names no model)",
                     "invalid_request_error", "model_not_found");
}

void WriteGlobal(const GatewayWant& w, std::ostream& out) {
  out << "global\n"
      << "  master-worker\n"
      // A reload lets the old worker finish what it carries, for drain at most.
      << "  hard-stop-after " << w.drain_s
      << "s\n"
      // The body is read whole before routing (OpenAI clients write
      // `model` after `messages`): one buffer holds the largest request.
      // Buffers are taken per request in flight, not per connection.
      << "  tune.bufsize " << GatewayBufferSize(w) << "\n\n"
      << "defaults\n"
      << "  mode http\n"
      << "  timeout connect 5s\n"
      << "  timeout client 30m\n"
      << "  timeout server 30m\n"
      << "  timeout http-request 30s\n"
      << "  timeout http-keep-alive 10s\n"
      << "  retries 2\n"
      << "  option redispatch\n"
      << "  http-error status 503 content-type application/json string '"
      << OpenAiError("no serve of this model answers behind gateway " + w.gateway, "server_error",
                     "model_unavailable")
      << "'\n\n";
}

// Only the OpenAI API reaches a serve: an engine's other paths (admin,
// fault switches, profiling) are answered 404 by HAProxy itself. A path is
// forwarded when it is /v1/ and plain characters, without a dot segment
// (a serve that merged "/v1/../x" into "/x" would be reached otherwise) or
// a %-escape (which could hide one).
void WriteApiOnly(const GatewayWant& w, std::ostream& out) {
  const std::string not_found =
      OpenAiError("gateway " + w.gateway +
                      " forwards only the OpenAI API under /v1/ (and answers /health and "
                      "/metrics itself)",
                  "invalid_request_error", "not_found", nullptr);
  out << "  acl fleet_api path_reg '^/v1/[A-Za-z0-9._:@+/-]*$'\n"
      << "  acl fleet_dot_segment path_sub /.\n"
      << "  http-request return status 404 content-type application/json string '" << not_found
      << "' if !fleet_api || fleet_dot_segment\n";
}

// The list of models a key may use (every routed model when open).
std::string ModelListFor(const GatewayWant& w, const GatewayKeyGrant* grant) {
  if (grant == nullptr) return ModelList(w);
  GatewayWant visible = w;
  std::erase_if(visible.routes, [&](const GatewayRoute& r) { return !Grants(*grant, r.model); });
  return ModelList(visible);
}

// GET /v1/models, answered by HAProxy itself: open, or one line per key.
void WriteModels(const GatewayWant& w, std::ostream& out) {
  const std::string answer = std::string("  http-request return status 200 content-type ") +
                             "application/json hdr " + kGatewayConfigHeader + " " + w.config +
                             " string '";
  if (!w.keyed) {
    out << answer << ModelListFor(w, nullptr) << "' if { path /v1/models }\n";
    return;
  }
  for (const GatewayKeyGrant& g : w.keys)
    out << answer << ModelListFor(w, &g) << "' if { path /v1/models } { var(txn.key) -m str "
        << g.digest << " }\n";
}

// /metrics/keys: each key's requests since the gateway's last (re)load, in
// Prometheus' text format (HAProxy 2.6's exporter has no per-key counter).
void WriteKeyMetrics(const GatewayWant& w, std::ostream& out) {
  out << "  http-request return status 200 content-type 'text/plain; version=0.0.4' lf-string \""
      << "# HELP fleet_gateway_key_requests_total Requests with each client key since the "
         "gateway's last (re)load.\\n# TYPE fleet_gateway_key_requests_total counter\\n";
  for (const GatewayKeyGrant& g : w.keys)
    out << "fleet_gateway_key_requests_total{gateway=\\\"" << w.gateway << "\\\",key=\\\"" << g.name
        << "\\\"} %[str(" << g.digest << "),"
        << "table_http_req_cnt(" << kKeyTable << ")]\\n";
  out << "\" if { path /metrics/keys }\n";
}

// A request without a known key is refused before its body is read (an
// unknown client cannot make the gateway hold a large body), and counted
// per key after.
void WriteKeyGate(const GatewayWant& w, std::ostream& out) {
  out << "  http-request set-var(txn.key) http_auth_bearer,sha2(256),hex,lower\n";
  for (const GatewayKeyGrant& g : w.keys)
    out << "  acl fleet_key var(txn.key) -m str " << g.digest << "\n";
  const std::string unauthorized = OpenAiError(
      "gateway " + w.gateway +
          " needs an API key: send Authorization: Bearer KEY with a key its operator gave you",
      "invalid_request_error", "invalid_api_key", nullptr);
  out << "  http-request return status 401 content-type application/json hdr www-authenticate "
         "Bearer string '"
      << unauthorized << "' unless fleet_key\n"
      << "  http-request track-sc0 var(txn.key) table " << kKeyTable << "\n";
}

// After routing: the key must grant the model it asked for. The grant is
// the key's digest and the model side by side (a digest is 64 characters:
// no separator needed); a key for every model is checked by digest alone.
void WriteGrantCheck(const GatewayWant& w, std::ostream& out) {
  std::vector<std::string> conditions;
  out << "  http-request set-var(txn.grant) var(txn.key),concat(,txn.model)\n";
  for (const GatewayKeyGrant& g : w.keys)
    for (const std::string& m : g.models) {
      if (m == "*") {
        out << "  acl fleet_key_all var(txn.key) -m str " << g.digest << "\n";
        if (std::find(conditions.begin(), conditions.end(), "fleet_key_all") == conditions.end())
          conditions.push_back("fleet_key_all");
      } else {
        out << "  acl fleet_grant var(txn.grant) -m str " << g.digest << m << "\n";
        if (std::find(conditions.begin(), conditions.end(), "fleet_grant") == conditions.end())
          conditions.push_back("fleet_grant");
      }
    }
  const std::string forbidden =
      OpenAiError("this API key may not use the model it asked for on gateway " + w.gateway +
                      " (GET /v1/models lists the models of the key)",
                  "invalid_request_error", "model_not_allowed");
  out << "  http-request return status 403 content-type application/json string '" << forbidden
      << "' unless";
  for (size_t i = 0; i < conditions.size(); ++i) out << (i ? " || " : " ") << conditions[i];
  out << "\n";
}

// A model whose deployments take less than the gateway's buffer: its own
// max_request, as a 413 (the serve would refuse or choke on it later).
void WriteModelLimits(const GatewayWant& w, uint64_t body_limit, std::ostream& out) {
  for (const auto& [model, routes] : ByModel(w)) {
    uint64_t limit = 0;
    for (const GatewayRoute* r : routes) limit = std::max(limit, r->max_request);
    if (limit >= body_limit) continue;
    out << "  http-request return status 413 content-type application/json string '"
        << OpenAiError("the request is larger than the max_request of " + model + " (" +
                           std::to_string(limit) + " bytes)",
                       "invalid_request_error", "request_too_large", nullptr)
        << "' if { var(txn.model) -m str " << model << " } { req.body_size gt " << limit << " }\n";
  }
}

void WriteFrontend(const GatewayWant& w, std::ostream& out) {
  const auto models = ByModel(w);
  const uint64_t body_limit = GatewayBufferSize(w) - kBufferHeadroom;
  out << "frontend gateway_" << w.gateway << "\n"
      << "  bind :" << w.port
      << "\n"
      // The config header on /health too: fleet's probe reads it there,
      // where a keyed gateway asks for no key.
      << "  http-request return status 200 content-type text/plain hdr " << kGatewayConfigHeader
      << " " << w.config << " string 'ok' if { path /health }\n"
      << "  http-request use-service prometheus-exporter if { path /metrics }\n";
  if (w.keyed) WriteKeyMetrics(w, out);
  WriteApiOnly(w, out);
  if (w.keyed) WriteKeyGate(w, out);
  WriteModels(w, out);
  // A body larger than the buffer would be routed on its first part only
  // (no model): say so instead, with the limit.
  out << "  http-request return status 413 content-type application/json string '"
      << OpenAiError("the request is larger than gateway " + w.gateway + " takes (" +
                         std::to_string(body_limit) +
                         " bytes: the largest max_request of its deployments)",
                     "invalid_request_error", "request_too_large", nullptr)
      << "' if { req.hdr_val(content-length) gt " << body_limit
      << " }\n"
      // Time for a large body on a slow link: 16 MiB at 1 MB/s.
      << "  http-request wait-for-body time 30s\n"
      << "  http-request set-var(txn.model) req.body,json_query('$.model')\n";
  // One line per model: a line of HAProxy's holds at most 64 words.
  for (const auto& [model, unused] : models)
    out << "  acl fleet_routed var(txn.model) -m str " << model << "\n";
  out << "  http-request return status 404 content-type application/json string '" << NotRouted(w)
      << "'" << (models.empty() ? "" : " unless fleet_routed") << "\n";
  if (w.keyed) WriteGrantCheck(w, out);
  WriteModelLimits(w, body_limit, out);
  for (const auto& [model, backend] : BackendNames(w))
    out << "  use_backend " << backend << " if { var(txn.model) -m str " << model << " }\n";
  out << "\n";
}

void WriteBackends(const GatewayWant& w, std::ostream& out) {
  const std::map<std::string, std::string> names = BackendNames(w);
  for (const auto& [model, routes] : ByModel(w)) {
    out << "backend " << names.at(model) << "\n"
        << "  balance leastconn\n"
        // Which serve answered: `fleet check` through the gateway names it.
        << "  http-response set-header " << kGatewayServedByHeader << " %s\n"
        << "  option httpchk GET " << routes.front()->health_path << "\n";
    // A check waits as long as the slowest of the model's serves may take
    // to answer its health (a busy engine answers late, not never); a
    // refused connection fails at once, so a gone serve is dropped after
    // `fall` checks 2 s apart.
    int timeout = 1;
    for (const GatewayRoute* r : routes) timeout = std::max(timeout, r->check_timeout_s);
    out << "  timeout check " << timeout << "s\n";
    const bool wakes =
        !w.wake_listener.empty() &&
        std::any_of(routes.begin(), routes.end(), [](const GatewayRoute* r) { return r->wakes; });
    // A held request waits out the wake (up to wake.hold), then its answer.
    if (wakes) out << "  timeout server " << std::max(1800, w.wake_hold_s + 60) << "s\n";
    for (const GatewayRoute* r : routes)
      out << "  server " << r->deployment << "_" << r->node << " " << r->host << ":" << r->port
          << " check inter 2s fall " << std::max(1, r->fall) << " rise 1\n";
    if (wakes) out << "  server " << kGatewayWakeServer << " " << w.wake_listener << " backup\n";
    out << "\n";
  }
  if (w.keyed)
    out << "backend " << kKeyTable << "\n"
        << "  stick-table type string len 64 size " << w.keys.size() + 16
        << " store http_req_cnt\n\n";
}

}  // namespace

std::map<std::string, std::string> GatewayBackendNames(const GatewayWant& want) {
  return BackendNames(want);
}

std::string GatewayRoute::Text() const {
  return model + " -> " + node + ":" + std::to_string(port);
}

std::string GatewayContainerName(const std::string& gateway) { return "fleet-gw-" + gateway; }

bool SameServe(const GatewayRoute& a, const GatewayRoute& b) {
  return std::tie(a.model, a.deployment, a.node, a.host, a.port) ==
         std::tie(b.model, b.deployment, b.node, b.host, b.port);
}

uint64_t GatewayBufferSize(const GatewayWant& want) {
  uint64_t body = want.routes.empty() ? kDefaultMaxRequest : 0;
  for (const GatewayRoute& r : want.routes) body = std::max(body, r.max_request);
  return body + kBufferHeadroom;
}

std::string GatewayConfigDir(const std::string& gateway) { return ".fleet/gateways/" + gateway; }

void SealGatewayWant(GatewayWant* want) {
  const nlohmann::json run = {want->cli, want->image_ref, want->port, want->container,
                              kGatewayConfigMount};
  want->spec = HashBlobData(BlobHashKind::kSha256, run.dump());
  nlohmann::json config = {kConfigFormat, want->gateway, want->port, want->drain_s,
                           want->routes,  want->keyed,   want->keys};
  // Only with wake: the configs of gateways without it hash as before.
  if (!want->wake_listener.empty()) config.push_back({want->wake_listener, want->wake_hold_s});
  // A name that is not UTF-8 (refused before, never written) must not
  // throw here: it is hashed as U+FFFD.
  want->config = HashBlobData(
      BlobHashKind::kSha256, config.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

std::string GatewayRouteProblem(const GatewayRoute& r) {
  if (const std::string p = ServedNameProblem(r.model); !p.empty())
    return "the model name '" + r.model + "' " + p;
  if (!IsName(r.deployment)) return "the deployment name '" + r.deployment + "' is not a name";
  if (!IsName(r.node)) return "the node name '" + r.node + "' is not a name";
  if (r.host.empty() || r.host[0] == '-' || !Only(r.host, ".:-[]_"))
    return "the address '" + r.host + "' must be a host name or an IP";
  if (r.port < 1 || r.port > 65535) return "the port " + std::to_string(r.port) + " is not 1-65535";
  if (r.health_path.empty() || r.health_path[0] != '/' || !Only(r.health_path, "/._~:@+=&?%-"))
    return "the health path '" + r.health_path +
           "' must be an HTTP path of letters, digits and / . _ ~ : @ + = & ? % -";
  return "";
}

std::string RenderHaproxyConfig(const GatewayWant& want) {
  // The writer's own line of defence: a route the plan should have refused
  // is never written (HAProxy's quoting protects nothing here: a quoted
  // '}' still ends an ACL).
  GatewayWant w = want;
  std::erase_if(w.routes, [](const GatewayRoute& r) { return !GatewayRouteProblem(r).empty(); });
  std::ostringstream out;
  out << "# gateway " << w.gateway << ": written by fleet from the manifests; edits are lost\n"
      << "# fleet-config " << w.config << "\n";
  for (const GatewayRoute& r : w.routes)
    out << "# fleet-route " << r.model << " " << r.deployment << " " << r.node << " " << r.host
        << ":" << r.port << " " << r.health_path << "\n";
  out << "\n";
  WriteGlobal(w, out);
  WriteFrontend(w, out);
  WriteBackends(w, out);
  return out.str();
}

std::vector<GatewayRoute> ParseConfigRoutes(const std::string& config) {
  std::vector<GatewayRoute> out;
  std::istringstream in(config);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string hash, tag, where;
    GatewayRoute r;
    if (!(words >> hash >> tag) || hash != "#" || tag != "fleet-route") continue;
    if (!(words >> r.model >> r.deployment >> r.node >> where >> r.health_path)) continue;
    const size_t colon = where.rfind(':');
    if (colon == std::string::npos) continue;
    r.host = where.substr(0, colon);
    r.port = std::atoi(where.c_str() + colon + 1);
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> RouteDifferences(const std::vector<GatewayRoute>& before,
                                          const std::vector<GatewayRoute>& after) {
  std::set<std::string> was, now;
  for (const GatewayRoute& r : before) was.insert(r.Text());
  for (const GatewayRoute& r : after) now.insert(r.Text());
  std::vector<std::pair<std::string, std::string>> lines;  // (route, line) in route order
  for (const std::string& t : now)
    if (!was.count(t)) lines.push_back({t, "+ " + t});
  for (const std::string& t : was)
    if (!now.count(t)) lines.push_back({t, "- " + t});
  std::stable_sort(lines.begin(), lines.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (auto& [unused, line] : lines) out.push_back(std::move(line));
  return out;
}

void to_json(nlohmann::json& j, const GatewayRoute& v) {
  j = {{"model", v.model},
       {"deployment", v.deployment},
       {"node", v.node},
       {"host", v.host},
       {"port", v.port},
       {"health_path", v.health_path},
       {"max_request", v.max_request},
       {"check_timeout_s", v.check_timeout_s},
       {"fall", v.fall}};
  if (v.wakes) j["wakes"] = true;  // only then: the routes of other lab hash as before
}

void from_json(const nlohmann::json& j, GatewayRoute& v) {
  v.model = j.value("model", "");
  v.deployment = j.value("deployment", "");
  v.node = j.value("node", "");
  v.host = j.value("host", "");
  v.port = j.value("port", 0);
  v.health_path = j.value("health_path", "/health");
  v.max_request = j.value("max_request", uint64_t{4} << 20);
  v.check_timeout_s = j.value("check_timeout_s", 5);
  v.fall = j.value("fall", 2);
  v.wakes = j.value("wakes", false);
}

void to_json(nlohmann::json& j, const GatewayWant& v) {
  j = {{"gateway", v.gateway}, {"container", v.container}, {"cli", v.cli},
       {"image", v.image},     {"image_ref", v.image_ref}, {"port", v.port},
       {"drain_s", v.drain_s}, {"routes", v.routes},       {"spec", v.spec},
       {"config", v.config}};
  if (v.keyed) j["keys"] = v.keys;
  if (!v.keys_error.empty()) j["keys_error"] = v.keys_error;
  if (!v.unnamed.empty()) j["unnamed"] = v.unnamed;
  if (!v.unsafe.empty()) j["unsafe"] = v.unsafe;
  if (!v.wake_listener.empty())
    j["wake"] = {{"listener", v.wake_listener}, {"hold_s", v.wake_hold_s}};
}

void from_json(const nlohmann::json& j, GatewayWant& v) {
  v.gateway = j.value("gateway", "");
  v.container = j.value("container", "");
  v.cli = j.value("cli", "");
  v.image = j.value("image", "");
  v.image_ref = j.value("image_ref", "");
  v.port = j.value("port", 0);
  v.drain_s = j.value("drain_s", 60);
  v.routes = j.value("routes", std::vector<GatewayRoute>{});
  v.spec = j.value("spec", "");
  v.config = j.value("config", "");
  v.unnamed = j.value("unnamed", std::vector<std::string>{});
  v.unsafe = j.value("unsafe", std::vector<std::string>{});
  v.keyed = j.contains("keys");
  v.keys = j.value("keys", std::vector<GatewayKeyGrant>{});
  v.keys_error = j.value("keys_error", "");
  if (j.contains("wake") && j["wake"].is_object()) {
    v.wake_listener = j["wake"].value("listener", "");
    v.wake_hold_s = j["wake"].value("hold_s", 0);
  }
}

void to_json(nlohmann::json& j, const GatewayRecord& v) {
  j = v.want;
  j.erase("unnamed");
  j.erase("unsafe");
  j.erase("keys_error");
  j["container_id"] = v.container_id;
}

void from_json(const nlohmann::json& j, GatewayRecord& v) {
  v.want = j.get<GatewayWant>();
  v.container_id = j.value("container_id", "");
}

void to_json(nlohmann::json& j, const GatewayDetail& v) {
  j = {{"gateway", v.gateway}, {"cli", v.cli}};
}

void from_json(const nlohmann::json& j, GatewayDetail& v) {
  v.gateway = j.value("gateway", "");
  v.cli = j.value("cli", "docker");
}

}  // namespace fleet
