#include "providers/shared/serving/deployment_probe.h"

#include <charconv>
#include <cstdio>
#include <ctime>
#include <initializer_list>
#include <sstream>
#include <utility>

#include "providers/shared/engine_api.h"
#include "providers/shared/node_script.h"
#include "providers/shared/serving/container_probe_sh.h"
#include "providers/shared/serving/gpu_request.h"
#include "providers/shared/serving/health_check_sh.h"
#include "providers/shared/serving/port_busy_sh.h"
#include "providers/shared/serving_containers.h"
#include "src/provider.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

// One value per line, so no value can break the parse; the spec label is
// read through `index` because `.Config.Labels.fleet.spec` is not a path.
std::string InspectFormat(const std::string& cli) {
  // podman's StartedAt is a time (`.Unix` gives seconds); docker's a string.
  const std::string started =
      cli == "podman" ? "{{.State.StartedAt.Unix}}" : "{{.State.StartedAt}}";
  return std::string("state={{.State.Status}}\nexit_code={{.State.ExitCode}}\nstarted=") + started +
         "\nid={{.Id}}\nimage={{.Image}}\nspec={{index .Config.Labels \"" + kSpecLabel + "\"}}";
}

// Seconds since the epoch from "1764448201" or RFC 3339 ("2026-11-29T20:30:01.1Z").
// A decimal number of seconds; false for anything else (a node may print
// anything: std::stol threw on it and ended the plan).
bool ParseSeconds(const std::string& s, long* out) {
  const char* end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && ptr == end && !s.empty();
}

long ParseStarted(const std::string& s) {
  if (s.empty()) return -1;
  if (s.find_first_not_of("0123456789") == std::string::npos) {
    long seconds = -1;
    return ParseSeconds(s, &seconds) ? seconds : -1;
  }
  std::tm tm{};
  if (strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) == nullptr) return -1;
  return static_cast<long>(timegm(&tm));
}

}  // namespace

std::string HealthCommand(const std::string& url) {
  // Inline, not `sh -c`: it runs in the probe of every serve on every plan.
  return "hc_url=" + ShellQuote(url) + "\n" +
         std::string(kHealthCheckScript, kHealthCheckScriptSize);
}

// port_busy.sh (beside this file) with its value.
std::string PortBusyCommand(int port) {
  char hex[8];
  std::snprintf(hex, sizeof hex, "%04X", port & 0xffff);
  return ScriptWithValues({{"pb_port", hex}}, kPortBusyScript, kPortBusyScriptSize);
}

namespace {

constexpr char kInspectApiLine[] = "inspect_api=";

// sh: the container's inspect through the engine's API where it answers
// (engine_listing.h: its socket, read by the installed `fleet-probe --api`):
// one process of ~4 ms instead of a CLI start (podman ~95 ms of CPU, docker
// ~50) on every probe of a serve: every plan, apply, health wait and `fleet
// watch` round. Sets $fd_api to 1 when the API answered for the container
// (200 or 404), with the answer in $fd_out; else the CLI asks.
std::string ApiInspectScript(const ContainerSpec& spec) {
  return EngineSocketScript(spec.cli) + ProbeApiGetScript("fd_out", "fd_api",
                                                          "/containers/" + spec.container + "/json",
                                                          {"200", "404"});
}

// The body of the API's answer in a probe's output: from the inspect_api
// line to the "@api=" line.
std::string ApiBody(const std::string& output) {
  const std::string mark = std::string("\n") + kInspectApiLine;
  size_t at = output.rfind(kInspectApiLine, 0) == 0 ? 0 : output.find(mark);
  if (at == std::string::npos) return "";
  at = output.find('=', at) + 1;
  const size_t end = output.find("\n@api=", at);
  return output.substr(at, end == std::string::npos ? end : end - at);
}

// The inspect's fields from the engine API's answer to GET
// /containers/NAME/json, as the CLI `cli` prints them (InspectFormat):
// podman's image ID without "sha256:"; the start time as the API gives it
// (RFC 3339) in *started. False when the answer is not a container's.
bool InspectFromJson(const std::string& body, const std::string& cli, ContainerProbe* p,
                     std::string* started) {
  // Whatever a node answers, a field of another type reads as absent.
  auto field = [](const nlohmann::json& o, const char* key) {
    const auto it = o.is_object() ? o.find(key) : o.end();
    return it == o.end() ? nlohmann::json() : *it;
  };
  auto text = [&](const nlohmann::json& o, const char* key) {
    const nlohmann::json v = field(o, key);
    return v.is_string() ? v.get<std::string>() : std::string();
  };
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  const nlohmann::json state = field(j, "State");
  p->state = text(state, "Status");
  if (p->state.empty()) return false;
  p->exists = true;
  const nlohmann::json exit_code = field(state, "ExitCode");
  p->exit_code = exit_code.is_number_integer() ? exit_code.get<int>() : 0;
  p->id = text(j, "Id");
  p->image = text(j, "Image");
  if (cli == "podman" && p->image.rfind("sha256:", 0) == 0) p->image.erase(0, 7);
  p->spec = text(field(field(j, "Config"), "Labels"), kSpecLabel);
  *started = text(state, "StartedAt");
  return true;
}

// container_probe.sh with its values: `health`, `busy` and `serving` are
// the sh it runs (its header says when), "" for none.
std::string ContainerScript(const ContainerSpec& spec, const std::string& health,
                            const std::string& busy, const std::string& serving) {
  // Inline, not `sh -c`: the probe of every serve runs on every plan, and
  // a process more costs each node a few ms. One quoted assignment a value.
  std::string s;
  for (const auto& [name, value] : std::initializer_list<std::pair<const char*, std::string>>{
           {"cpr_cli", spec.cli},
           {"cpr_name", spec.container},
           {"cpr_format", InspectFormat(spec.cli)},
           {"cpr_api", ApiInspectScript(spec)},
           {"cpr_health", health},
           {"cpr_busy", busy},
           {"cpr_serving", serving}})
    s += std::string(name) + "=" + ShellQuote(value) + "\n";
  return s + std::string(kContainerProbeScript, kContainerProbeScriptSize);
}

}  // namespace

