// fleet: keeps a fleet of GPU inference nodes in the state its manifests
// declare. Argument parsing only; the commands live in commands.cc.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "manifests/duration.h"
#include "src/engine/commands.h"
#include "src/engine/serve_commands.h"

namespace {

// The options every command takes.
struct GlobalFlags {
  bool no_color = false, verbose = false, quiet = false;
  void ApplyTo(fleet::GlobalOptions* g) const {
    g->color = !no_color && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    g->verbosity = quiet ? -1 : verbose ? 1 : 0;
  }
};

void AddGlobalOptions(CLI::App* app, fleet::GlobalOptions* g, GlobalFlags* flags) {
  app->add_option("-C", g->dir, "manifests repo (holds fleet.yaml)");
  app->add_flag("--no-color", flags->no_color, "plain output");
  app->add_flag("-v,--verbose", flags->verbose, "more output");
  app->add_flag("-q,--quiet", flags->quiet, "less output");
}

// The subcommands whose options fill a command's options struct.
CLI::App* AddPlanCommand(CLI::App* app, fleet::PlanCommandOptions* o) {
  auto* plan = app->add_subcommand("plan", "probe the fleet and show what apply would do");
  plan->add_option("--out", o->out_file, "save the plan to FILE (also -out FILE)");
  plan->add_flag("--json", o->json, "print the plan as JSON");
  plan->add_flag("--detailed-exitcode", o->detailed_exitcode, "exit 2 when there are changes");
  plan->add_option("--target", o->targets, "limit to ADDR (and what it needs)");
  plan->add_flag("--destroy", o->destroy, "plan a destroy");
  plan->add_flag("--purge", o->purge,
                 "also remove staged images/models (all with --destroy, else those no longer "
                 "declared)");
  plan->add_option("--verify", o->verify, "models: sizes (default) or deep (hash blobs)")
      ->check(CLI::IsMember({"sizes", "deep"}));
  plan->add_option("--markdown", o->markdown_file,
                   "also write a Markdown summary (for a pull-request comment) to FILE");
  plan->add_option("--lock-timeout", o->lock_timeout,
                   "hold the state lock while planning, waiting up to this long (e.g. 5m)");
  return plan;
}

CLI::App* AddApplyCommand(CLI::App* app, fleet::ApplyCommandOptions* o, bool* no_rollback) {
  auto* apply = app->add_subcommand("apply", "make the fleet match the manifests");
  apply->add_option("plan_file", o->plan_file, "a plan saved by plan -out");
  apply->add_flag("--auto-approve", o->auto_approve, "do not ask");
  apply->add_option("--parallelism", o->parallelism, "steps at once")->check(CLI::Range(1, 1024));
  apply->add_option("--target", o->targets, "limit to ADDR (and what it needs)");
  apply->add_flag("--no-rollback", *no_rollback, "leave a failed unit as it is");
  apply->add_flag("--purge", o->purge,
                  "also remove staged images/models the manifests no longer declare");
  apply->add_option("--verify", o->verify, "models: sizes (default) or deep (hash blobs)")
      ->check(CLI::IsMember({"sizes", "deep"}));
  apply->add_option("--lock-timeout", o->lock_timeout,
                    "wait this long for the state lock (e.g. 5m) instead of failing");
  return apply;
}

CLI::App* AddDestroyCommand(CLI::App* app, fleet::ApplyCommandOptions* o) {
  o->destroy = true;
  auto* destroy = app->add_subcommand("destroy", "stop serves, restore display RAM, power off");
  destroy->add_flag("--auto-approve", o->auto_approve, "do not ask");
  destroy->add_option("--parallelism", o->parallelism, "steps at once")->check(CLI::Range(1, 1024));
  destroy->add_option("--target", o->targets, "limit to ADDR (and what needs it)");
  destroy->add_option("--lock-timeout", o->lock_timeout,
                      "wait this long for the state lock (e.g. 5m) instead of failing");
  destroy->add_flag("--purge", o->purge,
                    "also remove staged images and models (kept by default: they took hours)");
  return destroy;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"fleet: plan/apply/destroy a fleet of GPU inference nodes"};
    app.require_subcommand(1);
    fleet::GlobalOptions g;
    GlobalFlags flags;
    AddGlobalOptions(&app, &g, &flags);

