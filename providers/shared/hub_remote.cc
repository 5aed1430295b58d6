#include "providers/shared/hub_remote.h"

#include <algorithm>
#include <sstream>

#include "providers/shared/blob_hash.h"
#include "providers/shared/deep_verify_sh.h"
#include "providers/shared/hub_cache.h"
#include "providers/shared/legacy_layout_link_sh.h"
#include "providers/shared/node_script.h"
#include "providers/shared/relative_links_sh.h"
#include "providers/shared/remove_revision_sh.h"
#include "providers/shared/repo_folder_sh.h"
#include "providers/shared/snapshot_headers_sh.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// 0-15, or -1 for a character that is not a hex digit (std::stoull threw
// on those, out of the parser).
int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Where(Transport* t, const HubLocation& loc) {
  return t->Describe() + ": " + loc.repo + "@" + loc.revision.substr(0, 12) + " in " + loc.cache;
}

Status CommandFailed(Transport* t, const HubLocation& loc, const std::string& what,
                     const CommandResult& r) {
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n') err.pop_back();
  return Status::Error(Where(t, loc) + ": " + what + " exited " + std::to_string(r.exit_code) +
                       (err.empty() ? "" : ": " + err));
}

}  // namespace

std::string RepoPrelude(const HubLocation& loc) {
  return ScriptWithValues({{"c", NodePathWord(loc.cache)},
                           {"d", ShellQuote(HubRepoDirName(loc.repo))},
                           {"r", ShellQuote(loc.revision)}},
                          kRepoFolderScript, kRepoFolderScriptSize);
}

Result<HubProbe> ProbeHub(Transport* t, const HubLocation& loc, const std::string& branch) {
  HubProbeTarget target{loc.cache, loc.repo, loc.revision, {}, branch};
  Result<CommandResult> r = t->Run(HubProbeScript(target));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "probing the hub cache", *r);
  HubProbe p = ParseHubProbe(r->out);
  if (!p.errors.empty()) return Result<HubProbe>::Error(Where(t, loc) + ": " + p.errors.front());
  return p;
}

Result<SnapshotHeaders> ParseHeaderStream(const std::string& out) {
  using R = Result<SnapshotHeaders>;
  SnapshotHeaders h;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t nl = out.find('\n', pos);
    if (nl == std::string::npos) return R::Error("header stream: unterminated line");
    std::string line = out.substr(pos, nl - pos);
    pos = nl + 1;
    if (line.empty()) continue;
    std::vector<std::string> f;
    size_t start = 0;
    const size_t want = line[0] == 'H' ? 5 : 3;
    while (f.size() + 1 < want) {
      size_t tab = line.find('\t', start);
      if (tab == std::string::npos) break;
      f.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    f.push_back(line.substr(start));
    if (f.size() != want) return R::Error("header stream: malformed line '" + line + "'");
    if (f[0] == "I") {  // I size path, then size bytes
      uint64_t n = LeadingDecimal(f[1]);
      if (out.size() - pos < n) return R::Error("header stream: " + f[2] + " cut short");
      h.indexes[f[2]] = out.substr(pos, n);
      pos += n;
    } else if (f[0] == "H") {  // H size hex8 follow path, then follow bytes
      HeaderSample s;
      s.size = LeadingDecimal(f[1]);
      const std::string& hex = f[2];
      for (size_t i = 0; i + 1 < hex.size() && i < 16; i += 2) {
        const int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
        if (hi < 0 || lo < 0) return R::Error("header stream: malformed line '" + line + "'");
        s.header_length |= static_cast<uint64_t>(hi * 16 + lo) << (4 * i);
      }
      uint64_t follow = LeadingDecimal(f[3]);
      s.path = f[4];
      if (out.size() - pos < follow) return R::Error("header stream: " + s.path + " cut short");
      s.header = out.substr(pos, follow);
      pos += follow;
      h.headers.push_back(std::move(s));
    } else {
      return R::Error("header stream: unexpected line '" + line + "'");
    }
  }
  return h;
}

// snapshot_headers.sh (beside this file; its header says what it prints)
// with its values.
std::string SnapshotHeadersScript(const HubLocation& loc) {
  return RepoPrelude(loc) + ScriptWithValues({{"shs_max", std::to_string(kMaxSafetensorsHeader)}},
                                             kSnapshotHeadersScript, kSnapshotHeadersScriptSize);
}