std::string ContainerProbeScript(const ContainerSpec& spec) {
  // A worker (no health URL) neither answers HTTP nor owns the port; one
  // that does not run: which serves hold its node.
  const std::string url = spec.HealthUrl();
  std::string s = ContainerScript(spec, url.empty() ? "" : HealthCommand(url),
                                  url.empty() ? "" : PortBusyCommand(spec.port),
                                  ServingContainersCommand(spec.cli));
  if (!spec.gpus.empty()) s += GpuSupportProbeScript(spec.cli);
  return s;
}

std::string ContainerPollScript(const ContainerSpec& spec, const std::string& url) {
  return ContainerScript(spec, url.empty() ? "" : HealthCommand(url), "", "");
}

ContainerProbe ParseContainerProbe(const std::string& output) {
  ContainerProbe p;
  // The health line carries two or three pairs: "health=200 health_tool=curl
  // health_rc=0".
  std::string text = output;
  size_t pos;
  while ((pos = text.find(" health_tool=")) != std::string::npos) text[pos] = '\n';
  while ((pos = text.find(" health_rc=")) != std::string::npos) text[pos] = '\n';
  const std::map<std::string, std::string> kv = ParseKeyValues(text);
  auto get = [&](const char* k) {
    auto it = kv.find(k);
    return it == kv.end() ? std::string() : it->second;
  };
  if (get("cli") == "missing") {
    p.cli_found = false;
    return p;
  }
  p.error = get("error");
  std::string started;
  if (!get("inspect_cli").empty()) {
    if (!InspectFromJson(ApiBody(output), get("inspect_cli"), &p, &started))
      p.error = "the engine's API answered the container's inspect with no container";
  } else if (!get("state").empty()) {
    p.exists = true;
    p.state = get("state");
    p.exit_code = std::atoi(get("exit_code").c_str());
    p.id = get("id");
    p.spec = get("spec") == "<no value>" ? "" : get("spec");
    p.image = get("image");
    started = get("started");
  }
  const long started_s = ParseStarted(started);
  long now = 0, age = 0;
  if (p.exists && started_s > 0 && ParseSeconds(get("now"), &now) &&
      !__builtin_sub_overflow(now, started_s, &age))
    p.age_s = age;
  const std::string health = get("health");
  if (health == "none") {
    p.health_tool = "";
    p.health = -1;
  } else if (!health.empty()) {
    p.health = std::atoi(health.c_str());
    p.health_tool = get("health_tool");
    p.health_timed_out = p.health == 0 && get("health_rc") == "28";
  }
  p.port_busy = get("port_busy") == "1";
  p.serving = ParseServingContainers(output);
  return p;
}

}  // namespace fleet
