#include "providers/deployment/row_probe.h"

namespace fleet {

namespace {

// Lines around the header stream (which is framed by byte counts itself).
constexpr const char* kBegin = "@@rows-headers\n";
constexpr const char* kEnd = "\n@@rows-headers-end=";

}  // namespace

std::string WithRowsProbe(const std::string& container_script, const RowSource& rows) {
  if (rows.tensors.empty()) return container_script;
  return "(\n" + container_script + "\n)\nprintf '@@rows-headers\\n'\n(\n" +
         SnapshotHeadersScript(rows.location) +
         "\n) 2>/dev/null\nprintf '\\n@@rows-headers-end=%s\\n' \"$?\"\n";
}

std::string ParseRowsProbe(const std::string& output, const RowSource& rows, ContainerProbe* p) {
  if (rows.tensors.empty()) return output;
  const size_t begin = output.find(kBegin);
  const size_t end = output.rfind(kEnd);
  if (begin == std::string::npos || end == std::string::npos || end < begin) {
    p->rows_error = "model " + rows.model + ": the probe read no safetensors headers";
    return output.substr(0, begin);
  }
  const std::string stream =
      output.substr(begin + std::string(kBegin).size(), end - begin - std::string(kBegin).size());
  const std::string rc = output.substr(end + std::string(kEnd).size(), 1);
  if (rc == "3") {
    p->rows_snapshot_missing = true;
  } else if (rc != "0") {
    p->rows_error = "model " + rows.model + ": reading its safetensors headers on the node failed";
  } else if (Result<SnapshotHeaders> h = ParseHeaderStream(stream); !h.ok()) {
    p->rows_error = "model " + rows.model + ": " + h.status().message();
  } else if (Result<TensorRowCounts> n = CountTensorRows(*h, rows.tensors, rows.model); !n.ok()) {
    p->rows_error = n.status().message();
  } else {
    p->tensor_rows = *n;
  }
  return output.substr(0, begin);
}

}  // namespace fleet