Result<SnapshotHeaders> ReadSnapshotHeaders(Transport* t, const HubLocation& loc) {
  Result<CommandResult> r = t->Run(SnapshotHeadersScript(loc));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "reading safetensors headers", *r);
  Result<SnapshotHeaders> h = ParseHeaderStream(r->out);
  if (!h.ok()) return h.status().Prefixed(Where(t, loc));
  return h;
}

namespace {

// deep_verify.sh (beside this file; its header says what it prints) with
// its values.
std::string DeepVerifyScript(const HubLocation& loc, const std::vector<std::string>& sha256,
                             const std::vector<std::string>& git, int parallel) {
  // Not `sh -c`: the channel's own shell runs it, and its `times` is what
  // the report reads.
  std::vector<std::string> args = {std::to_string(std::max(0, parallel)),
                                   std::to_string(git.size())};
  args.insert(args.end(), git.begin(), git.end());
  args.insert(args.end(), sha256.begin(), sha256.end());
  for (std::string& a : args) a = ShellQuote(a);
  return ScriptWithValuesAndArgs({{"c", NodePathWord(loc.cache)},
                                  {"d", ShellQuote(HubRepoDirName(loc.repo))},
                                  {"r", ShellQuote(loc.revision)},
                                  {"probe", ShellQuote(kProbeInstallPath)},
                                  {"choose", ShellQuote(kChooseSha256Cli)}},
                                 args, kDeepVerifyScript, kDeepVerifyScriptSize);
}

// "1m2.500s" -> 62.5; -1 when it is not bash's `times` format.
double TimesSeconds(const std::string& word) {
  size_t m = word.find('m');
  if (m == std::string::npos || word.size() < m + 3 || word.back() != 's') return -1;
  try {
    return std::stod(word.substr(0, m)) * 60 + std::stod(word.substr(m + 1, word.size() - m - 2));
  } catch (...) {
    return -1;
  }
}

}  // namespace

void ParseNodeHashTimes(const std::string& err, NodeHashReport* report) {
  std::istringstream in(err);
  std::string line;
  while (std::getline(in, line) && line.rfind("fleet-hash-times ", 0) != 0)
    if (line.rfind("fleet-hasher ", 0) == 0) report->hasher = line.substr(13);
  if (!in) return;
  report->files_at_once = std::atoi(line.c_str() + 17);
  std::string shell, children;
  if (!std::getline(in, shell) || !std::getline(in, children)) return;
  std::istringstream words(children);
  std::string user, sys;
  words >> user >> sys;
  const double u = TimesSeconds(user), s = TimesSeconds(sys);
  if (u >= 0 && s >= 0) report->cpu_seconds = u + s;
}

Result<NodeHashReport> DeepVerifyOnNode(
    Transport* t, const HubLocation& loc, const Listing& files, int parallel,
    const std::function<void(const std::string& path, uint64_t size)>& on_file) {
  std::vector<std::string> sha256, git;
  std::map<std::string, const ListedFile*> by_path;
  NodeHashReport report;
  std::vector<std::string>& problems = report.problems;
  for (const ListedFile& f : files) {
    by_path[f.path] = &f;
    switch (BlobHashKindOf(f.blob)) {
      case BlobHashKind::kSha256:
        sha256.push_back(f.path);
        break;
      case BlobHashKind::kGitSha1:
        git.push_back(f.path);
        break;
      default:
        problems.push_back(f.path + ": no blob name to check it against");
        break;
    }
  }
  std::stable_sort(sha256.begin(), sha256.end(), [&](const std::string& a, const std::string& b) {
    return by_path[a]->size > by_path[b]->size;
  });
  std::map<std::string, std::string> digests;
  std::string partial;
  // "<hex>  <path>" (sha256sum, sha1sum) or "<hex> *<path>" (openssl -r).
  auto take_line = [&](const std::string& line) {
    size_t sep = line.find(' ');
    if (sep == std::string::npos || sep + 2 > line.size()) return;
    std::string digest = line.substr(0, sep), path = line.substr(sep + 2);
    if (path.rfind("./", 0) == 0) path = path.substr(2);
    digests[path] = digest;
    auto it = by_path.find(path);
    if (on_file && it != by_path.end()) on_file(path, it->second->size);
  };
  Result<CommandResult> r =
      t->RunStreaming(DeepVerifyScript(loc, sha256, git, parallel), [&](std::string_view chunk) {
        partial.append(chunk);
        size_t nl;
        while ((nl = partial.find('\n')) != std::string::npos) {
          take_line(partial.substr(0, nl));
          partial.erase(0, nl + 1);
        }
        return true;
      });
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "hashing blobs", *r);
  ParseNodeHashTimes(r->err, &report);
  for (const ListedFile& f : files) {
    if (BlobHashKindOf(f.blob) == BlobHashKind::kNone) continue;
    auto it = digests.find(f.path);
    if (it == digests.end())
      problems.push_back(f.path + ": not hashed (unreadable?)");
    else if (it->second != f.blob)
      problems.push_back(f.path + ": content hash " + it->second.substr(0, 16) +
                         "... does not match its blob " + f.blob.substr(0, 16) + "... (corrupt)");
  }
  return report;
}

