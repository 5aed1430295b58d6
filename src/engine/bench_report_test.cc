#include "src/engine/bench_report.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

BenchHistoryRun MakeRun(const std::string& id, const std::string& deployment,
                        const std::string& spec, double tg, const std::string& outcome) {
  BenchHistoryRun r;
  r.record.id = id;
  r.record.deployment = deployment;
  r.record.profile = "quick";
  r.record.spec.spec_hash = spec;
  r.record.spec.image_ref = "localhost/fleet/engine@sha256:" + std::string(64, 'a');
  BenchCell c;
  c.depth = 2048;
  c.prompt_tokens = 2048;
  c.prefill_tps = {2000, 2000};
  c.decode_tps = {tg, tg};
  c.turn_s = {2, 2};
  r.record.cells = {c};
  r.record.quality = QualityCount{11, 11};
  r.outcome = outcome;
  return r;
}

TEST(BenchReportTest, DrawsRunsPerDeploymentAndSpecWithTheGoodOneStarred) {
  const std::string a(64, '1'), b(64, '2');
  const std::vector<BenchHistoryRun> runs = {
      MakeRun("r1", "lab", a, 20, "gate baseline"), MakeRun("r2", "lab", b, 25, "gate passed"),
      MakeRun("r3", "lab", a, 20, "recorded"), MakeRun("x1", "other", a, 50, "recorded")};
  const std::string text = RenderBenchHistory(runs, {{"lab", "r2"}}, "lab");
  EXPECT_NE(text.find("deployment lab (good run: r2)"), std::string::npos) << text;
  EXPECT_EQ(text.find("deployment other"), std::string::npos) << text;
  // Spec a's two runs together, before spec b's.
  const size_t spec_a = text.find("spec 111111111111"), spec_b = text.find("spec 222222222222");
  ASSERT_NE(spec_a, std::string::npos);
  ASSERT_NE(spec_b, std::string::npos);
  EXPECT_LT(spec_a, text.find("r3"));
  EXPECT_LT(text.find("r3"), spec_b);
  EXPECT_NE(text.find("* r2"), std::string::npos) << text;
  // The best run's bar is full (20 blocks), a run at 80% of it 16.
  std::string full, sixteen;
  for (int i = 0; i < 20; ++i) full += "\u2588";
  for (int i = 0; i < 16; ++i) sixteen += "\u2588";
  EXPECT_NE(text.find(full), std::string::npos);
  EXPECT_NE(text.find(sixteen + "    "), std::string::npos) << text;
  EXPECT_NE(text.find("gate passed"), std::string::npos);
  EXPECT_NE(text.find("q 11/11"), std::string::npos);
}

TEST(BenchReportTest, SaysWhenNothingIsKept) {
  EXPECT_EQ(RenderBenchHistory({}, {}, ""),
            "No bench runs kept yet (fleet bench deployment.NAME).\n");
  EXPECT_EQ(RenderBenchHistory({}, {}, "lab"), "No bench runs of deployment lab kept.\n");
}

}  // namespace
}  // namespace fleet
