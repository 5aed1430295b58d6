#include "providers/gateway/gateway_steps.h"

#include <sstream>

#include "providers/shared/serving/container_lifecycle.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

// "$HOME"/'<dir>': the config directory as the node's shell spells it.
std::string ConfigDir(const std::string& gateway) {
  return "\"$HOME\"/" + ShellQuote(GatewayConfigDir(gateway));
}

// Prints the x-fleet-config header of the gateway's /health, or nothing:
// /health, which a gateway with keys answers without one (fleet's probe
// holds no key, and a key on a node's command line would be in its ps).
std::string LoadedCommand(int port) {
  const std::string url = ShellQuote("http://127.0.0.1:" + std::to_string(port) + "/health");
  const std::string pick = std::string(" 2>&1 | tr -d '\\r' | awk 'tolower($1)==\"") +
                           kGatewayConfigHeader + ":\" {print $2; exit}'";
  return "{ if command -v curl >/dev/null 2>&1; then curl -s -g --noproxy '*' --max-time 3 -D - "
         "-o /dev/null " +
         url + pick + "; else wget -S -q -t 1 -T 3 -O /dev/null " + url + pick + "; fi; }";
}

std::string Inspect(const GatewayWant& w, const std::string& format) {
  return ShellCommand({w.cli, "container", "inspect", "--format", format, w.container});
}

}  // namespace

std::string GatewayProbeScript(const GatewayWant& w) {
  return "if ! command -v " + ShellQuote(w.cli) +
         " >/dev/null 2>&1; then echo cli=missing; "
         "elif c=$(" +
         Inspect(w,
                 std::string("{{.State.Status}} {{index .Config.Labels \"") + kSpecLabel + "\"}}") +
         " 2>/dev/null); then echo \"container=$c\"; fi\n"
         "grep '^# fleet-' " +
         ConfigDir(w.gateway) + "/haproxy.cfg 2>/dev/null\n" + "echo \"loaded=$(" +
         LoadedCommand(w.port) + ")\"\n";
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

Status WriteGatewayConfig(const StepContext& ctx, const GatewayWant& want) {
  const std::string dir = ConfigDir(want.gateway);
  return RunOnNode(ctx, "umask 022 && mkdir -p " + dir + " && printf '%s' " +
                            ShellQuote(RenderHaproxyConfig(want)) + " >" + dir +
                            "/.haproxy.cfg.new && mv -f " + dir + "/.haproxy.cfg.new " + dir +
                            "/haproxy.cfg")
      .status();
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

Status WaitGatewayLoaded(const StepContext& ctx, const GatewayWant& w) {
  Result<CommandResult> r = ctx.transport->Run(
      "i=0; while :; do h=$(" + LoadedCommand(w.port) + "); [ \"$h\" = " + ShellQuote(w.config) +
      " ] && exit 0; i=$((i+1)); if [ $i -ge 150 ]; then echo \"${h:-nothing}\"; exit 3; fi; "
      "s=$(" +
      Inspect(w, "{{.State.Status}}") +
      " 2>/dev/null); [ \"$s\" = running ] || { echo \"the container is ${s:-gone}\"; exit 3; }; "
      "sleep 0.2; done");
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

Status WaitGatewayDrained(const StepContext& ctx, const GatewayWant& w) {
  // HAProxy's master (the container's first process) has one worker per
  // config still running: the current one, and an old one while it finishes
  // the requests it carries. Read from /proc, as the engines' `top` differ.
  const int tries = (w.drain_s + 5) * 4;
  Result<CommandResult> r = ctx.transport->Run(
      "pid=$(" + Inspect(w, "{{.State.Pid}}") +
      " 2>/dev/null); [ -n \"$pid\" ] && [ -d \"/proc/$pid\" ] || exit 0; i=0; while :; do "
      "n=$(grep -ls \"^PPid:[[:space:]]*$pid\\$\" /proc/[0-9]*/status 2>/dev/null | wc -l); "
      "[ \"$n\" -le 1 ] && exit 0; i=$((i+1)); [ $i -ge " +
      std::to_string(tries) + " ] && { echo \"$n\"; exit 3; }; sleep 0.25; done");
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
