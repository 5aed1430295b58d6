#include "providers/model/repo_writes.h"

#include "providers/model/blob_bytes_sh.h"
#include "providers/model/link_blobs_sh.h"
#include "providers/model/model_copy.h"
#include "providers/model/write_refs_sh.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// "set -- A1 B1 A2 B2...": the pairs as the scripts' positional parameters.
std::string SetPairs(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string s = "set --";
  for (const auto& [a, b] : pairs) s += " " + ShellQuote(a) + " " + ShellQuote(b);
  return s + "\n";
}

}  // namespace

std::string LinkBlobsScript(const HubLocation& loc, const BlobLinks& links) {
  return model_copy_internal::TargetPrelude(loc) + SetPairs(links) +
         std::string(kLinkBlobsScript, kLinkBlobsScriptSize);
}

std::string WriteRefsScript(const HubLocation& loc, const RefValues& refs, bool swap) {
  return (swap ? RepoPrelude(loc) : model_copy_internal::TargetPrelude(loc)) +
         (swap ? "wr_swap=1\n" : "wr_swap=0\n") + SetPairs(refs) +
         std::string(kWriteRefsScript, kWriteRefsScriptSize);
}

std::string BlobBytesScript(const HubLocation& loc) {
  return RepoPrelude(loc) + std::string(kBlobBytesScript, kBlobBytesScriptSize);
}

}  // namespace fleet
