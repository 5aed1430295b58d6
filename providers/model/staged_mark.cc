#include "providers/model/staged_mark.h"

#include <set>
#include <sstream>

#include "providers/model/staged_mark_inventory_sh.h"
#include "providers/model/staged_mark_write_sh.h"
#include "providers/shared/hub_cache.h"
#include "providers/shared/node_script.h"
#include "src/probe/probe_install.h"
#include "src/shell_quote.h"

namespace fleet {

// staged_mark_write.sh (beside this file) with its values.
std::string WriteStagedMarkScript(const HubLocation& loc) {
  return RepoPrelude(loc) + ScriptWithValues({{"smw_repo", ShellQuote(loc.repo)}},
                                             kStagedMarkWriteScript, kStagedMarkWriteScriptSize);
}

// staged_mark_inventory.sh (beside this file; its header says why each
// cache is asked under timeout) with its values.
std::string StagedMarkInventoryScript(
    const std::vector<std::pair<std::string, std::string>>& caches) {
  std::vector<std::string> args;
  for (const auto& [location, cache] : caches) {
    args.push_back(ShellQuote(location));
    args.push_back(NodePathWord(cache));
  }
  return ScriptWithValuesAndArgs({{"smi_probe", "\"" + std::string(kInstalledProbe) + "\""}}, args,
                                 kStagedMarkInventoryScript, kStagedMarkInventoryScriptSize);
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
