// {rows:TENSOR}: a recipe placeholder that gives each rank of a group its
// row range of a tensor's first dimension (the log's engram rows, split
// over the nodes of one engine), read from the model's safetensors headers.
//
// Rank r of R gets "begin:end" (end exclusive) of providers/model/
// row_tiling.h: the ranges tile [0, N) exactly, the first N % R ranks one
// row more. TENSOR is the tensor's name as the headers spell it (any
// characters but '{' and '}'), e.g. {rows:model.engram.weight}. A recipe
// that uses it runs one engine across its nodes, as with {rank}.
//
// The headers are read on each rank's node, from the snapshot the serve
// binds: in the plan's probe round trip when the model is there, else by
// the step once the model is staged. A tensor the headers lack is an error
// naming the model and the tensor.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_ROW_PLACEHOLDER_H_
#define FLEET_PROVIDERS_SHARED_SERVING_ROW_PLACEHOLDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "manifests/recipe.h"
#include "providers/shared/hub_remote.h"
#include "src/status.h"

namespace fleet {

// Tensor name -> its first dimension (rows).
using TensorRowCounts = std::map<std::string, uint64_t>;

// The tensors a recipe's {rows:...} placeholders name, sorted, once each.
std::vector<std::string> RowPlaceholderTensors(const Recipe& recipe);

// The placeholder values ("rows:NAME" -> "begin:end") of rank `rank` of
// `nnodes` for each of `rows`.
std::map<std::string, std::string> RowPlaceholderValues(const TensorRowCounts& rows, int rank,
                                                        int nnodes);

// The rows of each of `tensors` in the headers ReadSnapshotHeaders read; an
// error naming `model` and the first tensor absent (or a scalar).
Result<TensorRowCounts> CountTensorRows(const SnapshotHeaders& headers,
                                        const std::vector<std::string>& tensors,
                                        const std::string& model);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_ROW_PLACEHOLDER_H_
