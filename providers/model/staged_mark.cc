#include "providers/model/staged_mark.h"

#include <set>
#include <sstream>

#include "providers/shared/hub_cache.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

std::string WriteStagedMarkScript(const HubLocation& loc) {
  // RepoPrelude falls back to the legacy folder even when there is none:
  // a first download makes the hub layout's.
  return RepoPrelude(loc) + "[ -d \"$m\" ] || m=\"$c/$d\"\n" +
         "[ -f \"$m/.fleet-staged/$r\" ] && exit 0\n"
         "mkdir -p -- \"$m/.fleet-staged\" &&\n"
         "  printf 'staged by fleet: %s@%s\\n' " +
         ShellQuote(loc.repo) + " \"$r\" > \"$m/.fleet-staged/$r\"\n";
}

std::string StagedMarkInventoryScript(
    const std::vector<std::pair<std::string, std::string>>& caches) {
  // A store on a hung network mount must not hang the plan: the shell's own
  // glob would block in the kernel for good. Each cache is first stat'ed
  // under timeout (-k: SIGKILL for a process stuck in an NFS wait), and one
  // that does not answer is named and skipped (the model's own probe makes
  // it the plan's error); the size reading runs under timeout too. The
  // stat is the installed fleet-probe's --stat-within where it knows it
  // (one process, not timeout's and stat's: issue 48); one installed
  // before it knew the flag exits 2, and timeout and stat answer then.
  std::string s =
      "sto=; sft=; command -v timeout >/dev/null 2>&1 && sto='timeout -k 5 10' && "
      "sft='timeout -k 5 120'\n"
      "sfp=\"" +
      std::string(kInstalledProbe) + "\"; [ -x \"$sfp\" ] || sfp=\n";
  for (const auto& [location, cache] : caches)
    s += "l=" + ShellQuote(location) + "; c=" + NodePathWord(cache) + "\n" +
         R"SH(sr=2; [ -z "$sfp" ] || { "$sfp" --stat-within 10 "$c" >/dev/null 2>&1; sr=$?; }
case $sr in 2 | 126 | 127) sr=0; [ -z "$sto" ] || { $sto stat -L -- "$c" >/dev/null 2>&1; sr=$?; } ;; esac
if [ "$sr" -eq 124 ] || [ "$sr" -eq 137 ]; then printf 'unanswered\t%s\t%s\n' "$l" "$c"; else
for f in "$c"/*/.fleet-staged/*; do
  [ -f "$f" ] || continue
  r=${f##*/}; x=${f%/.fleet-staged/*}
  [ -d "$x/snapshots/$r" ] || continue
  b=$($sft find -L "$x/snapshots/$r" -type f -printf '%s\n' 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
  printf 'staged\t%s\t%s\t%s\t%s\n' "$l" "${x##*/}" "$r" "$b"
done
fi
)SH";
  return s;
}

std::string RepoOfDirName(const std::string& dir) {
  const std::string prefix = "models--";
  if (dir.rfind(prefix, 0) != 0 || dir.size() == prefix.size()) return "";
  std::string repo = dir.substr(prefix.size());
  const size_t sep = repo.find("--");
  if (sep != std::string::npos) repo.replace(sep, 2, "/");
  if (repo.find("--") != std::string::npos || repo.front() == '/' || repo.back() == '/') return "";
  return repo;
}

std::vector<StagedCopy> ParseStagedMarks(const std::string& output) {
  std::vector<StagedCopy> out;
  std::set<std::string> seen;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    if (f.size() != 5 || f[0] != "staged") continue;
    StagedCopy c;
    c.location = f[1];
    c.repo = RepoOfDirName(f[2]);
    c.revision = f[3];
    if (c.location.empty() || c.repo.empty() || !IsCommitId(c.revision)) continue;
    if (f[4].empty() || f[4].size() > 19 ||
        f[4].find_first_not_of("0123456789") != std::string::npos)
      continue;
    c.bytes = std::stoull(f[4]);
    if (seen.insert(c.location + "\t" + c.repo + "\t" + c.revision).second)
      out.push_back(std::move(c));
  }
  return out;
}

}  // namespace fleet
