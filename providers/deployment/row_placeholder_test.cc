#include "providers/shared/serving/row_placeholder.h"

#include <gtest/gtest.h>

#include "providers/deployment/row_probe.h"
#include "providers/shared/hub_cache.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

TEST(RowPlaceholder, TensorsNamedAnywhereInTheRecipe) {
  Recipe r;
  r.model = "{model_path}";
  r.args = {"--engram-rows={rows:model.layers.14.engram.weight}", "--x", "{rows:b}:{rank}",
            "{rows:}", "{rows:unclosed"};
  r.env = {{"ROWS", "{rows:b}"}};
  EXPECT_EQ(RowPlaceholderTensors(r),
            (std::vector<std::string>{"b", "model.layers.14.engram.weight"}));
  EXPECT_TRUE(RowPlaceholderTensors(Recipe{}).empty());
}

TEST(RowPlaceholder, EachRankItsRange) {
  const TensorRowCounts rows = {{"e", 384016682}, {"small", 10}};
  const std::vector<std::string> e = {"0:96004171", "96004171:192008342", "192008342:288012512",
                                      "288012512:384016682"};
  const std::vector<std::string> small = {"0:3", "3:6", "6:8", "8:10"};
  for (int rank = 0; rank < 4; ++rank) {
    const auto v = RowPlaceholderValues(rows, rank, 4);
    EXPECT_EQ(v.at("rows:e"), e[rank]);
    EXPECT_EQ(v.at("rows:small"), small[rank]);
  }
  EXPECT_TRUE(RowPlaceholderValues(rows, 4, 4).empty());
}

HeaderSample Sample(const std::string& path, const std::string& json, uint64_t data) {
  return {path, 8 + json.size() + data, json.size(), json};
}

TEST(RowPlaceholder, RowsFromTheHeaders) {
  SnapshotHeaders h;
  h.headers.push_back(Sample("model-00001-of-00002.safetensors",
                             R"({"a":{"dtype":"F32","shape":[7,2],"data_offsets":[0,56]}})", 56));
  h.headers.push_back(Sample("model-00002-of-00002.safetensors",
                             R"({"e":{"dtype":"BF16","shape":[11,2],"data_offsets":[0,44]},)"
                             R"("s":{"dtype":"F32","shape":[],"data_offsets":[44,48]}})",
                             48));
  Result<TensorRowCounts> rows = CountTensorRows(h, {"a", "e"}, "tiny");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(*rows, (TensorRowCounts{{"a", 7}, {"e", 11}}));
  Result<TensorRowCounts> missing = CountTensorRows(h, {"a", "nope"}, "tiny");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "model tiny: {rows:nope}: no tensor 'nope' in the snapshot's safetensors headers");
  EXPECT_FALSE(CountTensorRows(h, {"s"}, "tiny").ok());  // a scalar has no rows
}

TEST(RowProbe, SplitsContainerOutputFromHeaders) {
  RowSource src{{"e"}, "tiny", {"~/hub", "org/tiny", std::string(40, 'a')}};
  const std::string json = R"({"e":{"dtype":"F32","shape":[5],"data_offsets":[0,20]}})";
  const std::string out = "state=running\nspec=abc\n@@rows-headers\nH\t" +
                          std::to_string(8 + json.size() + 20) + "\t" + "00" + "\t" +
                          std::to_string(json.size()) + "\tm.safetensors\n" + json +
                          "\n@@rows-headers-end=0\n";
  ContainerProbe p;
  // The header length field is the 8 bytes in hex, little-endian.
  char hex[17];
  std::snprintf(hex, sizeof hex, "%02x00000000000000", static_cast<unsigned>(json.size()));
  std::string framed = out;
  framed.replace(framed.find("\t00\t"), 4, std::string("\t") + hex + "\t");
  EXPECT_EQ(ParseRowsProbe(framed, src, &p), "state=running\nspec=abc\n");
  EXPECT_EQ(p.rows_error, "");
  EXPECT_EQ(p.tensor_rows, (TensorRowCounts{{"e", 5}}));

  ContainerProbe absent;
  ParseRowsProbe("absent=1\n@@rows-headers\n\n@@rows-headers-end=3\n", src, &absent);
  EXPECT_TRUE(absent.rows_snapshot_missing);
  EXPECT_TRUE(absent.tensor_rows.empty());
}

// rows_probe.sh under /bin/sh with a snapshot in a scratch hub cache: the
// container probe's output and the rows of its tensors, split again by
// ParseRowsProbe; the container probe's `exit` ends its own subshell only.
TEST(RowProbe, RunsBothProbesOnTheNode) {
  const testing_support::StubCli stub("rows_probe_test");
  const std::string rev(40, 'b');
  RowSource src{{"e"}, "tiny", {stub.dir() + "/hub", "org/tiny", rev}};
  const std::string container = "echo state=running\nexit 4\n";

  ContainerProbe absent;
  testing_support::ShellRun run = stub.Run(WithRowsProbe(container, src));
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(ParseRowsProbe(run.out, src, &absent), "state=running\n") << run.out;
  EXPECT_TRUE(absent.rows_snapshot_missing) << run.out;
  EXPECT_EQ(absent.rows_error, "");

  const std::string json = R"({"e":{"dtype":"F32","shape":[5,2],"data_offsets":[0,40]}})";
  std::string length(8, '\0');
  length[0] = static_cast<char>(json.size());
  stub.Write("hub/" + HubRepoDirName("org/tiny") + "/snapshots/" + rev + "/m.safetensors",
             length + json + std::string(40, 'x'));
  ContainerProbe p;
  run = stub.Run(WithRowsProbe(container, src));
  EXPECT_EQ(ParseRowsProbe(run.out, src, &p), "state=running\n") << run.out;
  EXPECT_FALSE(p.rows_snapshot_missing);
  EXPECT_EQ(p.rows_error, "");
  EXPECT_EQ(p.tensor_rows, (TensorRowCounts{{"e", 5}})) << run.out;
}

}  // namespace
}  // namespace fleet
