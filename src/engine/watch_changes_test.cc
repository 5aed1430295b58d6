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

TEST(WatchChanges, AnUncheckedCheckIsNoChange) {
  // EMFILE on the controller: the model check could not be made. Neither a
  // passing nor a failing check changes for it.
  for (const char* was : {"pass", "fail"}) {
    const WatchStates before = WatchStatesOf(Round(was));
    const WatchStates now = WatchStatesOf(Round("unchecked"), before);
    EXPECT_TRUE(WatchChanges(before, now).empty()) << was;
    EXPECT_EQ(now.at("q@dgx1/math")["result"], was);
  }
}

TEST(WatchChanges, AControllerFailureIsItsOwnChangeNotDrift) {
  const WatchStates before = WatchStatesOf(Round("pass", 1));
  // "fleet.yaml: cannot open: Too many open files": no drift, no checks.
  const nlohmann::json own = {
      {"checks", nlohmann::json::array()},
      {"controller", {{"error", "cannot open fleet.yaml: Too many open files (EMFILE)"}}}};
  const WatchStates now = WatchStatesOf(own, before);
  const nlohmann::json c = WatchChanges(before, now);
  ASSERT_EQ(c.size(), 1u) << c.dump();
  EXPECT_EQ(c[0]["key"], "controller");
  EXPECT_EQ(c[0]["to"], "error");
  EXPECT_EQ(now.at("drift")["result"], "drift");  // as before
  EXPECT_EQ(now.at("q@dgx1/math")["result"], "pass");
  // And back: only the controller changes.
  const nlohmann::json back = WatchChanges(now, WatchStatesOf(Round("pass", 1), now));
  ASSERT_EQ(back.size(), 1u) << back.dump();
  EXPECT_EQ(back[0]["key"], "controller");
  EXPECT_EQ(back[0]["to"], "pass");
}

}  // namespace
}  // namespace fleet
