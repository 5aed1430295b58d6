// fleet: keeps a fleet of GPU inference nodes in the state its manifests
// declare. Argument parsing only; the commands live in commands.cc.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "src/engine/commands.h"

int main(int argc, char** argv) {
  try {
    CLI::App app{"fleet: plan/apply/destroy a fleet of GPU inference nodes"};
    app.require_subcommand(1);
    fleet::GlobalOptions g;
    bool no_color = false, verbose = false, quiet = false;
    app.add_option("-C", g.dir, "manifests repo (holds fleet.yaml)");
    app.add_flag("--no-color", no_color, "plain output");
    app.add_flag("-v,--verbose", verbose, "more output");
    app.add_flag("-q,--quiet", quiet, "less output");

    auto* validate = app.add_subcommand("validate", "check manifests and recipes (no network)");

    fleet::PlanCommandOptions plan_opts;
    auto* plan = app.add_subcommand("plan", "probe the fleet and show what apply would do");
    plan->add_option("--out", plan_opts.out_file, "save the plan to FILE (also -out FILE)");
    plan->add_flag("--json", plan_opts.json, "print the plan as JSON");
    plan->add_flag("--detailed-exitcode", plan_opts.detailed_exitcode,
                   "exit 2 when there are changes");
    plan->add_option("--target", plan_opts.targets, "limit to ADDR (and what it needs)");
    plan->add_flag("--destroy", plan_opts.destroy, "plan a destroy");
    plan->add_flag("--purge", plan_opts.purge,
                   "also remove staged images/models (all with --destroy, else those no longer "
                   "declared)");
    plan->add_option("--verify", plan_opts.verify, "models: sizes (default) or deep (hash blobs)")
        ->check(CLI::IsMember({"sizes", "deep"}));
    plan->add_option("--markdown", plan_opts.markdown_file,
                     "also write a Markdown summary (for a pull-request comment) to FILE");
    plan->add_option("--lock-timeout", plan_opts.lock_timeout,
                     "hold the state lock while planning, waiting up to this long (e.g. 5m)");

    fleet::ApplyCommandOptions apply_opts;
    auto* apply = app.add_subcommand("apply", "make the fleet match the manifests");
    apply->add_option("plan_file", apply_opts.plan_file, "a plan saved by plan -out");
    apply->add_flag("--auto-approve", apply_opts.auto_approve, "do not ask");
    apply->add_option("--parallelism", apply_opts.parallelism, "steps at once")
        ->check(CLI::Range(1, 1024));
    apply->add_option("--target", apply_opts.targets, "limit to ADDR (and what it needs)");
    bool no_rollback = false;
    apply->add_flag("--no-rollback", no_rollback, "leave a failed unit as it is");
    apply->add_flag("--purge", apply_opts.purge,
                    "also remove staged images/models the manifests no longer declare");
    apply->add_option("--verify", apply_opts.verify, "models: sizes (default) or deep (hash blobs)")
        ->check(CLI::IsMember({"sizes", "deep"}));
    apply->add_option("--lock-timeout", apply_opts.lock_timeout,
                      "wait this long for the state lock (e.g. 5m) instead of failing");

    fleet::ApplyCommandOptions destroy_opts;
    destroy_opts.destroy = true;
    auto* destroy = app.add_subcommand("destroy", "stop serves, restore display RAM, power off");
    destroy->add_flag("--auto-approve", destroy_opts.auto_approve, "do not ask");
    destroy->add_option("--parallelism", destroy_opts.parallelism, "steps at once")
        ->check(CLI::Range(1, 1024));
    destroy->add_option("--target", destroy_opts.targets, "limit to ADDR (and what needs it)");
    destroy->add_option("--lock-timeout", destroy_opts.lock_timeout,
                        "wait this long for the state lock (e.g. 5m) instead of failing");
    destroy->add_flag("--purge", destroy_opts.purge,
                      "also remove staged images and models (kept by default: they took hours)");

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

    g.color = !no_color && isatty(STDOUT_FILENO) && std::getenv("NO_COLOR") == nullptr;
    g.verbosity = quiet ? -1 : verbose ? 1 : 0;
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
    if (*logs) return fleet::CmdLogs(g, logs_addr, logs_tail);
    return 1;
  } catch (const std::exception& e) {
    // Never a stack trace: one line, exit 1.
    std::fprintf(stderr, "fleet: internal error: %s\n", e.what());
    return 1;
  }
}
