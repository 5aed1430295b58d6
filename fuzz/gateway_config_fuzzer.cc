// Served names into a gateway's HAProxy config (issue 44): the bytes are up
// to four model names, one a line, routed to four serves; RenderHaproxyConfig
// must not throw (a name that is not UTF-8 made nlohmann's dump() throw),
// must write exactly the routes whose names pass the served name check (the
// writer's own defence, read back with ParseConfigRoutes), and a refused
// name must leave no trace (the config is the one for the safe routes). gateway_name_property_test
// runs such configs through `haproxy -c`; this target looks for what the writer lets through.
#include <algorithm>
#include <sstream>

#include "fuzz/fuzz_support.h"
#include "manifests/served_name.h"
#include "providers/gateway/gateway_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fleet;
  std::istringstream in{std::string(fuzz::AsText(data, size))};
  GatewayWant w;
  w.gateway = "lab";
  w.port = 8000;
  std::vector<GatewayRoute> safe;
  std::string name;
  for (int i = 0; i < 4 && std::getline(in, name); ++i) {
    GatewayRoute r{
        name, "d" + std::to_string(i), "n" + std::to_string(i), "10.0.0.1", 30000 + i, "/health"};
    if (IsSafeServedName(name)) safe.push_back(r);
    w.routes.push_back(std::move(r));
  }
  std::sort(w.routes.begin(), w.routes.end());
  std::sort(safe.begin(), safe.end());
  SealGatewayWant(&w);
  const std::string config = RenderHaproxyConfig(w);
  FUZZ_CHECK(ParseConfigRoutes(config) == safe);
  // A refused name leaves no trace: the config is the one written for the
  // safe routes alone (with the same config hash).
  GatewayWant only_safe = w;
  only_safe.routes = safe;
  FUZZ_CHECK(RenderHaproxyConfig(only_safe) == config);
  // Every line is a comment, blank, a section, or indented: a name never
  // starts a line of its own.
  std::istringstream lines(config);
  std::string line;
  while (std::getline(lines, line))
    FUZZ_CHECK(line.empty() || line[0] == '#' || line[0] == ' ' || line == "global" ||
               line == "defaults" || line.rfind("frontend gateway_lab", 0) == 0 ||
               line.rfind("backend model_", 0) == 0);
  return 0;
}