    auto* validate = app.add_subcommand("validate", "check manifests and recipes (no network)");

    fleet::PlanCommandOptions plan_opts;
    CLI::App* plan = AddPlanCommand(&app, &plan_opts);

    fleet::ApplyCommandOptions apply_opts;
    bool no_rollback = false;
    CLI::App* apply = AddApplyCommand(&app, &apply_opts, &no_rollback);

    fleet::ApplyCommandOptions destroy_opts;
    CLI::App* destroy = AddDestroyCommand(&app, &destroy_opts);

    std::string show_file;
    bool show_json = false;
    auto* show = app.add_subcommand("show", "show the state, or a saved plan");
    show->add_option("file", show_file, "a plan saved by plan -out");
    show->add_flag("--json", show_json, "JSON output");
    bool show_markdown = false;
    show->add_flag("--markdown", show_markdown, "a saved plan as a pull-request summary");

    auto* status = app.add_subcommand("status", "nodes, power, display RAM, GPU memory");

    auto* state = app.add_subcommand("state", "inspect or edit the state");
    state->require_subcommand(1);
    auto* state_list = state->add_subcommand("list", "list recorded resources");
    std::string state_addr;
    auto* state_show = state->add_subcommand("show", "show one recorded resource");
    state_show->add_option("address", state_addr);
    uint64_t state_serial = 0;
    auto* serial_opt = state_show->add_option("--serial", state_serial,
                                              "the state (or ADDR) as it was at serial N");
    auto* state_history = state->add_subcommand("history", "every kept serial of the state");
    std::string migrate_to;
    auto* state_migrate = state->add_subcommand(
        "migrate", "move the state to another backend, keeping its lineage and serial");
    state_migrate->add_option("--to", migrate_to, "postgres or local")
        ->required()
        ->check(CLI::IsMember({"postgres", "local"}));
    auto* state_rm = state->add_subcommand("rm", "forget a resource (nothing on the node changes)");
    state_rm->add_option("address", state_addr)->required();

    std::string lock_id;
    auto* unlock = app.add_subcommand("force-unlock", "break a stale state lock");
    unlock->add_option("lock_id", lock_id)->required();

    std::string probe_node;
    bool probe_json = false;
    auto* probe = app.add_subcommand("probe", "print the facts plan reads from a node");
    probe->add_option("node", probe_node)->required();
    probe->add_flag("--json", probe_json, "JSON output");

    auto* model = app.add_subcommand("model", "models in hub caches");
    model->require_subcommand(1);
    std::string model_name, model_node, model_root;
    auto* model_files = model->add_subcommand(
        "files", "per-file read-only bind list: host_path<TAB>container_path");
    model_files->add_option("name", model_name, "the model's name in the manifests")->required();
    model_files->add_option("--node", model_node, "the node whose cache to resolve")->required();
    model_files->add_option("--container-root", model_root,
                            "where the snapshot appears in the container (default: its own path)");

    std::string logs_addr;
    int logs_tail = 100;
    auto* logs = app.add_subcommand("logs", "the last lines a serve printed");
    logs->add_option("address", logs_addr, "deployment.NAME@NODE")->required();
    logs->add_option("--tail", logs_tail, "how many lines (default 100)")
        ->check(CLI::PositiveNumber);

    std::vector<std::string> check_addrs;
    bool check_json = false;
    auto* check = app.add_subcommand("check", "run the serves' smoke checks now (from here)");
    check->add_option("address", check_addrs, "deployment.NAME[@NODE] (default: all)");
    check->add_flag("--json", check_json, "one JSON object");

