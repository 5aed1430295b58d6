#include "manifests/power_policy.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kDigest[] = "8d13908715809a2c974703ebdef73a03f3e854ceee241693788453a614abadc3";
constexpr char kRevision[] = "f751b8828ef23efd613b30602303a90e4e09e42d";

struct Loaded {
  bool ok = false;
  Manifest manifest;
  std::string text;  // every diagnostic, one a line
};

Loaded LoadYaml(const std::string& yaml) {
  char pattern[] = "/tmp/fleet-power-policy-XXXXXX";
  const std::string dir = mkdtemp(pattern);
  fs::copy(fs::path(FLEET_MANIFESTS_TESTDATA) / "valid" / "recipes", fs::path(dir) / "recipes",
           fs::copy_options::recursive);
  std::ofstream(dir + "/fleet.yaml") << yaml;
  Loaded l;
  Diagnostics diags;
  l.ok = LoadManifest(dir, &l.manifest, &diags);
  for (const Diagnostic& d : diags) l.text += d.ToString() + "\n";
  fs::remove_all(dir);
  return l;
}

// A lab: dgx3's power on line 6 (`power3`), deployment q on dgx3 whose
// extra keys start at line 17, gateway lab on dgx4 whose extra keys are on
// line 20.
Loaded LoadLab(const std::string& power3, const std::string& q_extra = "",
               const std::string& gw_extra = "") {
  return LoadYaml(std::string("version: 1\n"  // 1
                              "fleet: lab\n"  // 2
                              "power: {kind: home-assistant, url: http://127.0.0.1:8123, "
                              "token_env: HA_TOKEN}\n"   // 3
                              "nodes:\n"                 // 4
                              "  dgx3:\n"                // 5
                              "    address: dgx3.lan\n"  // 6... power3 is line 7
                              "    power: ") +
                  power3 +
                  "\n"
                  "  dgx4: {address: dgx4.lan, power: {switch: switch.dgx4}}\n"  // 8
                  "images:\n"                                                    // 9
                  "  b12x: {ref: \"eugr/b12x@sha256:" +
                  kDigest +
                  "\"}\n"      // 10
                  "models:\n"  // 11
                  "  qwen38: {repo: a/q, revision: " +
                  kRevision +
                  "}\n"                                                // 12
                  "deployments:\n"                                     // 13
                  "  q:\n"                                             // 14
                  "    recipe: recipes/qwen38-flash-next-int4.toml\n"  // 15
                  "    nodes: [dgx3]\n    image: b12x\n    model: qwen38\n    port: 30000\n" +
                  q_extra +  // 20
                  "gateways:\n  lab: {nodes: [dgx4], image: b12x, port: 8000" + gw_extra + "}\n");
}

TEST(PowerPolicy, OnDemandNodeWithIdleOffAndWatts) {
  const Loaded l = LoadLab("{switch: switch.dgx3, state: on_demand, idle_off: 30m, watts: 240}",
                           "    schedule: {up: \"Mon-Fri 08:00-20:00\", tz: Europe/Berlin}\n",
                           ", wake: {hold: 10m, listener: 10.0.0.1:9101}");
  ASSERT_TRUE(l.ok) << l.text;
  EXPECT_EQ(l.text, "");
  const NodePower& p = l.manifest.nodes.at("dgx3").power;
  EXPECT_EQ(p.state, "on_demand");
  EXPECT_EQ(p.idle_off_s, 1800);
  EXPECT_EQ(p.watts, 240);
  const UpSchedule& s = l.manifest.deployments.at("q").schedule;
  ASSERT_TRUE(s.present);
  EXPECT_EQ(s.tz, "Europe/Berlin");
  ASSERT_EQ(s.windows.size(), 1u);
  EXPECT_EQ(s.windows[0].days, 0x1Fu);
  EXPECT_EQ(s.windows[0].start_min, 8 * 60);
  EXPECT_EQ(s.windows[0].end_min, 20 * 60);
  const GatewayWake& w = l.manifest.gateways.at("lab").wake;
  ASSERT_TRUE(w.present);
  EXPECT_EQ(w.hold_s, 600);
  EXPECT_EQ(w.listener_host, "10.0.0.1");
  EXPECT_EQ(w.listener_port, 9101);
}

TEST(PowerPolicy, IdleOffNeedsOnDemand) {
  const Loaded l = LoadLab("{switch: switch.dgx3, state: on, idle_off: 30m}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find(":7:"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("'idle_off' in node 'dgx3' power needs state: on_demand"),
            std::string::npos)
      << l.text;
}

TEST(PowerPolicy, BadIdleOffAndStateAreErrorsWithTheirPlace) {
  Loaded l = LoadLab("{switch: switch.dgx3, state: on_demand, idle_off: 5s}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("must be a duration of 10s or more"), std::string::npos) << l.text;
  l = LoadLab("{switch: switch.dgx3, state: ondemand}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("on_demand"), std::string::npos) << l.text;
}

TEST(PowerPolicy, ScheduleNeedsOnDemandNodes) {
  const Loaded l = LoadLab("{switch: switch.dgx3}", "    schedule: {up: \"daily 08:00-20:00\"}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find(":20:5: error: deployment 'q' has a schedule, but its node 'dgx3' does "
                        "not follow demand"),
            std::string::npos)
      << l.text;
}

TEST(PowerPolicy, ScheduleErrorsPointAtTheWindow) {
  Loaded l = LoadLab("{switch: switch.dgx3, state: on_demand}",
                     "    schedule: {up: [\"Mon-Fri 08:00-20:00\", \"Sat 25:00-26:00\"]}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'25:00-26:00' is not a time range"), std::string::npos) << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}",
              "    schedule: {up: \"Mon-Fri 08:00-20:00\", tz: Europe/Nowhere}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'tz' in deployment 'q' schedule is not a time zone"), std::string::npos)
      << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}", "    schedule: {tz: UTC}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("has no 'up'"), std::string::npos) << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}", "    schedule: {up: \"Mon\", tzz: UTC}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'tzz'"), std::string::npos) << l.text;
}

