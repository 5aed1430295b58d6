// The node provider's typed attributes and their one pair of JSON
// conversions each: the boundary where the generic DesiredResource,
// ActualResource, PlanChange and ResourceRecord JSON is read and written.
// Nothing else in the provider reads an attribute by its key.
//
// Readers are lenient (a missing key, or one that is not a string, is its
// default) so that state written by an older fleet still reads; writers
// produce exactly the keys the plan and state have always had.
#ifndef FLEET_PROVIDERS_NODE_NODE_JSON_H_
#define FLEET_PROVIDERS_NODE_NODE_JSON_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace fleet {

inline constexpr const char* kPowerOn = "on";
inline constexpr const char* kPowerOff = "off";
// power: {state: on_demand}: apply leaves the power as it finds it; a node
// found off (its switch reads off) is asleep, and nothing on it is planned.
inline constexpr const char* kPowerOnDemand = "on_demand";

// What the manifest declares for a node (DesiredResource::attributes).
struct NodeWant {
  std::string hostname;  // "" when the manifest names none
  std::string endpoint;  // "address:port", for messages
  std::string power = kPowerOn;
  std::optional<std::string> power_switch;  // key "switch"; set when declared
};

// A node's record (state, a change's after, a probe's actual): its identity
// as read from the machine, and its power. Each key is written only when
// set, so `{"power":"off"}` stays exactly that.
struct NodeRecord {
  std::optional<std::string> hostname;
  std::optional<std::string> machine_id;
  std::optional<std::string> arch;
  std::optional<std::string> power;
  std::optional<std::string> unreachable;  // why SSH failed (probe only)
};

// What the probe's `sudo -n -l` said of the node's poweroff command (a
// node with a switch whose poweroff_command runs through sudo), in the
// node's ActualResource under "poweroff_sudo". Not checked: nothing known.
struct PoweroffSudo {
  bool checked = false;
  bool allowed = false;
  std::string user;     // the SSH user sudo answered for
  std::string command;  // the command as sudo sees it: its path, then its arguments
};
void PutPoweroffSudo(nlohmann::json& actual, const PoweroffSudo& v);
PoweroffSudo PoweroffSudoOf(const nlohmann::json& actual);

// PlanChange::detail of a node step.
inline constexpr const char* kOpAdopt = "adopt";
inline constexpr const char* kOpPowerOn = "power_on";
inline constexpr const char* kOpPowerOff = "power_off";
struct NodeStep {
  std::string op = kOpAdopt;  // kOpAdopt, kOpPowerOn, kOpPowerOff
};

void to_json(nlohmann::json& j, const NodeWant& v);
void from_json(const nlohmann::json& j, NodeWant& v);
void to_json(nlohmann::json& j, const NodeRecord& v);
void from_json(const nlohmann::json& j, NodeRecord& v);
void to_json(nlohmann::json& j, const NodeStep& v);
void from_json(const nlohmann::json& j, NodeStep& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_NODE_JSON_H_
