#include "providers/model/fabric_copy.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "providers/model/copy_verify_sh.h"
#include "providers/model/hashing_writer_sh.h"
#include "providers/shared/blob_hash.h"
#include "providers/shared/fabric_stream.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

using namespace model_copy_internal;

// copy_verify.sh (beside this file) with its values.
std::string VerifyOnTargetScript(const Paths& p, const CopyItem& item) {
  std::string kind;
  switch (BlobHashKindOf(item.blob)) {
    case BlobHashKind::kSha256:
      kind = "sha256";
      break;
    case BlobHashKind::kGitSha1:
      kind = "git-sha1";
      break;
    case BlobHashKind::kNone:
      return "";
  }
  return ScriptWithValues({{"cv_kind", kind},
                           {"cv_inc", p.inc},
                           {"cv_size", std::to_string(item.size)},
                           {"cv_blob", ShellQuote(item.blob)},
                           {"cv_choose", ShellQuote(kChooseSha256Cli)}},
                          kCopyVerifyScript, kCopyVerifyScriptSize);
}

// hashing_writer.sh (beside this file) with its values.
std::string HashingWriterCommand(const Paths& p, const CopyItem& item) {
  std::string kind;
  switch (BlobHashKindOf(item.blob)) {
    case BlobHashKind::kSha256:
      kind = "sha256";
      break;
    case BlobHashKind::kGitSha1:
      kind = "git-sha1";
      break;
    case BlobHashKind::kNone:
      kind = "none";
      break;
  }
  return ScriptWithValues({{"hw_kind", kind},
                           {"hw_inc", p.inc},
                           {"hw_size", std::to_string(item.size)},
                           {"hw_choose", ShellQuote(kChooseSha256Cli)}},
                          kHashingWriterScript, kHashingWriterScriptSize);
}

std::string StreamHashProblem(std::string_view out, const CopyItem& item) {
  if (BlobHashKindOf(item.blob) == BlobHashKind::kNone) return "";
  // The hash line is "HASH  -"; whatever else the channel added (a
  // listener's blank line) is not a word of hex.
  std::string_view hash;
  for (size_t at = 0; at < out.size();) {
    const size_t end = std::min(out.find_first_of(" \n", at), out.size());
    const std::string_view word = out.substr(at, end - at);
    if (word == item.blob) return "";
    if (hash.empty() && word.size() >= 40 &&
        word.find_first_not_of("0123456789abcdef") == std::string_view::npos)
      hash = word;
    at = end + 1;
  }
  return "what arrived hashes to " + std::string(hash.empty() ? "nothing" : hash) +
         ", not its blob name";
}

namespace {

Status CopyOneOverFabric(Transport* src, Transport* dst, const CopySide& s, const CopySide& d,
                         const CopyItem& item, const FabricRoute& route, Clock* clock,
                         std::atomic<bool>* unconnected) {
  const Paths p = TargetPaths(item);
  const std::string what = item.path + " (" + std::to_string(item.size) + " bytes)";
  const std::string src_file = "\"$m/snapshots/$r/\"" + ShellQuote(item.path);
  FabricStreamSpec stream;
  stream.source = src;
  stream.source_cmd =
      RepoPrelude(s.loc) +
      (item.offset > 0 ? "exec tail -c +" + std::to_string(item.offset + 1) + " -- " + src_file
                       : "exec cat -- " + src_file);
  stream.target = dst;
  stream.target_cmd = TargetPrelude(d.loc) + CopyWriterCommand(p, item);
  stream.target_address = route.target_address;
  stream.clock = clock;
  FabricStreamResult r = FabricStream(stream);
  if (r.unconnected) *unconnected = true;
  if (!r.ok())
    return Status::Error("copying " + what + " " + route.Describe() + ": " + r.Problem());
  Result<CommandResult> f =
      dst->Run(TargetPrelude(d.loc) + VerifyOnTargetScript(p, item) + FinishScript(p, item));
  if (!f.ok()) return f.status().Prefixed("finishing " + what);
  if (f->exit_code != 0) return Status::Error(dst->Describe() + ": " + what + ": " + f->err);
  return Status::OK();
}

}  // namespace

Result<CopyReport> CopyModelFilesOverFabric(const CopySide& src, const CopySide& dst,
                                            const std::vector<CopyItem>& items,
                                            const FabricRoute& route, const CopyOptions& options,
                                            bool* unconnected) {
  std::atomic<bool> no_connection{false};
  Result<CopyReport> report = model_copy_internal::CopyInStreams(
      src, dst, items, options.streams,
      [&](Transport* s, Transport* d, const CopyItem& item, bool* hashed) {
        Status st = CopyOneOverFabric(s, d, src, dst, item, route, options.clock, &no_connection);
        if (!st.ok()) return st;
        if (options.on_bytes) options.on_bytes(item.size - item.offset);
        *hashed = BlobHashKindOf(item.blob) != BlobHashKind::kNone;
        return Status::OK();
      });
  *unconnected = !report.ok() && no_connection;
  return report;
}

}  // namespace fleet
