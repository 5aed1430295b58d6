#include "providers/shared/fabric_facts.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "providers/shared/fabric_route.h"
#include "src/shell_quote.h"
#include "tests/support/run_shell.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

// What a DGX Spark prints: two HCAs with a port each; the second cable
// unplugged.
constexpr char kSpark[] =
    "hostname=dgx1\n"
    "fabric_port=rocep1s0f0|1|DOWN|enp1s0f0np0|10|-1|\n"
    "fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|10.77.0.11/24\n";

TEST(FabricFacts, ParsesPorts) {
  std::vector<FabricPort> p = ParseFabricPorts(kSpark);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].hca, "rocep1s0f0");
  EXPECT_FALSE(p[0].active());
  EXPECT_TRUE(p[0].ipv4.empty());
  EXPECT_EQ(p[1].hca, "rocep1s0f1");
  EXPECT_EQ(p[1].port, 1);
  EXPECT_TRUE(p[1].usable());
  EXPECT_EQ(p[1].netdev, "enp1s0f1np1");
  EXPECT_EQ(p[1].rate_gbps, 200);
  EXPECT_EQ(p[1].gid_index, 3);
  EXPECT_EQ(p[1].ipv4, "10.77.0.11");
  EXPECT_EQ(p[1].prefix_len, 24);
}

TEST(FabricFacts, IgnoresMalformedLines) {
  std::vector<FabricPort> p = ParseFabricPorts(
      "fabric_port=\nfabric_port=a|b\nfabric_port=x|1|ACTIVE|eth9|abc|zz|not-an-ip/24\n"
      "fabric_port=y|1|ACTIVE|eth9|100|2|10.1.2.3/99\n");
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].rate_gbps, 0);
  EXPECT_EQ(p[0].gid_index, -1);
  EXPECT_EQ(p[0].ipv4, "");
  EXPECT_FALSE(p[0].usable());
  EXPECT_EQ(p[1].prefix_len, 32);  // clamped
}

TEST(FabricFacts, JsonRoundTrip) {
  std::vector<FabricPort> p = ParseFabricPorts(kSpark);
  std::vector<FabricPort> q = FabricPortsFromJson(FabricPortsToJson(p));
  ASSERT_EQ(q.size(), 2u);
  EXPECT_EQ(q[1].ipv4, "10.77.0.11");
  EXPECT_EQ(q[1].gid_index, 3);
  EXPECT_TRUE(FabricPortsFromJson(nlohmann::json::object()).empty());
}

// Facts travel in saved plans and the state: a rate too large for an int
// (or a fraction) reads as unknown, not as whatever a cast out of range gives.
TEST(FabricFacts, JsonNumbersOutOfRangeReadAsUnknown) {
  std::vector<FabricPort> q = FabricPortsFromJson(nlohmann::json::parse(
      R"([{"hca": "rocep1s0f1", "port": 1e300, "rate_gbps": 4294967496, "gid_index": 3.5,
           "prefix_len": 24}])"));
  ASSERT_EQ(q.size(), 1u);
  EXPECT_EQ(q[0].port, 0);
  EXPECT_EQ(q[0].rate_gbps, 0);
  EXPECT_EQ(q[0].gid_index, -1);
  EXPECT_EQ(q[0].prefix_len, 24);
}

TEST(FabricFacts, ResolvesFromProbe) {
  FabricEndpoint e = ResolveFabric("", "", ParseFabricPorts(kSpark));
  EXPECT_EQ(e.source, "probe");
  EXPECT_EQ(e.address, "10.77.0.11");
  EXPECT_EQ(e.interface, "enp1s0f1np1");
  EXPECT_EQ(e.gid_index, 3);
  EXPECT_EQ(e.hcas, std::vector<std::string>{"rocep1s0f1"});
  EXPECT_EQ(e.Subnet(), "10.77.0.0/24");
}

