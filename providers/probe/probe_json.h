// The probe provider's typed attributes and their one pair of JSON
// conversions each: the boundary where the generic DesiredResource,
// ActualResource, PlanChange and ResourceRecord JSON is read and written.
// Nothing else in the provider reads an attribute by its key.
#ifndef FLEET_PROVIDERS_PROBE_PROBE_JSON_H_
#define FLEET_PROVIDERS_PROBE_PROBE_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

namespace fleet {

// What every node should have installed (DesiredResource::attributes), and
// a change's before/after.
struct ProbeWant {
  std::string source_sha256;  // of the embedded fleet-probe source
};

// What the probe read on the node.
struct ProbeFound {
  std::string source_sha256;  // "" when not installed
  std::string arch;           // the node's, from its facts
  std::string compiler;       // "c++" when the node has one, else ""
};

// How a step installs it (PlanChange::detail).
inline constexpr const char* kMethodAuto = "auto";  // decided on the node (it was off)
inline constexpr const char* kMethodUpload = "upload";
inline constexpr const char* kMethodCompile = "compile";
struct ProbeStep {
  std::string method = kMethodAuto;
};

// What the state records of an install.
struct ProbeRecord {
  std::string source_sha256;
  std::string method;
  std::string arch;
  // Why an upload was compiled from source after all ("" when it was not).
  std::string fallback;
};

void to_json(nlohmann::json& j, const ProbeWant& v);
void from_json(const nlohmann::json& j, ProbeWant& v);
void to_json(nlohmann::json& j, const ProbeFound& v);
void from_json(const nlohmann::json& j, ProbeFound& v);
void to_json(nlohmann::json& j, const ProbeStep& v);
void from_json(const nlohmann::json& j, ProbeStep& v);
void to_json(nlohmann::json& j, const ProbeRecord& v);
void from_json(const nlohmann::json& j, ProbeRecord& v);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_PROBE_PROBE_JSON_H_
