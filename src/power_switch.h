// PowerSwitch: the controller that switches nodes' power (a smart plug or
// PDU). The Home Assistant REST backend talks to it over HTTP with libcurl.
#ifndef FLEET_SRC_POWER_SWITCH_H_
#define FLEET_SRC_POWER_SWITCH_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "manifests/manifest.h"
#include "src/clock.h"
#include "src/status.h"

namespace fleet {

class PowerSwitch {
 public:
  virtual ~PowerSwitch() = default;
  // "on" or "off" (or Home Assistant's "unavailable", "unknown"). Errors
  // name the controller URL and entity, never the token; an error that is
  // Status::unreachable() means the controller was not asked or did not
  // answer (no token, connection refused, TLS refused), any other that it
  // answered and refused (no such entity, token refused).
  virtual Result<std::string> GetState(const std::string& entity) = 0;
  virtual Status TurnOn(const std::string& entity) = 0;
  virtual Status TurnOff(const std::string& entity) = 0;
};

// How an https controller is trusted: `ca_file` (a PEM bundle) verifies its
// certificate against that CA only; `insecure` skips the check; neither:
// the system's CAs (libcurl's default bundle).
struct PowerTls {
  std::string ca_file;
  bool insecure = false;
};

// Home Assistant: GET /api/states/<entity>, POST /api/services/switch/turn_on
// and turn_off with {"entity_id": ...}, `Authorization: Bearer <token>`.
// `token` is held in memory only; no message, log or file ever contains it.
std::unique_ptr<PowerSwitch> MakeHomeAssistantSwitch(const std::string& url,
                                                     const std::string& token, int timeout_s = 10,
                                                     const PowerTls& tls = {});

// The fleet's controller as the manifest declares it (null when it declares
// none), its token read from the environment variable token_env names.
std::unique_ptr<PowerSwitch> MakeDeclaredPowerSwitch(const PowerController& controller);

// After a turn_on/turn_off: reads `entity` every `poll_ms` until it says
// `want` ("on"/"off"), for at most `bound_ms`. A switch that does not follow
// (a stuck relay, an entity that is not the one feeding the node) is an
// error naming the entity, what it still reads and for how long it was read.
// The time is `clock`'s. REQUIRES: clock != nullptr.
Status ConfirmSwitched(PowerSwitch* power, const std::string& entity, const std::string& want,
                       Clock* clock, int bound_ms = 5000, int poll_ms = 250);

// What a state read found that makes the entity unusable for power, or "":
// Home Assistant's "unavailable" and "unknown" (the device behind the entity
// does not answer it).
std::string UnusableSwitchState(const std::string& state);

// How the switch reads a Home Assistant answer (pure; exposed for tests and
// fuzzing): HTTP status `code` and `body` of `request` ("GET /api/states/x"),
// errors prefixed with `where` ("power controller URL (entity)"). Never throws.
Result<nlohmann::json> ReadHomeAssistantAnswer(long code, const std::string& body,
                                               const std::string& request,
                                               const std::string& where);

// The "state" string of a GET /api/states/<entity> answer.
Result<std::string> HomeAssistantState(const nlohmann::json& answer, const std::string& where);

}  // namespace fleet

#endif  // FLEET_SRC_POWER_SWITCH_H_
