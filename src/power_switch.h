// PowerSwitch: the controller that switches nodes' power (a smart plug or
// PDU). The Home Assistant REST backend talks to it over HTTP with libcurl.
#ifndef FLEET_SRC_POWER_SWITCH_H_
#define FLEET_SRC_POWER_SWITCH_H_

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "src/status.h"

namespace fleet {

class PowerSwitch {
 public:
  virtual ~PowerSwitch() = default;
  // "on" or "off". Errors name the controller URL and entity, never the token.
  virtual Result<std::string> GetState(const std::string& entity) = 0;
  virtual Status TurnOn(const std::string& entity) = 0;
  virtual Status TurnOff(const std::string& entity) = 0;
};

// Home Assistant: GET /api/states/<entity>, POST /api/services/switch/turn_on
// and turn_off with {"entity_id": ...}, `Authorization: Bearer <token>`.
// `token` is held in memory only; no message, log or file ever contains it.
std::unique_ptr<PowerSwitch> MakeHomeAssistantSwitch(const std::string& url,
                                                     const std::string& token, int timeout_s = 10);

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