TEST(PowerPolicy, ANodeTakesAScheduleOfItsOwnWhenItsPowerFollowsDemand) {
  // dgx3's schedule is on line 8, column 5.
  Loaded l = LoadLab(
      "{switch: switch.dgx3, state: on_demand}\n"
      "    schedule: {up: \"Mon-Fri 18:00-23:00\", tz: Europe/Berlin}");
  ASSERT_TRUE(l.ok) << l.text;
  const UpSchedule& s = l.manifest.nodes.at("dgx3").schedule;
  EXPECT_TRUE(s.present);
  EXPECT_EQ(s.tz, "Europe/Berlin");
  ASSERT_EQ(s.windows.size(), 1u);
  EXPECT_EQ(s.windows[0].start_min, 18 * 60);
  EXPECT_EQ(s.loc.line, 8);
  EXPECT_FALSE(l.manifest.nodes.at("dgx4").schedule.present);
  l = LoadLab("{switch: switch.dgx3}\n    schedule: {up: \"daily 08:00-20:00\"}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find(":8:5: error: node 'dgx3' has a schedule, but its power does not follow "
                        "demand"),
            std::string::npos)
      << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}\n    schedule: {up: \"Sat 25:00-26:00\"}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find(":8:"), std::string::npos) << l.text;
  EXPECT_NE(l.text.find("'25:00-26:00' is not a time range"), std::string::npos) << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}\n    schedule: {up: \"Mon\", tzz: UTC}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'tzz'"), std::string::npos) << l.text;
}

TEST(PowerPolicy, WakeNeedsAListenerAndAHoldUpToAnHour) {
  Loaded l = LoadLab("{switch: switch.dgx3, state: on_demand}", "", ", wake: {hold: 10m}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'listener'"), std::string::npos) << l.text;
  l = LoadLab("{switch: switch.dgx3, state: on_demand}", "",
              ", wake: {hold: 2h, listener: \"gw host:80\"}");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("'hold' in gateway 'lab' wake must be a duration from 1s to 1h"),
            std::string::npos)
      << l.text;
  EXPECT_NE(l.text.find("'listener' in gateway 'lab' wake must be HOST:PORT"), std::string::npos)
      << l.text;
}

TEST(PowerPolicy, AGatewayNodeCannotSleep) {
  const Loaded l = LoadYaml(
      "version: 1\nfleet: lab\n"
      "power: {kind: home-assistant, url: http://127.0.0.1:8123, token_env: HA_TOKEN}\n"
      "nodes:\n  dgx4: {address: dgx4.lan, power: {switch: switch.dgx4, state: on_demand}}\n"
      "images:\n  gw: {ref: \"h/gw@sha256:" +
      std::string(kDigest) +
      "\"}\n"
      "gateways:\n  lab: {nodes: [dgx4], image: gw, port: 8000}\n");
  EXPECT_FALSE(l.ok);
  EXPECT_NE(l.text.find("runs gateway 'lab', which wakes the other nodes"), std::string::npos)
      << l.text;
}

TEST(ScheduleWindow, ParsesDaysTimesAndNightShifts) {
  std::string why;
  auto w = ParseScheduleWindow("Fri-Mon 22:00-06:00", &why);
  ASSERT_TRUE(w) << why;
  EXPECT_EQ(w->days, (1u << 4) | (1u << 5) | (1u << 6) | 1u);
  EXPECT_EQ(w->start_min, 22 * 60);
  EXPECT_EQ(w->end_min, 6 * 60);
  EXPECT_EQ(ShowScheduleWindow(*w), "Mon,Fri-Sun 22:00-06:00");
  w = ParseScheduleWindow("Mon,Wed 00:00-24:00", &why);
  ASSERT_TRUE(w) << why;
  EXPECT_EQ(w->end_min, 24 * 60);
  EXPECT_EQ(ShowScheduleWindow(*w), "Mon,Wed 00:00-24:00");
  EXPECT_EQ(ShowScheduleWindow(*ParseScheduleWindow("daily 08:00-20:00", &why)),
            "daily 08:00-20:00");
  for (const char* bad : {"", "Mon", "Mon 8:00-20:00", "Mon 08:00-08:00", "Mon 08:00-24:01",
                          "Mo 08:00-20:00", "Mon 24:00-02:00", "Mon 08:00-20:00 extra"})
    EXPECT_FALSE(ParseScheduleWindow(bad, &why)) << bad;
}

TEST(TimeZone, KnownNamesOnly) {
  EXPECT_TRUE(KnownTimeZone("UTC"));
  EXPECT_TRUE(KnownTimeZone("Europe/Berlin"));
  EXPECT_FALSE(KnownTimeZone("Europe/Nowhere"));
  EXPECT_FALSE(KnownTimeZone("../etc/passwd"));
  EXPECT_FALSE(KnownTimeZone("/etc/passwd"));
  EXPECT_FALSE(KnownTimeZone("Europe"));  // a folder, not a zone
}

}  // namespace
}  // namespace fleet
