#include "providers/shared/row_tiling.h"

namespace fleet {

RowRange RowRangeFor(uint64_t rows, uint64_t ranks, uint64_t rank) {
  const uint64_t base = rows / ranks;
  const uint64_t extra = rows % ranks;  // ranks [0, extra) get one row more
  RowRange r;
  r.begin = rank * base + (rank < extra ? rank : extra);
  r.end = r.begin + base + (rank < extra ? 1 : 0);
  return r;
}

std::vector<RowRange> TileRows(uint64_t rows, uint64_t ranks) {
  std::vector<RowRange> out;
  out.reserve(ranks);
  for (uint64_t r = 0; r < ranks; ++r) out.push_back(RowRangeFor(rows, ranks, r));
  return out;
}

Result<uint64_t> TensorRows(const std::vector<SafetensorsHeader>& headers,
                            const std::string& name) {
  for (const SafetensorsHeader& h : headers)
    for (const SafetensorsTensor& t : h.tensors)
      if (t.name == name) {
        if (t.shape.empty())
          return Result<uint64_t>::Error("tensor '" + name + "' is a scalar: it has no rows");
        return t.shape[0];
      }
  return Result<uint64_t>::Error("no tensor '" + name + "' in the snapshot's safetensors headers");
}

Result<std::string> RowRangeText(const std::vector<SafetensorsHeader>& headers,
                                 const std::string& name, uint64_t ranks, uint64_t rank) {
  if (ranks == 0 || rank >= ranks)
    return Result<std::string>::Error("rank " + std::to_string(rank) + " of " +
                                      std::to_string(ranks) + " is not a rank");
  Result<uint64_t> rows = TensorRows(headers, name);
  if (!rows.ok()) return rows.status();
  const RowRange r = RowRangeFor(*rows, ranks, rank);
  return std::to_string(r.begin) + ":" + std::to_string(r.end);
}

}  // namespace fleet