TEST(FabricFacts, DeclaredWins) {
  FabricEndpoint e = ResolveFabric("10.77.0.11", "", ParseFabricPorts(kSpark));
  EXPECT_EQ(e.source, "manifest");
  EXPECT_EQ(e.interface, "enp1s0f1np1");
  EXPECT_EQ(e.gid_index, 3);
  EXPECT_TRUE(e.note.empty());
  // Declared without any probed port: usable, prefix unknown.
  e = ResolveFabric("10.9.0.5", "ib0", {});
  EXPECT_TRUE(e.usable());
  EXPECT_EQ(e.interface, "ib0");
  EXPECT_EQ(e.Subnet(), "");
  // Declared on an interface whose address differs: said.
  e = ResolveFabric("10.77.0.99", "enp1s0f1np1", ParseFabricPorts(kSpark));
  EXPECT_EQ(e.address, "10.77.0.99");
  EXPECT_NE(e.note.find("10.77.0.11"), std::string::npos);
}

TEST(FabricFacts, NoneWhenNoActivePortHasAnAddress) {
  FabricEndpoint e = ResolveFabric(
      "", "", ParseFabricPorts("fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|-1|\n"));
  EXPECT_FALSE(e.usable());
  EXPECT_EQ(e.source, "none");
  EXPECT_EQ(ResolveFabric("", "", {}).note, "no infiniband/RoCE ports");
}

TEST(FabricFacts, SameSubnet) {
  FabricEndpoint a = ResolveFabric("", "", ParseFabricPorts(kSpark));
  FabricEndpoint b = a;
  b.address = "10.77.0.14";
  EXPECT_TRUE(SameFabricSubnet(a, b));
  b.address = "10.78.0.14";
  EXPECT_FALSE(SameFabricSubnet(a, b));
  b.address = "";
  EXPECT_FALSE(SameFabricSubnet(a, b));
}

NodeFacts FactsOf(const std::string& ipv4) {
  NodeFacts f;
  f.reachable = true;
  if (!ipv4.empty())
    f.fabric = FabricPortsToJson(
        ParseFabricPorts("fabric_port=rocep1s0f1|1|ACTIVE|enp1s0f1np1|200|3|" + ipv4 + "\n"));
  return f;
}

// The plan's view of a route (CopyRoute): the fabric's subnet, or why not
// in words that name no single target, so that the copies from one source
// to several targets read as one line (src/engine/copy_routes.h).
TEST(FabricRoute, ThePlansViewNamesTheSubnetOrWhyNotWithoutTheTarget) {
  Manifest m;
  for (const char* n : {"s", "a", "b", "c", "d", "none"}) m.nodes[n];
  const std::map<std::string, NodeFacts> facts = {
      {"s", FactsOf("10.77.0.11/24")}, {"a", FactsOf("10.77.0.12/24")},
      {"b", FactsOf("10.77.0.13/24")}, {"c", FactsOf("10.99.0.14/24")},
      {"d", FactsOf("10.99.0.15/24")}, {"none", FactsOf("")}};
  const CopyRoute direct = PlanFabricRoute(&m, &facts, "s", "a", Settings{}).ForPlan("image i");
  EXPECT_EQ(direct, (CopyRoute{"image i", "s", "a", true, "10.77.0.0/24", "", "10.77.0.12"}));
  const FabricRoute c = PlanFabricRoute(&m, &facts, "s", "c", Settings{}),
                    d = PlanFabricRoute(&m, &facts, "s", "d", Settings{});
  EXPECT_EQ(c.Describe(),
            "s \u2192 c through the controller (s (10.77.0.11) and c (10.99.0.14) share no "
            "fabric subnet)");
  EXPECT_EQ(c.ForPlan("image i").why_not, "no common fabric subnet");
  EXPECT_EQ(c.ForPlan("image i").why_not, d.ForPlan("image i").why_not);
  EXPECT_EQ(PlanFabricRoute(&m, &facts, "s", "none", Settings{}).ForPlan("m").why_not,
            "no fabric address on the target");
  EXPECT_EQ(PlanFabricRoute(&m, &facts, "none", "s", Settings{}).ForPlan("m").why_not,
            "none has no fabric address");
  // It travels with the step's route in the plan.
  EXPECT_EQ(FabricRoute::FromJson(c.ToJson()).ForPlan("image i"), c.ForPlan("image i"));
  Settings off;
  off.fabric = "off";
  EXPECT_EQ(PlanFabricRoute(&m, &facts, "s", "a", off).ForPlan("m").why_not, "FLEET_FABRIC=off");
}