    fleet::WatchOptions watch_opts;
    std::string watch_every = "2m";
    auto* watch =
        app.add_subcommand("watch", "plan + smoke checks on a schedule, one JSON line a round");
    watch->add_option("--every", watch_every, "time between rounds (default 2m)");
    watch->add_option("--log", watch_opts.log_file, "append each round to FILE");
    watch->add_option("--on-change", watch_opts.on_change,
                      "sh command run on a change (event on stdin)");
    watch->add_option("--report", watch_opts.report_file, "rewrite this HTML report each round");
    watch->add_option("--rounds", watch_opts.rounds, "stop after N rounds")
        ->check(CLI::PositiveNumber);
    watch->add_option("address", watch_opts.addresses, "deployment.NAME[@NODE] (default: all)");

    std::string report_log, report_out = "report.html";
    auto* report = app.add_subcommand("report", "a watch log as one self-contained HTML page");
    report->add_option("log", report_log, "the watch log (--log FILE)")->required();
    report->add_option("-o,--out", report_out, "the HTML file (default report.html)");

    // Terraform spells it `-out FILE` / `-out=FILE`; CLI11 wants two dashes.
    std::vector<std::string> args;
    for (int i = argc - 1; i >= 1; --i) {
      std::string a = argv[i];
      if (a == "-out" || a.rfind("-out=", 0) == 0) a = "-" + a;
      args.push_back(a);
    }
    try {
      app.parse(std::move(args));  // CLI11 takes the arguments reversed
    } catch (const CLI::ParseError& e) {
      return app.exit(e);
    }

    flags.ApplyTo(&g);
    apply_opts.rollback = !no_rollback;

    if (*validate) return fleet::CmdValidate(g);
    if (*plan) return fleet::CmdPlan(g, plan_opts);
    if (*apply) return fleet::CmdApply(g, apply_opts);
    if (*destroy) return fleet::CmdApply(g, destroy_opts);
    if (*show && show_markdown) {
      if (show_file.empty()) {
        std::fprintf(stderr, "fleet: show --markdown needs a saved plan FILE\n");
        return 1;
      }
      return fleet::CmdShowMarkdown(g, show_file);
    }
    if (*show) return fleet::CmdShow(g, show_file, show_json);
    if (*status) return fleet::CmdStatus(g);
    if (*state_list) return fleet::CmdStateList(g);
    if (*state_show && serial_opt->count())
      return fleet::CmdStateShowSerial(g, state_serial, state_addr);
    if (*state_show && state_addr.empty()) {
      std::fprintf(stderr, "fleet: state show needs an ADDR, or --serial N\n");
      return 1;
    }
    if (*state_show) return fleet::CmdStateShow(g, state_addr);
    if (*state_history) return fleet::CmdStateHistory(g);
    if (*state_migrate) return fleet::CmdStateMigrate(g, migrate_to);
    if (*state_rm) return fleet::CmdStateRm(g, state_addr);
    if (*unlock) return fleet::CmdForceUnlock(g, lock_id);
    if (*probe) return fleet::CmdProbe(g, probe_node, probe_json);
    if (*model_files) return fleet::CmdModelFiles(g, model_name, model_node, model_root);
    if (*check) return fleet::CmdCheck(g, check_addrs, check_json);
    if (*watch) {
      const std::optional<int> every = fleet::ParseDurationSeconds(watch_every);
      if (!every) {
        std::fprintf(stderr, "fleet: --every wants a duration such as 2m or 30s, got '%s'\n",
                     watch_every.c_str());
        return 1;
      }
      watch_opts.every_s = *every;
      return fleet::CmdWatch(g, watch_opts);
    }
    if (*report) return fleet::CmdReport(report_log, report_out);
    if (*logs) return fleet::CmdLogs(g, logs_addr, logs_tail);
    return 1;
  } catch (const std::exception& e) {
    // Never a stack trace: one line, exit 1.
    std::fprintf(stderr, "fleet: internal error: %s\n", e.what());
    return 1;
  }
}
