#include "providers/model/repo_writes.h"

#include "providers/model/blob_bytes_sh.h"
#include "providers/model/link_blobs_sh.h"
#include "providers/model/model_copy.h"
#include "providers/model/write_refs_sh.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// A1 B1 A2 B2...: the pairs as the scripts' positional parameters, quoted.
std::vector<std::string> PairWords(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<std::string> words;
  for (const auto& [a, b] : pairs) {
    words.push_back(ShellQuote(a));
    words.push_back(ShellQuote(b));
  }
  return words;
}

}  // namespace

std::string LinkBlobsScript(const HubLocation& loc, const BlobLinks& links) {
  return model_copy_internal::TargetPrelude(loc) +
         ScriptWithValuesAndArgs({}, PairWords(links), kLinkBlobsScript, kLinkBlobsScriptSize);
}

std::string WriteRefsScript(const HubLocation& loc, const RefValues& refs, bool swap) {
  return (swap ? RepoPrelude(loc) : model_copy_internal::TargetPrelude(loc)) +
         ScriptWithValuesAndArgs({{"wr_swap", swap ? "1" : "0"}}, PairWords(refs), kWriteRefsScript,
                                 kWriteRefsScriptSize);
}

std::string BlobBytesScript(const HubLocation& loc) {
  return RepoPrelude(loc) + std::string(kBlobBytesScript, kBlobBytesScriptSize);
}

}  // namespace fleet