// The script against a tree shaped like the kernel's (and fleet-sim's).
TEST(FabricFacts, ScriptReadsASysfsTree) {
  namespace fs = std::filesystem;
  fs::path root = fs::temp_directory_path() / ("fabric_facts_test." + std::to_string(getpid()));
  fs::path port = root / "class/infiniband/mlx5_0/ports/1";
  fs::create_directories(port / "gid_attrs/types");
  fs::create_directories(port / "gids");
  fs::create_directories(root / "class/infiniband/mlx5_0/device/net/lo");
  auto put = [](const fs::path& p, const std::string& s) { std::ofstream(p) << s << "\n"; };
  put(port / "state", "4: ACTIVE");
  put(port / "rate", "400 Gb/sec (4X NDR)");
  put(port / "gids/0", "0000:0000:0000:0000:0000:ffff:7f00:0001");
  put(port / "gids/1", "0000:0000:0000:0000:0000:ffff:7f00:0001");
  put(port / "gid_attrs/types/0", "IB/RoCE v1");
  put(port / "gid_attrs/types/1", "RoCE v2");
  // `lo` has 127.0.0.1/8 in every network namespace.
  const std::string cmd = "sh -c " + ShellQuote(FabricFactsScript(root.string()));
  const std::string out = testing_support::RunShell(cmd).out;
  fs::remove_all(root);
  std::vector<FabricPort> p = ParseFabricPorts(out);
  ASSERT_EQ(p.size(), 1u) << out;
  EXPECT_EQ(p[0].hca, "mlx5_0");
  EXPECT_EQ(p[0].state, "ACTIVE");
  EXPECT_EQ(p[0].netdev, "lo");
  EXPECT_EQ(p[0].rate_gbps, 400);
  if (system("command -v ip >/dev/null 2>&1") == 0) {
    EXPECT_EQ(p[0].ipv4, "127.0.0.1") << out;
    EXPECT_EQ(p[0].prefix_len, 8);
    EXPECT_EQ(p[0].gid_index, 1) << out;
  }
}

// Apply's re-check of a direct route, run by /bin/sh here: loopback's
// address is on an interface and routed; an address nobody has is not.
TEST(FabricFacts, RouteRecheckScripts) {
  if (system("command -v ip >/dev/null 2>&1") != 0) GTEST_SKIP() << "no ip(8)";
  auto rc = [](const std::string& script) {
    const int st = system(("/bin/sh -c " + ShellQuote(script)).c_str());
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  };
  EXPECT_EQ(rc(HasAddressScript("127.0.0.1")), 0);
  EXPECT_EQ(rc(HasAddressScript("127.0.0.12")), 1);  // in lo's /8, but not lo's address
  EXPECT_EQ(rc(HasAddressScript("10.77.0.1; touch /tmp/x")), 1);
  EXPECT_EQ(rc(HasRouteScript("127.0.0.1")), 0);
  EXPECT_NE(rc(HasRouteScript("not-an-address")), 0);
}

// fabric_route_check.sh on its own, with a stand-in ip(8): the address on
// an interface (not one that only shares its prefix), a hostile address
// one word, the route as `ip route get` answers.
TEST(FabricFacts, RouteRecheckScriptsWithStubIp) {
  const testing_support::StubCli stub("fabric_route_check_test");
  stub.RecordingTool("ip",
                     "case $1 in\n"
                     "-4) echo '2: ib0    inet 10.77.0.12/24 brd 10.77.0.255 scope global ib0' ;;\n"
                     "route) [ \"$3\" = 10.77.0.5 ] || { echo 'unreachable' >&2; exit 2; } ;;\n"
                     "esac\n");
  EXPECT_EQ(stub.Run(HasAddressScript("10.77.0.12")).exit_code, 0);
  EXPECT_EQ(stub.Run(HasAddressScript("10.77.0.1")).exit_code, 1);
  EXPECT_EQ(stub.Run(HasAddressScript("10.77.0.1; touch x")).exit_code, 1);
  EXPECT_EQ(stub.Run(HasRouteScript("10.77.0.5")).exit_code, 0);
  EXPECT_EQ(stub.Run(HasRouteScript("10.88.0.5")).exit_code, 2);
  EXPECT_EQ(stub.Calls("ip"),
            "-4 -o addr show\n-4 -o addr show\n-4 -o addr show\n"
            "route get 10.77.0.5\nroute get 10.88.0.5\n");
  EXPECT_EQ(stub.Read("x"), "");
}

}  // namespace
}  // namespace fleet
