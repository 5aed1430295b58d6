#include "providers/deployment/row_probe.h"

#include "providers/deployment/rows_probe_sh.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// Lines around the header stream (which is framed by byte counts itself),
// as rows_probe.sh prints them.
constexpr const char* kBegin = "@@rows-headers\n";
constexpr const char* kEnd = "\n@@rows-headers-end=";

}  // namespace

std::string WithRowsProbe(const std::string& container_script, const RowSource& rows) {
  if (rows.tensors.empty()) return container_script;
  // Both scripts as values that rows_probe.sh evals, each in its subshell:
  // no process more than the `( )` the frame had before.
  return ScriptWithValues({{"rp_container", ShellQuote(container_script)},
                           {"rp_headers", ShellQuote(SnapshotHeadersScript(rows.location))}},
                          kRowsProbeScript, kRowsProbeScriptSize);
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