Status FixLegacyLayout(Transport* t, const HubLocation& loc) {
  // legacy_layout_link.sh (beside this file) with its values.
  const std::string script = ScriptWithValues(
      {{"c", NodePathWord(loc.cache)}, {"d", ShellQuote(HubRepoDirName(loc.repo))}},
      kLegacyLayoutLinkScript, kLegacyLayoutLinkScriptSize);
  Result<CommandResult> r = t->Run(script);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "linking the legacy layout", *r);
  return Status::OK();
}

std::string RelativeBlobLink(const std::string& path, const std::string& blob) {
  std::string up = "../../";
  for (char c : path)
    if (c == '/') up += "../";
  return up + "blobs/" + blob;
}

Status MakeLinksRelative(Transport* t, const HubLocation& loc,
                         const std::vector<std::string>& paths) {
  Result<HubProbe> p = ProbeHub(t, loc);
  if (!p.ok()) return p.status();
  // relative_links.sh (beside this file) with a PATH REL pair a link.
  std::string pairs = "set --";
  int n = 0;
  for (const std::string& path : paths) {
    const SnapshotEntry* e = p->Find(path);
    if (e == nullptr || e->link != LinkKind::kAbsolute || e->blob.empty()) continue;
    pairs += " " + ShellQuote(path) + " " + ShellQuote(RelativeBlobLink(path, e->blob));
    ++n;
  }
  if (n == 0) return Status::OK();
  Result<CommandResult> r = t->Run(RepoPrelude(loc) + pairs + "\n" +
                                   std::string(kRelativeLinksScript, kRelativeLinksScriptSize));
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "making links relative", *r);
  return Status::OK();
}

Status RemoveModelRevision(Transport* t, const HubLocation& loc, uint64_t* freed) {
  *freed = 0;
  // remove_revision.sh (beside this file; its header says what it keeps).
  const std::string script =
      RepoPrelude(loc) + std::string(kRemoveRevisionScript, kRemoveRevisionScriptSize);
  Result<CommandResult> r = t->Run(script);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "removing the revision", *r);
  size_t at = r->out.rfind("freed ");
  if (at != std::string::npos) *freed = LeadingDecimal(r->out.substr(at + 6));
  return Status::OK();
}

Result<std::map<std::string, uint64_t>> ListBlobs(Transport* t, const HubLocation& loc) {
  using R = Result<std::map<std::string, uint64_t>>;
  Result<CommandResult> r =
      t->Run(RepoPrelude(loc) +
             "[ -d \"$m/blobs\" ] || exit 0\n"
             "find \"$m/blobs\" -maxdepth 1 -type f ! -name '*.incomplete' -printf '%f\\t%s\\n'\n");
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) return CommandFailed(t, loc, "listing blobs", *r);
  std::map<std::string, uint64_t> blobs;
  std::istringstream in(r->out);
  std::string line;
  while (std::getline(in, line)) {
    size_t tab = line.find('\t');
    if (tab != std::string::npos) blobs[line.substr(0, tab)] = LeadingDecimal(line.substr(tab + 1));
  }
  return R(blobs);
}

}  // namespace fleet
