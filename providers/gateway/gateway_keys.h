// A gateway's client API keys (gateways.NAME.keys / keys_env): who may ask
// the gateway for which model.
//
// The keys are read on the controller only, from a file outside the repo
// or an environment variable (manifests/manifest.h, GatewaySpec). What
// leaves the controller is a GatewayKeyGrant: the key's name, the SHA-256
// of the key and its models. HAProxy hashes the request's bearer token the
// same way (http_auth_bearer,sha2(256),hex,lower) and compares digests, so
// neither the plan, the state nor the node's config holds a key.
#ifndef FLEET_PROVIDERS_GATEWAY_GATEWAY_KEYS_H_
#define FLEET_PROVIDERS_GATEWAY_GATEWAY_KEYS_H_

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "manifests/manifest.h"
#include "src/status.h"

namespace fleet {

// One client key as the operator wrote it. Never leaves the controller.
struct GatewayKey {
  std::string name;                 // for metrics and messages: not secret
  std::string key;                  // the secret
  std::vector<std::string> models;  // served names, or "*" for every model
};

// What the gateway is told of a key.
struct GatewayKeyGrant {
  std::string name;
  std::string digest;               // sha256 of the key, lower-case hex
  std::vector<std::string> models;  // as GatewayKey::models

  auto operator<=>(const GatewayKeyGrant&) const = default;
};

// The keys of `text`, one per line "NAME KEY MODEL[,MODEL...]" (blank
// lines and lines starting with '#' aside). NAME is letters, digits, - and
// _; KEY at least 16 printable characters; each MODEL a safe served name
// or "*". `source` names where the text came from in errors. An error
// names the line by number and never quotes it: the line holds a key.
Result<std::vector<GatewayKey>> ParseGatewayKeys(std::string_view text, const std::string& source);

// The keys of gateway `g`: its keys file (which must not be readable by
// group or others, as ssh requires of a private key) or its keys_env
// variable. No keys declared: an empty list (the gateway is open).
Result<std::vector<GatewayKey>> LoadGatewayKeys(const GatewaySpec& g);

// The grants of `keys`, sorted by name.
std::vector<GatewayKeyGrant> KeyGrants(const std::vector<GatewayKey>& keys);

// A key of `keys` that may use `model` ("" when none): what fleet's own
// checks through a keyed gateway send (they are clients like any other).
std::string KeyFor(const std::vector<GatewayKey>& keys, const std::string& model);

// Whether `grant` may use `model`.
bool Grants(const GatewayKeyGrant& grant, const std::string& model);

void to_json(nlohmann::json& j, const GatewayKeyGrant& v);
void from_json(const nlohmann::json& j, GatewayKeyGrant& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_GATEWAY_GATEWAY_KEYS_H_
