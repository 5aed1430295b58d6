// `fleet status`: nodes (reachable, hostname, display RAM and what its
// unlock freed, GPU memory), then serves (container state, health, where
// clients reach them, what fleet watch --heal keeps of them). Columns are
// as wide as their widest cell, so a long cell never shifts the next one.
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <iostream>

#include "providers/gateway/gateway_steps.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/serving/deployment_json.h"
#include "src/engine/commands.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "src/engine/schedule_clock.h"
#include "src/provider.h"
#include "state/state.h"

namespace fleet {
namespace {

// One row of a table and the lines printed indented under it.
struct Row {
  std::vector<std::string> cells;
  std::vector<std::string> notes;
};

void PrintTable(const std::vector<Row>& rows) {
  std::vector<size_t> width;
  for (const Row& r : rows)
    for (size_t i = 0; i < r.cells.size(); ++i) {
      if (width.size() <= i) width.push_back(0);
      width[i] = std::max(width[i], r.cells[i].size());
    }
  for (const Row& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.cells.size(); ++i)
      line += i + 1 == r.cells.size()
                  ? r.cells[i]
                  : r.cells[i] + std::string(width[i] - r.cells[i].size() + 2, ' ');
    std::cout << line << "\n";
    for (const std::string& n : r.notes) std::cout << "    " << n << "\n";
  }
}

std::string Gib(const nlohmann::json& v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v.get<double>() / (1024.0 * 1024 * 1024));
  return buf;
}

// The display RAM cell: the probed mode, and what the unlock freed as the
// probe measured it before and after.
std::string DisplayRamCell(const ProbeResult& probed, const State& state, const std::string& node) {
  std::string display = "-";
  if (auto it = probed.actual.find("display_ram." + node); it != probed.actual.end())
    display = it->second.attributes.value("mode", "-");
  const ResourceRecord* rec = state.Find("display_ram." + node);
  if (rec == nullptr) return display;
  const nlohmann::json& a = rec->attributes;
  if (a.value("gpu_free_before_bytes", nlohmann::json()).is_number() &&
      a.value("gpu_free_after_bytes", nlohmann::json()).is_number())
    return display + " (GPU free " + Gib(a["gpu_free_before_bytes"]) + " -> " +
           Gib(a["gpu_free_after_bytes"]) + " GiB)";
  if (a.value("mode", "") == "unlocked") return display + " (gain not measured)";
  return display;
}

// The node's power policy and what it is now: "on", "off", "on_demand:
// awake", "on_demand: asleep", "-" without a switch.
std::string PowerCell(const NodeSpec& spec, const NodeFacts& f) {
  if (!spec.power.present) return "-";
  if (spec.power.state != "on_demand") return spec.power.state;
  return std::string("on_demand: ") + (f.reachable ? "awake" : "asleep");
}

// Where the schedule of each deployment on `node` stands and its next
// transition: "deployment b: schedule Mon-Fri 08:00-20:00 Europe/Berlin:
// down now; up at Mon 2026-12-07 08:00 Europe/Berlin (07:00 UTC)"; the
// node's own first ("node: schedule daily 08:00-20:00 UTC: up now; ...").
void ScheduleNotes(const Manifest& m, const std::string& node, int64_t now_s, Row* row) {
  if (const UpSchedule& own = m.nodes.at(node).schedule; own.present) {
    Result<ZoneOffsets> zone = ZoneOffsets::Load(own.tz);
    row->notes.push_back("node: " + (zone.ok() ? DescribeSchedule(own, *zone, now_s)
                                               : "schedule: " + zone.status().message()));
  }
  for (const auto& [name, d] : m.deployments) {
    if (!d.schedule.present || std::count(d.nodes.begin(), d.nodes.end(), node) == 0) continue;
    Result<ZoneOffsets> zone = ZoneOffsets::Load(d.schedule.tz);
    row->notes.push_back("deployment " + name + ": " +
                         (zone.ok() ? DescribeSchedule(d.schedule, *zone, now_s)
                                    : "schedule: " + zone.status().message()));
  }
}

std::vector<Row> NodeRows(const Manifest& m, const ProbeResult& probed, const State& state,
                          int64_t now_s) {
  std::vector<Row> rows = {{{"NODE", "UP", "POWER", "HOSTNAME", "DISPLAY_RAM", "GPU"}, {}}};
  for (const auto& [name, spec] : m.nodes) {
    const NodeFacts& f = probed.facts.count(name) ? probed.facts.at(name) : NodeFacts{};
    std::string gpu = "-";
    GpuFacts gf;
    if (f.reachable && GpuFactsFromJson(f.gpu, &gf)) gpu = DescribeGpuMemory(gf);
    Row r{{name, f.reachable ? "yes" : "no", PowerCell(spec, f), f.reachable ? f.hostname : "-",
           DisplayRamCell(probed, state, name), gpu},
          {}};
    if (!f.reachable && spec.power.present && spec.power.state == "off")
      r.notes.push_back("powered off, as declared");
    else if (!f.reachable && spec.power.present && spec.power.state == "on_demand")
      r.notes.push_back(
          "asleep: a request through a gateway with wake powers it on" +
          std::string(spec.power.idle_off_s > 0
                          ? "; idle_off " + std::to_string(spec.power.idle_off_s / 60) + "m"
                          : ""));
    else if (!f.reachable)
      r.notes.push_back(f.unreachable_reason);
    ScheduleNotes(m, name, now_s, &r);
    rows.push_back(std::move(r));
  }
  return rows;
}

