// A problem found in a manifest or recipe, located to file:line:column.
#ifndef FLEET_MANIFESTS_DIAGNOSTIC_H_
#define FLEET_MANIFESTS_DIAGNOSTIC_H_

#include <string>
#include <vector>

namespace fleet {

struct SourceLoc {
  std::string file;              // path as the operator would type it (relative to -C dir)
  int line = 0;                  // 1-based; 0 = unknown
  int column = 0;                // 1-based; 0 = unknown
  std::string ToString() const;  // "fleet.yaml:12:5" (or just the file)
};

struct Diagnostic {
  enum class Severity { kError, kWarning };
  Severity severity = Severity::kError;
  SourceLoc loc;
  std::string message;  // what is wrong, what was expected, "did you mean 'x'?"
  // The reader could not read the file for a reason of its own (no file
  // descriptor left, own_fault.h): nothing is known of what the file holds.
  bool own_fault = false;
  std::string ToString() const;  // "fleet.yaml:12:5: error: ..."
};

using Diagnostics = std::vector<Diagnostic>;

bool HasErrors(const Diagnostics& diags);

// The candidate closest to `word` by edit distance, or "" when none is close
// enough to be a plausible typo. Used for "did you mean" hints.
std::string NearestName(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_DIAGNOSTIC_H_
