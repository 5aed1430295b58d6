#include "src/engine/bench_compare.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

BenchCell Cell(int depth, bool fresh, double pp, double tg, double ttft, double turn) {
  BenchCell c;
  c.depth = depth;
  c.fresh = fresh;
  c.requests = 2;
  c.prefill_tps = {pp, pp};
  c.decode_tps = {tg, tg};
  c.ttft_s = {ttft, ttft};
  c.turn_s = {turn, turn};
  return c;
}

TEST(BenchCompareTest, FlagsOnlyDeltasBeyondToleranceInTheBadDirection) {
  const std::vector<BenchCell> base = {Cell(2048, true, 2000, 50, 1.0, 2.0),
                                       Cell(2048, false, 80000, 50, 0.02, 1.0)};
  // tg 30% slower in the fresh cell; pp 5% slower (within 10%); the cached
  // cell's TTFT faster (never a regression).
  const std::vector<BenchCell> now = {Cell(2048, true, 1900, 35, 1.05, 2.05),
                                      Cell(2048, false, 40000, 50, 0.01, 1.0)};
  const BenchComparison c = CompareBench(base, now, 10);
  ASSERT_TRUE(c.Regressed());
  int worse = 0;
  for (const BenchDelta& d : c.deltas) {
    if (!d.worse) continue;
    ++worse;
    EXPECT_EQ(d.cell, "d2048/c1/fresh");
    EXPECT_EQ(d.figure, "tg t/s");
    EXPECT_NEAR(d.change_pct, -30, 1e-9);
  }
  EXPECT_EQ(worse, 1);
  for (const BenchDelta& d : c.deltas)
    EXPECT_FALSE(d.cell == "d2048/c1/cached" && d.figure == "pp t/s");
  const std::string table = c.Render("a", "b", 10);
  EXPECT_NE(table.find("! d2048/c1/fresh"), std::string::npos) << table;
  EXPECT_NE(table.find("REGRESSED: b is worse than a"), std::string::npos) << table;
}

TEST(BenchCompareTest, ATimeWithinTheNoiseFloorIsNeverFlagged) {
  // A cached TTFT of 50 ms becoming 60 ms is +20%, and noise; 0.5 s
  // becoming 0.6 s is a regression.
  const BenchComparison small =
      CompareBench({Cell(0, false, 1, 50, 0.05, 0.5)}, {Cell(0, false, 1, 50, 0.06, 0.5)}, 10);
  EXPECT_FALSE(small.Regressed());
  const BenchComparison large =
      CompareBench({Cell(0, false, 1, 50, 0.5, 1)}, {Cell(0, false, 1, 50, 0.6, 1)}, 10);
  EXPECT_TRUE(large.Regressed());
}

TEST(BenchCompareTest, WithinToleranceAndQuality) {
  const std::vector<BenchCell> base = {Cell(0, true, 100, 50, 0.1, 1)};
  const std::vector<BenchCell> now = {Cell(0, true, 95, 52, 0.105, 1.02),
                                      Cell(512, true, 1, 1, 1, 1)};
  BenchComparison c = CompareBench(base, now, 10, QualityCount{7, 7}, QualityCount{7, 7});
  EXPECT_FALSE(c.Regressed());
  ASSERT_EQ(c.unmatched.size(), 1u);
  EXPECT_EQ(c.unmatched[0], "d512/c1/fresh (new)");
  c = CompareBench(base, now, 10, QualityCount{164, 174}, QualityCount{160, 174});
  EXPECT_TRUE(c.quality_worse);
  EXPECT_TRUE(c.Regressed());
  EXPECT_NE(c.Render("a", "b", 10).find("! quality 164/174 -> 160/174"), std::string::npos);
}

}  // namespace
}  // namespace fleet
