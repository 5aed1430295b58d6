#include "src/engine/bench_stats.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

BenchSample Ok(int prompt, double ttft, double tps, double turn) {
  BenchSample s;
  s.ok = true;
  s.prompt_tokens = prompt;
  s.ttft_s = ttft;
  s.decode_tps = tps;
  s.turn_s = turn;
  return s;
}

TEST(BenchStatsTest, QuantileInterpolatesBetweenRanks) {
  EXPECT_EQ(Quantile({}, 0.5), -1);
  EXPECT_DOUBLE_EQ(Quantile({3}, 0.95), 3);
  EXPECT_DOUBLE_EQ(Quantile({4, 1, 3, 2}, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(Quantile({1, 2}, 0.95), 1.95);
  std::vector<double> hundred;
  for (int i = 1; i <= 101; ++i) hundred.push_back(i);
  EXPECT_DOUBLE_EQ(Quantile(hundred, 0.95), 96);
}

TEST(BenchStatsTest, SummarizeLeavesFailuresOutOfTheFigures) {
  BenchSample failed;
  failed.error = "HTTP 500";
  const BenchCell c =
      Summarize(2048, 2, true,
                {Ok(2000, 1.0, 50, 2.0), Ok(2000, 0.5, 40, 1.5), failed, Ok(2000, 2.0, 60, 3)});
  EXPECT_EQ(c.requests, 4);
  EXPECT_EQ(c.failed, 1);
  EXPECT_EQ(c.first_error, "HTTP 500");
  EXPECT_EQ(c.prompt_tokens, 2000);
  EXPECT_DOUBLE_EQ(c.ttft_s.median, 1.0);
  EXPECT_DOUBLE_EQ(c.prefill_tps.median, 2000);  // 2000/1.0 among 1000, 2000, 4000
  EXPECT_DOUBLE_EQ(c.decode_tps.median, 50);
  EXPECT_DOUBLE_EQ(c.turn_s.p95, 2.9);
  EXPECT_EQ(c.Key(), "d2048/c2/fresh");
  const BenchCell back = BenchCell::FromJson(c.ToJson());
  EXPECT_EQ(back.Key(), c.Key());
  EXPECT_DOUBLE_EQ(back.turn_s.p95, 2.9);
  EXPECT_EQ(back.failed, 1);
}

TEST(BenchStatsTest, TableAndSummaryInTheLogsForm) {
  std::vector<BenchCell> cells = {Summarize(4096, 1, true, {Ok(4000, 2.0, 66, 2.2)}),
                                  Summarize(4096, 2, true, {Ok(4000, 1.9, 100, 2.4)}),
                                  Summarize(4096, 1, false, {Ok(4000, 0.05, 70, 0.5)})};
  const std::string table = RenderBenchTable("qwen38", cells);
  EXPECT_NE(table.find("| qwen38 | pp4000 @ d4K | 1 | fresh | 2,000 (2,000) | 2000 (2000) |"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("| qwen38 | tg @ d4K | 2 | fresh | 100 (100) |"), std::string::npos)
      << table;
  // The cached cell's 80,000 t/s is the cache's, left out of the pp range.
  EXPECT_EQ(BenchSummaryLine(cells),
            "pp 2,000-2,105 t/s, tg 66-100 t/s (c1/c2), median turn 2.2 s");
}

}  // namespace
}  // namespace fleet
