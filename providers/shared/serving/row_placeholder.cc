#include "providers/shared/serving/row_placeholder.h"

#include <set>

#include "providers/shared/row_tiling.h"
#include "providers/shared/safetensors.h"

namespace fleet {

namespace {

constexpr const char* kOpen = "{rows:";

void CollectTensors(const std::string& s, std::set<std::string>* out) {
  const std::string open = kOpen;
  for (size_t at = s.find(open); at != std::string::npos; at = s.find(open, at + 1)) {
    const size_t begin = at + open.size();
    const size_t close = s.find_first_of("{}", begin);
    if (close == std::string::npos || s[close] != '}' || close == begin) continue;
    out->insert(s.substr(begin, close - begin));
  }
}

}  // namespace

std::vector<std::string> RowPlaceholderTensors(const Recipe& recipe) {
  std::set<std::string> names;
  CollectTensors(recipe.model, &names);
  for (const std::string& a : recipe.args) CollectTensors(a, &names);
  for (const auto& [k, v] : recipe.env) CollectTensors(v, &names);
  for (const std::string& d : recipe.devices) CollectTensors(d, &names);
  for (const RecipeMount& m : recipe.extra_mounts) {
    CollectTensors(m.host, &names);
    CollectTensors(m.container, &names);
  }
  return {names.begin(), names.end()};
}

std::map<std::string, std::string> RowPlaceholderValues(const TensorRowCounts& rows, int rank,
                                                        int nnodes) {
  std::map<std::string, std::string> values;
  if (nnodes < 1 || rank < 0 || rank >= nnodes) return values;
  for (const auto& [name, n] : rows) {
    const RowRange r = RowRangeFor(n, static_cast<uint64_t>(nnodes), static_cast<uint64_t>(rank));
    values.insert_or_assign("rows:" + name, std::to_string(r.begin) + ":" + std::to_string(r.end));
  }
  return values;
}

Result<TensorRowCounts> CountTensorRows(const SnapshotHeaders& headers,
                                        const std::vector<std::string>& tensors,
                                        const std::string& model) {
  std::vector<SafetensorsHeader> parsed;
  for (const HeaderSample& h : headers.headers) {
    Result<SafetensorsHeader> p = ParseSafetensorsHeader(h.header, h.header_length, h.size);
    if (!p.ok())
      return Result<TensorRowCounts>::Error("model " + model + ": " + h.path + ": " +
                                            p.status().message());
    parsed.push_back(std::move(*p));
  }
  TensorRowCounts rows;
  for (const std::string& name : tensors) {
    Result<uint64_t> n = TensorRows(parsed, name);
    if (!n.ok())
      return Result<TensorRowCounts>::Error("model " + model + ": {rows:" + name +
                                            "}: " + n.status().message());
    rows[name] = *n;
  }
  return rows;
}

}  // namespace fleet
