// Reads a whole file for the manifest readers (fleet.yaml, recipes). A file
// that cannot be opened or read is an error naming the errno, never an empty
// text: an open that failed for want of descriptors once read as an empty
// fleet.yaml ("fleet.yaml is empty") and fired drift in `fleet watch`.
#ifndef FLEET_MANIFESTS_FILE_TEXT_H_
#define FLEET_MANIFESTS_FILE_TEXT_H_

#include <string>

namespace fleet {

struct FileText {
  bool ok = false;
  std::string text;   // the whole file when ok
  int error_no = 0;   // the errno of the failed open or read
  std::string error;  // "cannot open PATH: Too many open files (EMFILE)"
  // The failure is the reader's own (own_fault.h), not the file's: it
  // says nothing about what the file holds.
  bool own_fault = false;
};

// `path` as it is named in errors: the caller's display name.
FileText ReadFileText(const std::string& path, const std::string& display);

}  // namespace fleet

#endif  // FLEET_MANIFESTS_FILE_TEXT_H_
