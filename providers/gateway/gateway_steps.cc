#include "providers/gateway/gateway_steps.h"

#include <sstream>

#include "providers/gateway/gateway_config_write_sh.h"
#include "providers/gateway/gateway_loaded_sh.h"
#include "providers/gateway/gateway_probe_sh.h"
#include "providers/gateway/gateway_wait_drained_sh.h"
#include "providers/gateway/gateway_wait_loaded_sh.h"
#include "providers/shared/node_script.h"
#include "providers/shared/serving/container_lifecycle.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

// "$HOME"/'<dir>': the config directory as the node's shell spells it.
std::string ConfigDir(const std::string& gateway) {
  return "\"$HOME\"/" + ShellQuote(GatewayConfigDir(gateway));
}

// The gateway's /health URL: gateway_loaded.sh's gw_loaded asks it for
// the header naming the config it loaded.
std::string HealthUrl(int port) { return "http://127.0.0.1:" + std::to_string(port) + "/health"; }

std::string Inspect(const GatewayWant& w, const std::string& format) {
  return ShellCommand({w.cli, "container", "inspect", "--format", format, w.container});
}

}  // namespace

// gateway_probe.sh (beside this file; its header says what it prints),
// after gateway_loaded.sh, with its values.
std::string GatewayProbeScript(const GatewayWant& w) {
  const std::string format =
      std::string("{{.State.Status}} {{index .Config.Labels \"") + kSpecLabel + "\"}}";
  return std::string(kGatewayLoadedScript, kGatewayLoadedScriptSize) +
         ScriptWithValues({{"gwp_cli", ShellQuote(w.cli)},
                           {"gwp_container", ShellQuote(w.container)},
                           {"gwp_format", ShellQuote(format)},
                           {"gwp_dir", ConfigDir(w.gateway)},
                           {"gwp_url", ShellQuote(HealthUrl(w.port))},
                           {"gwp_header", ShellQuote(kGatewayConfigHeader)}},
                          kGatewayProbeScript, kGatewayProbeScriptSize);
}

GatewayProbe ParseGatewayProbe(const std::string& output) {
  GatewayProbe p;
  p.written_routes = ParseConfigRoutes(output);
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string first, second;
    words >> first >> second;
    if (line == "cli=missing") p.cli_found = false;
    if (first.rfind("container=", 0) == 0) {
      p.exists = true;
      p.state = first.substr(10);
      p.spec = second;
    }
    if (first == "#" && second == "fleet-config") words >> p.written;
    if (first.rfind("loaded=", 0) == 0) p.loaded = first.substr(7);
  }
  return p;
}

// gateway_config_write.sh (beside this file) with its values.
std::string GatewayConfigWriteScript(const GatewayWant& want) {
  return ScriptWithValues(
      {{"gcw_dir", ConfigDir(want.gateway)}, {"gcw_config", ShellQuote(RenderHaproxyConfig(want))}},
      kGatewayConfigWriteScript, kGatewayConfigWriteScriptSize);
}

Status WriteGatewayConfig(const StepContext& ctx, const GatewayWant& want) {
  return RunOnNode(ctx, GatewayConfigWriteScript(want)).status();
}

Status RunGateway(const StepContext& ctx, const GatewayWant& w, const std::string& image_id) {
  const std::string run =
      ShellCommand({w.cli, "run", "-d", "--name", w.container, "--label",
                    std::string(kGatewayLabel) + "=" + w.gateway, "--label",
                    std::string(kSpecLabel) + "=" + w.spec, "--network", "host", "-v"}) +
      " " + ConfigDir(w.gateway) + ShellQuote(std::string(":") + kGatewayConfigMount + ":ro") +
      " " +
      ShellCommand({"--entrypoint", "haproxy", image_id, "-W", "-db", "-f",
                    std::string(kGatewayConfigMount) + "/haproxy.cfg"});
  return RunOnNode(ctx, run + " >/dev/null").status();
}

Status StartGateway(const StepContext& ctx, const GatewayWant& w) {
  return RunOnNode(ctx, ShellCommand({w.cli, "start", w.container}) + " >/dev/null").status();
}

