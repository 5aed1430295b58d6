#include "src/settings.h"

#include <cstdlib>

namespace fleet {

Settings Settings::From(const std::function<const char*(const char*)>& lookup) {
  auto get = [&](const char* name) {
    const char* v = lookup(name);
    return std::string(v != nullptr ? v : "");
  };
  Settings s;
  s.fabric = get("FLEET_FABRIC");
  s.fabric_chain = get("FLEET_FABRIC_CHAIN");
  s.model_download = get("FLEET_MODEL_DOWNLOAD");
  s.model_copy_streams = get("FLEET_MODEL_COPY_STREAMS");
  s.health_dark_after = get("FLEET_HEALTH_DARK_AFTER");
  s.test_fabric_wrong_key = get("FLEET_TEST_FABRIC_WRONG_KEY");
  return s;
}

Settings Settings::FromEnvironment() {
  return From([](const char* name) { return std::getenv(name); });
}

const Settings& ProcessSettings() {
  static const Settings* settings = new Settings(Settings::FromEnvironment());
  return *settings;
}

}  // namespace fleet
