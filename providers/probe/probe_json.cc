#include "providers/probe/probe_json.h"

namespace fleet {

void to_json(nlohmann::json& j, const ProbeWant& v) { j = {{"source_sha256", v.source_sha256}}; }

void from_json(const nlohmann::json& j, ProbeWant& v) {
  v.source_sha256 = j.value("source_sha256", "");
}

void to_json(nlohmann::json& j, const ProbeFound& v) {
  j = {{"source_sha256", v.source_sha256}, {"arch", v.arch}, {"compiler", v.compiler}};
}

void from_json(const nlohmann::json& j, ProbeFound& v) {
  v.source_sha256 = j.value("source_sha256", "");
  v.arch = j.value("arch", "");
  v.compiler = j.value("compiler", "");
}

void to_json(nlohmann::json& j, const ProbeStep& v) { j = {{"method", v.method}}; }

void from_json(const nlohmann::json& j, ProbeStep& v) { v.method = j.value("method", kMethodAuto); }

void to_json(nlohmann::json& j, const ProbeRecord& v) {
  j = {{"source_sha256", v.source_sha256}, {"method", v.method}, {"arch", v.arch}};
  if (!v.fallback.empty()) j["fallback"] = v.fallback;
}

void from_json(const nlohmann::json& j, ProbeRecord& v) {
  v.source_sha256 = j.value("source_sha256", "");
  v.method = j.value("method", "");
  v.arch = j.value("arch", "");
  v.fallback = j.value("fallback", "");
}

}  // namespace fleet
