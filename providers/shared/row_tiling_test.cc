#include "providers/shared/row_tiling.h"

#include <gtest/gtest.h>

#include <random>

namespace fleet {
namespace {

// The ranges tile [0, N) exactly: contiguous from 0, disjoint, ending at N,
// and no two ranks differ by more than one row (floor/ceil).
void ExpectTiles(uint64_t rows, uint64_t ranks) {
  const std::vector<RowRange> t = TileRows(rows, ranks);
  ASSERT_EQ(t.size(), ranks);
  uint64_t at = 0, lo = UINT64_MAX, hi = 0;
  for (uint64_t r = 0; r < ranks; ++r) {
    ASSERT_EQ(t[r].begin, at) << "N=" << rows << " R=" << ranks << " rank " << r;
    ASSERT_GE(t[r].end, t[r].begin);
    const uint64_t n = t[r].end - t[r].begin;
    ASSERT_TRUE(n == rows / ranks || n == rows / ranks + 1) << "N=" << rows << " R=" << ranks;
    lo = std::min(lo, n);
    hi = std::max(hi, n);
    at = t[r].end;
  }
  ASSERT_EQ(at, rows) << "N=" << rows << " R=" << ranks;
  ASSERT_LE(hi - lo, 1u);
}

TEST(RowTiling, TheLogsLayers) {
  // layer 14: 384,016,682 rows over 4 ranks (not divisible by 4)
  const std::vector<RowRange> t = TileRows(384016682, 4);
  EXPECT_EQ(t[0].begin, 0u);
  EXPECT_EQ(t[0].end, 96004171u);
  EXPECT_EQ(t[1].end, 192008342u);
  EXPECT_EQ(t[2].end, 288012512u);
  EXPECT_EQ(t[3].end, 384016682u);
  ExpectTiles(384016682, 4);
  ExpectTiles(384006168, 4);  // layer 1
}

TEST(RowTiling, PropertyOverManyNAndR) {
  for (uint64_t n = 0; n <= 200; ++n)
    for (uint64_t r = 1; r <= 17; ++r) ExpectTiles(n, r);
  std::mt19937_64 rng(20260926);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t n = rng() % (uint64_t{1} << (rng() % 48));
    const uint64_t r = 1 + rng() % 64;
    ExpectTiles(n, r);
  }
  ExpectTiles(UINT64_MAX / 2, 7);  // no overflow near the top
}

TEST(RowTiling, FromSafetensorsHeaders) {
  SafetensorsHeader h;
  h.tensors.push_back({"engram.14.rows", "BF16", {384016682, 8}, 0, 0});
  h.tensors.push_back({"scale", "F32", {}, 0, 0});
  Result<std::string> r = RowRangeText({h}, "engram.14.rows", 4, 3);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(*r, "288012512:384016682");
  EXPECT_FALSE(RowRangeText({h}, "scale", 4, 0).ok());
  Result<std::string> missing = RowRangeText({h}, "engram.1.rows", 4, 0);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("no tensor 'engram.1.rows'"), std::string::npos);
  EXPECT_FALSE(RowRangeText({h}, "engram.14.rows", 4, 4).ok());
}

}  // namespace
}  // namespace fleet
