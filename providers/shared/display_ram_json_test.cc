// The display_ram provider's typed attributes keep the JSON keys the plan
// and the state have always had, and read back what they wrote.
#include "providers/shared/display_ram_json.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(DisplayRamJsonTest, CheckpointThenRecordKeys) {
  DisplayRamRecord r;
  r.mode = "unlocking";
  r.original = ModuleValues{true, "N", "Y"};
  r.boot_id = "b1";
  EXPECT_EQ(nlohmann::json(r).size(), 3u);
  r.reloaded = true;  // GPU figure unknown: recorded as null
  EXPECT_TRUE(nlohmann::json(r).at("gpu_free_before_bytes").is_null());
  r.read_back = true;
  r.mode = kModeUnlocked;
  r.modeset = "Y";
  r.fbdev = "N";
  r.gpu_free_after_bytes = 123;
  nlohmann::json j = r;
  EXPECT_EQ(j.size(), 8u);
  EXPECT_EQ(nlohmann::json(j.get<DisplayRamRecord>()), j);
}

TEST(DisplayRamJsonTest, StepListsContainersOnlyWhenAny) {
  EXPECT_EQ(nlohmann::json(DisplayRamStep{kOpUnlock, std::nullopt, {}}),
            (nlohmann::json{{"op", "unlock"}}));
  DisplayRamStep restore{kOpRestore, ModuleValues{true, "N", "Y"}, {"fleet-a"}};
  nlohmann::json j = restore;
  EXPECT_EQ(j.at("stop_containers"), (nlohmann::json{"fleet-a"}));
  EXPECT_EQ(nlohmann::json(j.get<DisplayRamStep>()), j);
}

TEST(DisplayRamJsonTest, AfterJsons) {
  EXPECT_EQ(UnlockedAfterJson(),
            (nlohmann::json{{"mode", "unlocked"}, {"modeset", "Y"}, {"fbdev", "N"}}));
  EXPECT_EQ(
      ModuleAfterJson(kModeDefault, ModuleValues{true, "N", "Y"}),
      (nlohmann::json{{"mode", "default"}, {"loaded", true}, {"modeset", "N"}, {"fbdev", "Y"}}));
}

}  // namespace
}  // namespace fleet
