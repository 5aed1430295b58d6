// RenderPlan / RenderState on what nodes print.
#include "src/engine/render.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

// Bytes that are not UTF-8 in a probed attribute (a file name, a GPU name)
// made nlohmann's dump throw type_error 316 and ended `fleet plan` (found
// by fuzz/): they show as U+FFFD.
TEST(RenderTest, BytesThatAreNotUtf8ShowAsReplacementCharacters) {
  Plan plan;
  PlanChange c;
  c.address = "model.m@n1";
  c.type = "model";
  c.node = "n1";
  c.action = Action::kUpdate;
  c.summary = "restage";
  c.before = {{"file", "shard\xff.safetensors"}};
  c.after = {{"file", "shard.safetensors"}};
  plan.changes.push_back(c);
  std::string out;
  ASSERT_NO_THROW(out = RenderPlan(plan, {}));
  EXPECT_NE(out.find("shard\xEF\xBF\xBD.safetensors"), std::string::npos) << out;

  State state;
  state.lineage = "l";
  state.resources.push_back({"model.m@n1", "model", "n1", {{"file", "\xc3("}}, "t"});
  ASSERT_NO_THROW(out = RenderState(state));
  EXPECT_NE(out.find("\xEF\xBF\xBD("), std::string::npos) << out;
}

}  // namespace
}  // namespace fleet