// The container's state and what its health URL answers now.
Row ServeRow(const DesiredResource& r, const ProbeResult& probed) {
  std::string state = "not probed", health = "-";
  if (auto it = probed.actual.find(r.address); it != probed.actual.end() && it->second.probed) {
    const nlohmann::json& a = it->second.attributes;
    state = a.value("exists", false) ? a.value("state", "?") : "absent";
    const int code = a.value("health", -1);
    if (code > 0)
      health = std::to_string(code) + " " + r.attributes.value("health", "");
    else if (code == 0)
      health = "no answer " + r.attributes.value("health", "");
    else if (r.attributes.value("health", "").empty() && r.attributes["rank"].is_string())
      health = "worker, rank " + r.attributes["rank"].get<std::string>() + " (the head serves)";
  }
  return {{r.address, r.attributes.value("container", ""), state, health}, {}};
}

// What fleet watch --heal keeps of a serve: a quarantine, or recent heals.
void HealNotes(const State& state, const std::string& address, Row* row) {
  const ResourceRecord* rec = state.Find(address);
  std::optional<DeploymentRecord> dr = rec ? DeploymentRecordFrom(rec->attributes) : std::nullopt;
  if (!dr || !dr->heal) return;
  if (dr->heal->quarantined)
    row->notes.push_back("quarantined (" + dr->heal->quarantine + "): `fleet apply` or " +
                         "`fleet heal reset " + address + "`");
  else if (!dr->heal->tries.empty())
    row->notes.push_back("healed " + std::to_string(dr->heal->tries.size()) +
                         " time(s) in the restart window; last: " + dr->heal->last_reason);
}

std::vector<Row> ServeRows(const Manifest& m, const std::vector<DesiredResource>& desired,
                           const ProbeResult& probed, const State& state) {
  std::vector<Row> rows = {{{"DEPLOYMENT", "CONTAINER", "STATE", "HEALTH"}, {}}};
  for (const DesiredResource& r : desired) {
    if (RoleOf(r.type) != Role::kServe) continue;
    Row row = ServeRow(r, probed);
    HealNotes(state, r.address, &row);
    // Where clients reach it, by the manifest's address for the node: the
    // one to give an agent (the log's label inversion pointed "dgx5" at dgx3).
    if (!r.attributes.value("health", "").empty())
      row.notes.push_back("clients: http://" + m.nodes.at(r.node).address + ":" +
                          std::to_string(r.attributes.value("port", 0)));
    rows.push_back(std::move(row));
  }
  return rows.size() > 1 ? rows : std::vector<Row>{};
}

// Each gateway: its container, whether it runs the routes declared, where
// clients reach it, and its routes.
std::vector<Row> GatewayRows(const Manifest& m, const std::vector<DesiredResource>& desired,
                             const ProbeResult& probed) {
  std::vector<Row> rows = {{{"GATEWAY", "CONTAINER", "STATE", "ROUTES"}, {}}};
  for (const DesiredResource& r : desired) {
    if (RoleOf(r.type) != Role::kGateway) continue;
    const GatewayWant w = r.attributes.get<GatewayWant>();
    std::string state = "not probed", routes = "-";
    if (auto it = probed.actual.find(r.address); it != probed.actual.end() && it->second.probed) {
      const GatewayProbe p = it->second.attributes.get<GatewayProbe>();
      state = p.exists ? p.state : "absent";
      routes = p.loaded == w.config ? "as declared"
               : p.loaded.empty()   ? "not answering"
                                    : "others loaded (fleet plan)";
    }
    Row row{{r.address, w.container, state, routes}, {}};
    row.notes.push_back("clients: http://" + m.nodes.at(r.node).address + ":" +
                        std::to_string(w.port) + "/v1");
    for (const GatewayRoute& route : w.routes) row.notes.push_back("route " + route.Text());
    rows.push_back(std::move(row));
  }
  return rows.size() > 1 ? rows : std::vector<Row>{};
}

}  // namespace

int CmdStatus(const GlobalOptions& g) {
  SetUpLogging(g);
  Manifest m;
  if (!LoadManifestSaying(g, &m)) return 1;
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<State> state = store->Load();
  if (!state.ok()) {
    std::cerr << "fleet: " << state.status().message() << "\n";
    return 1;
  }
  if (!state->synced_commit.empty())
    std::cout << "manifests commit applied by fleet watch --sync: " << state->synced_commit
              << "\n\n";
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  NodeConnections connections(&m);
  Planner planner(&m, &providers, &connections);
  std::vector<DesiredResource> desired = planner.Desired();
  ProbeResult probed = planner.Probe(desired, 64);
  PrintTable(NodeRows(m, probed, *state, g.clock->UnixSeconds()));
  std::vector<Row> serves = ServeRows(m, desired, probed, *state);
  if (!serves.empty()) {
    std::cout << "\n";
    PrintTable(serves);
  }
  std::vector<Row> gateways = GatewayRows(m, desired, probed);
  if (!gateways.empty()) {
    std::cout << "\n";
    PrintTable(gateways);
  }
  return 0;
}

}  // namespace fleet
