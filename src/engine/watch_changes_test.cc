#include "src/engine/watch_changes.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

nlohmann::json Round(const std::string& math, int drift = 0) {
  nlohmann::json check = {
      {"deployment", "q"}, {"node", "dgx1"}, {"check", "math"}, {"result", math}};
  if (math != "pass") {
    check["detail"] = "the reply does not match /11303/";
    check["prompt"] = "What is 127*89?";
    check["reply"] = "!!!!";
  }
  return {{"checks", {check}}, {"drift", {{"changes", drift}}}};
}

TEST(WatchChanges, FirstPassingRoundIsSilent) {
  EXPECT_TRUE(WatchChanges({}, WatchStatesOf(Round("pass"))).empty());
}

TEST(WatchChanges, FirstFailingRoundIsAChange) {
  const nlohmann::json c = WatchChanges({}, WatchStatesOf(Round("fail")));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["key"], "q@dgx1/math");
}

TEST(WatchChanges, OneChangePerTransitionWithTheSample) {
  const WatchStates ok = WatchStatesOf(Round("pass"));
  const WatchStates bad = WatchStatesOf(Round("fail"));
  const nlohmann::json c = WatchChanges(ok, bad);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["from"], "pass");
  EXPECT_EQ(c[0]["to"], "fail");
  EXPECT_EQ(c[0]["reply"], "!!!!");
  EXPECT_EQ(c[0]["prompt"], "What is 127*89?");
  EXPECT_TRUE(WatchChanges(bad, bad).empty());  // still failing: no new event
  const nlohmann::json back = WatchChanges(bad, ok);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0]["to"], "pass");
}

TEST(WatchChanges, DriftAndAGoneCheck) {
  const nlohmann::json c = WatchChanges(
      WatchStatesOf(Round("fail")),
      WatchStatesOf({{"checks", nlohmann::json::array()}, {"drift", {{"changes", 2}}}}));
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0]["key"], "drift");
  EXPECT_EQ(c[0]["to"], "drift");
  EXPECT_EQ(c[1]["key"], "q@dgx1/math");
  EXPECT_EQ(c[1]["to"], "gone");
}

}  // namespace
}  // namespace fleet
