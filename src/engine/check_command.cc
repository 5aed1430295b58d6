// fleet check [ADDR...] [--json]
#include <iostream>

#include "src/engine/commands.h"
#include "src/engine/node_connections.h"
#include "src/engine/serve_checks.h"
#include "src/engine/serve_commands.h"

namespace fleet {

int CmdCheck(const GlobalOptions& g, const std::vector<std::string>& addresses, bool json) {
  Manifest m;
  if (!LoadManifestSaying(g, &m, "checked")) return 1;
  if (Status s = ValidateCheckAddresses(m, addresses); !s.ok()) {
    std::cerr << "fleet: " << s.message() << "\n";
    return 1;
  }
  NodeConnections connections(&m);
  const std::vector<SmokeResult> results = RunServeChecks(m, &connections, addresses, g.clock);
  // A reply cut by max_tokens is no failure (smoke_check.h): it does not
  // fail the command, the table says CUT.
  bool all = true;
  for (const SmokeResult& r : results) all = all && (r.passed() || r.result == "cut");
  if (json) {
    nlohmann::json j = {{"passed", all}, {"results", nlohmann::json::array()}};
    for (const SmokeResult& r : results) j["results"].push_back(r.ToJson());
    std::cout << j.dump(2) << "\n";
  } else if (results.empty()) {
    std::cout << "No deployment serves an API: nothing to check.\n";
  } else {
    std::cout << RenderCheckTable(results);
  }
  return all ? 0 : 1;
}

}  // namespace fleet
