// Per-rank row ranges of a tensor's first dimension (the log's engram rows):
// a serve on R nodes where rank r owns rows [begin, end) of an N-row table
// needs ranges that tile [0, N) exactly, also when R does not divide N
// (384,016,682 rows over 4 ranks). The first N % R ranks get one row more
// (ceil), the rest floor(N / R): contiguous, disjoint, covering, and no two
// ranks differ by more than one row.
#ifndef FLEET_PROVIDERS_SHARED_ROW_TILING_H_
#define FLEET_PROVIDERS_SHARED_ROW_TILING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "providers/shared/safetensors.h"
#include "src/status.h"

namespace fleet {

struct RowRange {
  uint64_t begin = 0;
  uint64_t end = 0;  // exclusive
};

// Rank `rank` of `ranks` over `rows` rows. REQUIRES: ranks > 0, rank < ranks.
RowRange RowRangeFor(uint64_t rows, uint64_t ranks, uint64_t rank);

// Every rank's range, in rank order.
std::vector<RowRange> TileRows(uint64_t rows, uint64_t ranks);

// The first dimension of tensor `name` in `headers` (the snapshot's
// safetensors headers); an error naming the tensor when it is absent or a
// scalar.
Result<uint64_t> TensorRows(const std::vector<SafetensorsHeader>& headers, const std::string& name);

// "begin:end" for rank `rank` of `ranks` of tensor `name`: what a recipe's
// per-rank row placeholder becomes.
Result<std::string> RowRangeText(const std::vector<SafetensorsHeader>& headers,
                                 const std::string& name, uint64_t ranks, uint64_t rank);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_ROW_TILING_H_
