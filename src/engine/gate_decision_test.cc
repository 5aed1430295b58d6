#include "src/engine/gate_decision.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

BenchCell Cell(int depth, bool fresh, double pp, double tg, double ttft, int failed = 0) {
  BenchCell c;
  c.depth = depth;
  c.fresh = fresh;
  c.requests = 2;
  c.failed = failed;
  c.prefill_tps = {pp, pp};
  c.decode_tps = {tg, tg};
  c.ttft_s = {ttft, ttft};
  c.turn_s = {ttft + 64 / tg, ttft + 64 / tg};
  return c;
}

// A run of the stand-in's lab ratios: 2000 t/s prefill, 20 t/s decode, a
// fresh context 0.6 s slower than a cached one.
BenchRecord MakeRun(const std::string& id, double tg, QualityCount q, int failed = 0) {
  BenchRecord r;
  r.id = id;
  r.deployment = "lab";
  r.profile = "quick";
  r.cells = {Cell(0, true, 20, tg, 0.66, failed), Cell(0, false, 400, tg, 0.05),
             Cell(2048, true, 1600, tg, 1.68), Cell(2048, false, 40000, tg, 0.05)};
  r.quality = q;
  return r;
}

GateSpec Policy(double max_regression = 10) {
  GateSpec g;
  g.deployment = "lab";
  g.max_regression_pct = max_regression;
  return g;
}

TEST(GateDecisionTest, PromotesARunWithinTolerance) {
  const GateVerdict v =
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 19.2, {11, 11}), Policy());
  EXPECT_TRUE(v.promote);
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_NE(v.Render(10).find("PROMOTE: new is within 10.0% of good"), std::string::npos);
}

TEST(GateDecisionTest, PromotesAFasterRun) {
  EXPECT_TRUE(
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 25, {11, 11}), Policy()).promote);
}

TEST(GateDecisionTest, RefusesADecode30PercentSlowerUnder10Percent) {
  const GateVerdict v =
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 14, {11, 11}), Policy());
  EXPECT_FALSE(v.promote);
  // Every cell's tg is a reason of its own, and the turn times too.
  int tg = 0;
  for (const std::string& r : v.reasons)
    tg += r.find("tg t/s 20.0 -> 14.0 (-30.0%)") != std::string::npos;
  EXPECT_EQ(tg, 4);
  const std::string table = v.Render(10);
  EXPECT_NE(table.find("! d0/c1/fresh"), std::string::npos) << table;
  EXPECT_NE(table.find("REFUSED: new against good"), std::string::npos) << table;
  // The same run under a 50% tolerance passes (its turn times are 35-42% longer).
  EXPECT_TRUE(
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 14, {11, 11}), Policy(50)).promote);
}

TEST(GateDecisionTest, RefusesALowerQualityShareUnderLast) {
  const GateVerdict v =
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 21, {10, 11}), Policy());
  EXPECT_FALSE(v.promote);
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_EQ(v.reasons[0], "quality 10/11 is below the last good run's 11/11 (min_quality: last)");
  EXPECT_NE(v.Render(10).find("! quality 11/11 -> 10/11"), std::string::npos);
  // A grown set with the same share is no regression.
  EXPECT_TRUE(
      DecideGate(MakeRun("good", 20, {10, 11}), MakeRun("new", 20, {20, 22}), Policy()).promote);
}

TEST(GateDecisionTest, MinQualityAsAPercentage) {
  GateSpec p = Policy();
  p.min_quality_last = false;
  p.min_quality_pct = 90;
  // 10/11 = 90.9%: enough, though below the good run's 11/11.
  EXPECT_TRUE(DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 20, {10, 11}), p).promote);
  const GateVerdict v = DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 20, {9, 11}), p);
  EXPECT_FALSE(v.promote);
  EXPECT_NE(v.reasons.at(0).find("below min_quality 90.0%"), std::string::npos);
}

TEST(GateDecisionTest, RefusesFailedRequestsAndNoBaseline) {
  const GateVerdict failed =
      DecideGate(MakeRun("good", 20, {11, 11}), MakeRun("new", 20, {11, 11}, 1), Policy());
  EXPECT_FALSE(failed.promote);
  EXPECT_EQ(failed.reasons.at(0), "1 request(s) of the new spec failed");
  const GateVerdict none = DecideGate(std::nullopt, MakeRun("new", 20, {11, 11}), Policy());
  EXPECT_FALSE(none.promote);
  EXPECT_NE(none.reasons.at(0).find("no good run of deployment.lab"), std::string::npos);
}

TEST(GateDecisionTest, RefusesARunWithNoCellInCommon) {
  BenchRecord other = MakeRun("new", 20, {11, 11});
  for (BenchCell& c : other.cells) c.depth += 1;
  other.profile = "full";
  const GateVerdict v = DecideGate(MakeRun("good", 20, {11, 11}), other, Policy());
  EXPECT_FALSE(v.promote);
  EXPECT_NE(v.reasons.at(0).find("no cell of the new run matches one of good"), std::string::npos);
}

TEST(GateDecisionTest, MissingQualityOnTheNewRunRefuses) {
  BenchRecord r = MakeRun("new", 20, {11, 11});
  r.quality.reset();
  const GateVerdict v = DecideGate(MakeRun("good", 20, {11, 11}), r, Policy());
  EXPECT_FALSE(v.promote);
  EXPECT_EQ(v.reasons.at(0), "the quality set did not run on the new spec");
}

}  // namespace
}  // namespace fleet
