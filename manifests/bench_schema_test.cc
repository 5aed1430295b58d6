#include "manifests/bench_schema.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

namespace fleet {
namespace {

struct Read {
  bool ok = false;
  BenchSettings settings;
  std::string diags;
};

// fleet.yaml whose line 3 on is `bench`.
Read Load(const std::string& bench) {
  char pattern[] = "/tmp/fleet-bench-schema-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  std::ofstream(dir + "/fleet.yaml") << "version: 1\nfleet: lab\n" << bench;
  Read r;
  Diagnostics diags;
  r.ok = LoadBenchSettings(dir, &r.settings, &diags);
  for (const Diagnostic& d : diags) r.diags += d.ToString() + "\n";
  return r;
}

TEST(BenchSchemaTest, BuiltinProfilesWithoutABenchBlock) {
  const Read r = Load("");
  ASSERT_TRUE(r.ok) << r.diags;
  ASSERT_EQ(r.settings.profiles.count("quick"), 1u);
  ASSERT_EQ(r.settings.profiles.count("full"), 1u);
  const BenchProfile& full = r.settings.profiles.at("full");
  EXPECT_EQ(full.depths, (std::vector<int>{0, 4096, 32768, 131072}));
  EXPECT_EQ(full.concurrency, (std::vector<int>{1, 2, 4}));
  EXPECT_TRUE(full.fresh && full.cached);
  EXPECT_TRUE(r.settings.harness.empty());
}

TEST(BenchSchemaTest, NamedProfileQualityAndHarness) {
  const Read r = Load(
      "bench:\n"
      "  profiles:\n"
      "    nightly: {depths: [0, 4096], concurrency: [1, 4], contexts: [fresh], requests: 5,\n"
      "              max_tokens: 100}\n"
      "    quick: {depths: [512]}\n"
      "  quality: quality/lab.jsonl\n"
      "  harness: tool-eval-bench --json\n");
  ASSERT_TRUE(r.ok) << r.diags;
  const BenchProfile& n = r.settings.profiles.at("nightly");
  EXPECT_EQ(n.depths, (std::vector<int>{0, 4096}));
  EXPECT_EQ(n.concurrency, (std::vector<int>{1, 4}));
  EXPECT_TRUE(n.fresh);
  EXPECT_FALSE(n.cached);
  EXPECT_EQ(n.requests, 5);
  EXPECT_EQ(n.max_tokens, 100);
  // A profile of a built-in's name replaces it; unset keys take defaults.
  const BenchProfile& q = r.settings.profiles.at("quick");
  EXPECT_EQ(q.depths, (std::vector<int>{512}));
  EXPECT_EQ(q.concurrency, (std::vector<int>{1}));
  EXPECT_EQ(r.settings.quality_file, "quality/lab.jsonl");
  EXPECT_EQ(r.settings.harness, "tool-eval-bench --json");
}

TEST(BenchSchemaTest, ErrorsNameFileLineColumn) {
  const Read r = Load(
      "bench:\n"
      "  profiles:\n"
      "    bad: {depths: [0, -5], concurrency: [0], contexts: [warm], requests: 0, colour: red}\n"
      "    none: {concurrency: [1]}\n"
      "  qualty: x.jsonl\n");
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.diags.find("fleet.yaml:5:23: error: 'depths' in bench profile 'bad' holds"),
            std::string::npos)
      << r.diags;
  EXPECT_NE(r.diags.find("'concurrency' in bench profile 'bad' holds"), std::string::npos)
      << r.diags;
  EXPECT_NE(r.diags.find("'contexts' in bench profile 'bad' holds 'warm'"), std::string::npos)
      << r.diags;
  EXPECT_NE(r.diags.find("colour"), std::string::npos) << r.diags;
  EXPECT_NE(r.diags.find("fleet.yaml:6:"), std::string::npos) << r.diags;  // none: no depths
  EXPECT_NE(r.diags.find("qualty"), std::string::npos) << r.diags;
  EXPECT_EQ(r.settings.profiles.count("bad"), 0u);
  EXPECT_EQ(r.settings.profiles.count("none"), 0u);
}

}  // namespace
}  // namespace fleet
