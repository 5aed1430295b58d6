#include "src/settings.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace fleet {
namespace {

TEST(SettingsTest, ReadsEachVariableOnce) {
  std::map<std::string, std::string> env = {{"FLEET_FABRIC", "off"},
                                            {"FLEET_HEALTH_DARK_AFTER", "2m"},
                                            {"FLEET_MODEL_COPY_STREAMS", "4"}};
  int lookups = 0;
  const Settings s = Settings::From([&](const char* name) -> const char* {
    ++lookups;
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
  EXPECT_TRUE(s.fabric_off());
  EXPECT_FALSE(s.fabric_chain_off());
  EXPECT_EQ(s.health_dark_after, "2m");
  EXPECT_EQ(s.model_copy_streams, "4");
  EXPECT_EQ(s.model_download, "");
  EXPECT_EQ(lookups, 6);
}

TEST(SettingsTest, TheProcessSettingsAreReadOnce) {
  const Settings& first = ProcessSettings();
  EXPECT_EQ(&first, &ProcessSettings());
}

}  // namespace
}  // namespace fleet
