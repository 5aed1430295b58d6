// The plan-time read of a {rows:TENSOR} recipe's tensors (row_placeholder.h):
// the deployment's probe fragment also reads the safetensors headers of the
// snapshot on the node, after its container probe, and the rows of the named
// tensors land in the ContainerProbe.
#ifndef FLEET_PROVIDERS_DEPLOYMENT_ROW_PROBE_H_
#define FLEET_PROVIDERS_DEPLOYMENT_ROW_PROBE_H_

#include <string>

#include "providers/shared/serving/deployment_json.h"

namespace fleet {

// `container_script` (the container probe), then, when `rows` names
// tensors, the header read, framed so that ParseRowsProbe can split them.
std::string WithRowsProbe(const std::string& container_script, const RowSource& rows);

// Splits what WithRowsProbe's script printed: returns the container probe's
// part; fills p->tensor_rows, rows_snapshot_missing or rows_error.
std::string ParseRowsProbe(const std::string& output, const RowSource& rows, ContainerProbe* p);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_DEPLOYMENT_ROW_PROBE_H_