Status ReloadGateway(const StepContext& ctx, const GatewayWant& w) {
  return RunOnNode(ctx, ShellCommand({w.cli, "kill", "-s", "USR2", w.container}) + " >/dev/null")
      .status();
}

// gateway_wait_loaded.sh (beside this file), after gateway_loaded.sh.
std::string GatewayWaitLoadedScript(const GatewayWant& w) {
  return std::string(kGatewayLoadedScript, kGatewayLoadedScriptSize) +
         ScriptWithValues({{"gwl_cli", ShellQuote(w.cli)},
                           {"gwl_container", ShellQuote(w.container)},
                           {"gwl_url", ShellQuote(HealthUrl(w.port))},
                           {"gwl_header", ShellQuote(kGatewayConfigHeader)},
                           {"gwl_config", ShellQuote(w.config)}},
                          kGatewayWaitLoadedScript, kGatewayWaitLoadedScriptSize);
}

Status WaitGatewayLoaded(const StepContext& ctx, const GatewayWant& w) {
  Result<CommandResult> r = ctx.transport->Run(GatewayWaitLoadedScript(w));
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::OK();
  Result<CommandResult> log =
      ctx.transport->Run(ShellCommand({w.cli, "logs", "--tail", "15", w.container}) + " 2>&1");
  std::string said = r->out;
  while (!said.empty() && said.back() == '\n') said.pop_back();
  return Status::Error("gateway " + w.gateway + " on " + ctx.node->name +
                       " did not answer with its new config within 30 s (" + said +
                       "); its log:\n" + (log.ok() ? log->out : log.status().message()));
}

// gateway_wait_drained.sh (beside this file; its header says how it
// counts the workers) with its values: 4 looks a second.
std::string GatewayWaitDrainedScript(const GatewayWant& w) {
  return ScriptWithValues({{"gwd_cli", ShellQuote(w.cli)},
                           {"gwd_container", ShellQuote(w.container)},
                           {"gwd_tries", std::to_string((w.drain_s + 5) * 4)}},
                          kGatewayWaitDrainedScript, kGatewayWaitDrainedScriptSize);
}

Status WaitGatewayDrained(const StepContext& ctx, const GatewayWant& w) {
  Result<CommandResult> r = ctx.transport->Run(GatewayWaitDrainedScript(w));
  if (!r.ok()) return r.status();
  if (r->exit_code == 0) return Status::OK();
  return Status::Error("gateway " + w.gateway + " on " + ctx.node->name +
                       ": the worker of its previous routes still runs after drain (" +
                       std::to_string(w.drain_s) + " s)");
}

Status RemoveGateway(const StepContext& ctx, const std::string& cli, const std::string& gateway) {
  Status s = RemoveContainer(ctx, cli, GatewayContainerName(gateway));
  if (!s.ok()) return s;
  return RunOnNode(ctx, "rm -rf " + ConfigDir(gateway)).status();
}

Result<std::string> GatewayContainerId(const StepContext& ctx, const GatewayWant& w) {
  Result<CommandResult> r = RunOnNode(ctx, Inspect(w, "{{.Id}}"));
  if (!r.ok()) return r.status();
  std::string id = r->out;
  while (!id.empty() && id.back() == '\n') id.pop_back();
  return id;
}

void to_json(nlohmann::json& j, const GatewayProbe& v) {
  j = {{"cli_found", v.cli_found}, {"exists", v.exists},   {"state", v.state},
       {"spec", v.spec},           {"written", v.written}, {"written_routes", v.written_routes},
       {"loaded", v.loaded}};
}

void from_json(const nlohmann::json& j, GatewayProbe& v) {
  v.cli_found = j.value("cli_found", true);
  v.exists = j.value("exists", false);
  v.state = j.value("state", "");
  v.spec = j.value("spec", "");
  v.written = j.value("written", "");
  v.written_routes = j.value("written_routes", std::vector<GatewayRoute>{});
  v.loaded = j.value("loaded", "");
}

}  // namespace fleet
