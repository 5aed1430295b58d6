// fleet: keeps a fleet of GPU inference nodes in the state its manifests
// declare. Argument parsing only; the commands live in commands.cc.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "manifests/duration.h"
#include "src/engine/bench_command.h"
#include "src/engine/bench_report.h"
#include "src/engine/commands.h"
#include "src/engine/serve_commands.h"
#include "src/engine/version.h"
#include "src/probe/probe_binaries.h"

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
  plan->add_flag("--retry-gate", o->retry_gate,
                 "plan a spec a deployment's promote gate refused again (not held)");
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
  apply->add_flag("--retry-gate", o->retry_gate,
                  "gate a spec a deployment's promote gate refused once more");
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

// A subcommand and what runs it once the arguments are parsed. The options
// it fills live in the closure (shared_ptr: CLI11 keeps pointers to them).
struct Command {
  CLI::App* app;
  std::function<int(const fleet::GlobalOptions&)> run;
};
using Commands = std::vector<Command>;

void AddCoreCommands(CLI::App* app, Commands* out) {
  out->push_back({app->add_subcommand("validate", "check manifests and recipes (no network)"),
                  [](const fleet::GlobalOptions& g) { return fleet::CmdValidate(g); }});
  auto plan = std::make_shared<fleet::PlanCommandOptions>();
  out->push_back({AddPlanCommand(app, plan.get()),
                  [plan](const fleet::GlobalOptions& g) { return fleet::CmdPlan(g, *plan); }});
  auto apply = std::make_shared<fleet::ApplyCommandOptions>();
  auto no_rollback = std::make_shared<bool>(false);
  out->push_back({AddApplyCommand(app, apply.get(), no_rollback.get()),
                  [apply, no_rollback](const fleet::GlobalOptions& g) {
                    apply->rollback = !*no_rollback;
                    apply->version = std::string(FLEET_VERSION) + " (" + FLEET_COMMIT + ")";
                    return fleet::CmdApply(g, *apply);
                  }});
  auto destroy = std::make_shared<fleet::ApplyCommandOptions>();
  out->push_back({AddDestroyCommand(app, destroy.get()), [destroy](const fleet::GlobalOptions& g) {
                    return fleet::CmdApply(g, *destroy);
                  }});
}

void AddShowCommands(CLI::App* app, Commands* out) {
  struct ShowArgs {
    std::string file;
    bool json = false, markdown = false;
  };
  auto a = std::make_shared<ShowArgs>();
  auto* show = app->add_subcommand("show", "show the state, or a saved plan");
  show->add_option("file", a->file, "a plan saved by plan -out");
  show->add_flag("--json", a->json, "JSON output");
  show->add_flag("--markdown", a->markdown, "a saved plan as a pull-request summary");
  out->push_back({show, [a](const fleet::GlobalOptions& g) {
                    if (!a->markdown) return fleet::CmdShow(g, a->file, a->json);
                    if (a->file.empty()) {
                      std::fprintf(stderr, "fleet: show --markdown needs a saved plan FILE\n");
                      return 1;
                    }
                    return fleet::CmdShowMarkdown(g, a->file);
                  }});
  out->push_back({app->add_subcommand("status", "nodes, power, display RAM, GPU memory"),
                  [](const fleet::GlobalOptions& g) { return fleet::CmdStatus(g); }});
  auto probe_node = std::make_shared<std::string>();
  auto probe_json = std::make_shared<bool>(false);
  auto* probe = app->add_subcommand("probe", "print the facts plan reads from a node");
  probe->add_option("node", *probe_node)->required();
  probe->add_flag("--json", *probe_json, "JSON output");
  auto probe_gpu = std::make_shared<bool>(false);
  probe->add_flag("--gpu", *probe_gpu,
                  "create a CUDA context for the GPU figures even while a serve runs");
  out->push_back({probe, [probe_node, probe_json, probe_gpu](const fleet::GlobalOptions& g) {
                    return fleet::CmdProbe(g, *probe_node, *probe_json, *probe_gpu);
                  }});
}

void AddStateCommands(CLI::App* app, Commands* out) {
  struct StateArgs {
    std::string addr, migrate_to, lock_id;
    std::vector<std::string> adopt_addrs;
    bool adopt_all = false;
    uint64_t serial = 0;
    CLI::Option* serial_opt = nullptr;
  };
  auto a = std::make_shared<StateArgs>();
  auto* state = app->add_subcommand("state", "inspect or edit the state");
  state->require_subcommand(1);
  out->push_back({state->add_subcommand("list", "list recorded resources"),
                  [](const fleet::GlobalOptions& g) { return fleet::CmdStateList(g); }});
  auto* show = state->add_subcommand("show", "show one recorded resource");
  show->add_option("address", a->addr);
  a->serial_opt =
      show->add_option("--serial", a->serial, "the state (or ADDR) as it was at serial N");
  out->push_back({show, [a](const fleet::GlobalOptions& g) {
                    if (a->serial_opt->count())
                      return fleet::CmdStateShowSerial(g, a->serial, a->addr);
                    if (a->addr.empty()) {
                      std::fprintf(stderr, "fleet: state show needs an ADDR, or --serial N\n");
                      return 1;
                    }
                    return fleet::CmdStateShow(g, a->addr);
                  }});
  out->push_back({state->add_subcommand("history", "every kept serial of the state"),
                  [](const fleet::GlobalOptions& g) { return fleet::CmdStateHistory(g); }});
  auto* migrate = state->add_subcommand(
      "migrate", "move the state to another backend, keeping its lineage and serial");
  migrate->add_option("--to", a->migrate_to, "postgres or local")
      ->required()
      ->check(CLI::IsMember({"postgres", "local"}));
  out->push_back({migrate, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdStateMigrate(g, a->migrate_to);
                  }});
  auto* rm = state->add_subcommand("rm", "forget a resource (nothing on the node changes)");
  rm->add_option("address", a->addr)->required();
  out->push_back(
      {rm, [a](const fleet::GlobalOptions& g) { return fleet::CmdStateRm(g, a->addr); }});
  auto* adopt = state->add_subcommand(
      "adopt", "take over what runs on a node unknown to this state, if it matches the manifests");
  adopt->add_option("address", a->adopt_addrs, "what to adopt (all or nothing)");
  adopt->add_flag("--all", a->adopt_all,
                  "every declared resource without a record that matches the manifests");
  out->push_back({adopt, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdStateAdopt(g, a->adopt_addrs, a->adopt_all);
                  }});
  auto* unlock = app->add_subcommand("force-unlock", "break a stale state lock");
  unlock->add_option("lock_id", a->lock_id)->required();
  out->push_back({unlock, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdForceUnlock(g, a->lock_id);
                  }});
}

void AddServeCommands(CLI::App* app, Commands* out) {
  struct ServeArgs {
    std::string model_name, model_node, model_root, logs_addr;
    int logs_tail = 100;
    std::vector<std::string> check_addrs;
    bool check_json = false;
  };
  auto a = std::make_shared<ServeArgs>();
  auto* model = app->add_subcommand("model", "models in hub caches");
  model->require_subcommand(1);
  auto* files =
      model->add_subcommand("files", "per-file read-only bind list: host_path<TAB>container_path");
  files->add_option("name", a->model_name, "the model's name in the manifests")->required();
  files->add_option("--node", a->model_node, "the node whose cache to resolve")->required();
  files->add_option("--container-root", a->model_root,
                    "where the snapshot appears in the container (default: its own path)");
  out->push_back({files, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdModelFiles(g, a->model_name, a->model_node, a->model_root);
                  }});
  auto* logs = app->add_subcommand("logs", "the last lines a serve printed");
  logs->add_option("address", a->logs_addr, "deployment.NAME@NODE")->required();
  logs->add_option("--tail", a->logs_tail, "how many lines (default 100)")
      ->check(CLI::PositiveNumber);
  out->push_back({logs, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdLogs(g, a->logs_addr, a->logs_tail);
                  }});
  auto* check = app->add_subcommand("check", "run the serves' smoke checks now (from here)");
  check->add_option("address", a->check_addrs, "deployment.NAME[@NODE] (default: all)");
  check->add_flag("--json", a->check_json, "one JSON object");
  out->push_back({check, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdCheck(g, a->check_addrs, a->check_json);
                  }});
  auto bench_opts = std::make_shared<fleet::BenchOptions>();
  auto* bench = app->add_subcommand(
      "bench", "benchmark a serve: perf table, quality score, compared with the last good run");
  bench->add_option("address", bench_opts->address, "deployment.NAME[@NODE]");
  bench->add_option("--profile", bench_opts->profile,
                    "the sweep: quick, full or one of fleet.yaml's bench.profiles (default quick)");
  bench->add_flag("--json", bench_opts->json, "the run's record as one JSON object");
  bench->add_flag_function(
      "--no-quality", [bench_opts](int64_t) { bench_opts->quality = false; },
      "leave the quality set out");
  bench->add_flag("--mark-good", bench_opts->mark_good,
                  "mark this run the deployment's last good one (what later runs compare with)");
  bench
      ->add_option("--tolerance", bench_opts->tolerance_pct,
                   "percent a figure may be worse than the last good run's (default 10)")
      ->check(CLI::Range(0.0, 1000.0));
  bench->add_option("--compare", bench_opts->compare, "compare two runs by id: --compare A B")
      ->expected(2);
  out->push_back({bench, [bench_opts](const fleet::GlobalOptions& g) {
                    bench_opts->version = std::string(FLEET_VERSION) + " (" + FLEET_COMMIT + ")";
                    return fleet::CmdBench(g, *bench_opts);
                  }});
}

void AddWatchCommands(CLI::App* app, Commands* out) {
  struct WatchArgs {
    fleet::WatchOptions opts;
    std::string every = "2m";
    std::string events_since, reset_addr, endpoints_format, approve_commit;
    bool events_json = false, endpoints_json = false;
  };
  auto a = std::make_shared<WatchArgs>();
  auto* watch =
      app->add_subcommand("watch", "plan + smoke checks on a schedule, one JSON line a round");
  watch->add_option("--every", a->every, "time between rounds (default 2m)");
  watch->add_option("--log", a->opts.log_file, "append each round to FILE");
  watch->add_option("--on-change", a->opts.on_change,
                    "sh command run on a change (event on stdin; environment: PATH, HOME, LANG "
                    "and the --on-change-env names only)");
  watch->add_option("--on-change-env", a->opts.on_change_env,
                    "pass this environment variable to --on-change (repeatable)");
  watch->add_option("--report", a->opts.report_file, "rewrite this HTML report each round");
  watch->add_option("--rounds", a->opts.rounds, "stop after N rounds")->check(CLI::PositiveNumber);
  watch->add_flag("--heal", a->opts.heal,
                  "bring back serves that died, hang or garble, as their restart policy allows");
  watch->add_option("--heal-wait", a->opts.heal_wait,
                    "with --heal: how long a round waits for the heals it started before it "
                    "reports (default 30s; a longer heal goes on beside the next rounds)");
  watch
      ->add_option("--heal-parallelism", a->opts.heal_parallelism,
                   "with --heal: how many serves heal at once (default 4)")
      ->check(CLI::PositiveNumber);
  watch->add_option("--lock-timeout", a->opts.lock_timeout,
                    "with --heal or --sync: wait up to this long for the state lock (default: "
                    "skip the round's heals and sync while another command holds it)");
  auto* sync = watch
                   ->add_option("--sync", a->opts.sync_ref,
                                "apply new commits of the manifests repo at REMOTE/BRANCH "
                                "(default: the checkout's upstream)")
                   ->expected(0, 1);
  watch->add_option("--sync-allow-env", a->opts.sync_allow_env,
                    "with --sync: an environment variable a recipe's {from_env = ...} may "
                    "read (repeat for more; default none: a commit naming one is refused)");
  watch->add_option("--sync-allowed-signers", a->opts.sync_allowed_signers,
                    "with --sync: apply only commits with a good SSH signature by a key of "
                    "this allowed-signers file (ssh-keygen(1) format)");
  watch->add_option("--sync-gpg-key", a->opts.sync_gpg_keys,
                    "with --sync: apply only commits with a good GnuPG signature by this key "
                    "fingerprint (repeat for more; the key in this user's keyring)");
  watch->add_option("--metrics-listen", a->opts.metrics_listen,
                    "serve the last round's Prometheus metrics at http://ADDR:PORT/metrics "
                    "(:PORT or PORT: loopback only)");
  watch->add_option("--wake-listen", a->opts.wake_listen,
                    "wake sleeping models for a gateway's requests at ADDR:PORT (wake.listener)");
  watch->add_option("address", a->opts.addresses, "deployment.NAME[@NODE] (default: all)");
  out->push_back({watch, [a, sync](const fleet::GlobalOptions& g) {
                    a->opts.sync = sync->count() > 0;
                    const std::optional<int> every = fleet::ParseDurationSeconds(a->every);
                    if (!every) {
                      std::fprintf(stderr,
                                   "fleet: --every wants a duration such as 2m or 30s, got '%s'\n",
                                   a->every.c_str());
                      return 1;
                    }
                    a->opts.every_s = *every;
                    a->opts.version = std::string(FLEET_VERSION) + " (" + FLEET_COMMIT + ")";
                    return fleet::CmdWatch(g, a->opts);
                  }});
  auto* endpoints =
      app->add_subcommand("endpoints", "where clients reach the serves: base URLs and models");
  endpoints->add_flag("--json", a->endpoints_json, "as JSON");
  endpoints->add_option("--format", a->endpoints_format, "a client's config: openai or litellm")
      ->check(CLI::IsMember({"openai", "litellm"}));
  out->push_back({endpoints, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdEndpoints(g, a->endpoints_json ? "json" : a->endpoints_format);
                  }});
  auto* events = app->add_subcommand("events", "the heal events the state keeps, oldest first");
  events->add_option("--since", a->events_since, "only the last DURATION (e.g. 1h, 30m)");
  events->add_flag("--json", a->events_json, "one JSON object a line");
  out->push_back({events, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdEvents(g, a->events_since, a->events_json);
                  }});
  auto* sync_cmd = app->add_subcommand("sync", "what fleet watch --sync may apply");
  sync_cmd->require_subcommand(1);
  auto* approve = sync_cmd->add_subcommand(
      "approve", "let fleet watch --sync apply a commit that waits for a person");
  approve->add_option("commit", a->approve_commit, "the commit (as its sync event names it)")
      ->required();
  out->push_back({approve, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdSyncApprove(g, a->approve_commit);
                  }});
  auto* heal = app->add_subcommand("heal", "what fleet watch --heal keeps of a serve");
  heal->require_subcommand(1);
  auto* reset = heal->add_subcommand("reset", "forget a serve's heal tries and its quarantine");
  reset->add_option("address", a->reset_addr, "deployment.NAME@NODE")->required();
  out->push_back({reset, [a](const fleet::GlobalOptions& g) {
                    return fleet::CmdHealReset(g, a->reset_addr);
                  }});
}

// fleet report: a watch log as HTML, or (--bench) the bench history.
void AddReportCommand(CLI::App* app, Commands* out) {
  struct ReportArgs {
    std::string log, out = "report.html", deployment;
    bool bench = false;
  };
  auto a = std::make_shared<ReportArgs>();
  auto* report = app->add_subcommand("report", "a watch log as one self-contained HTML page");
  report->add_option("log", a->log, "the watch log (--log FILE)");
  report->add_option("-o,--out", a->out, "the HTML file (default report.html)");
  report->add_flag("--bench", a->bench,
                   "draw the bench history the state keeps (per deployment, per spec)");
  report->add_option("--deployment", a->deployment, "with --bench: only this deployment");
  out->push_back({report, [a](const fleet::GlobalOptions& g) {
                    if (a->bench) return fleet::CmdBenchReport(g, a->deployment);
                    if (a->log.empty()) {
                      std::cerr << "fleet: report needs a watch log (fleet report LOG), or "
                                   "--bench\n";
                      return 1;
                    }
                    return fleet::CmdReport(a->log, a->out);
                  }});
}

// fleet --version: the release, the platform, how it is linked and the
// fleet-probe builds it carries for nodes (src/probe/probe_binaries.h).
std::string VersionText() {
#if defined(__x86_64__)
  const std::string platform = "linux/amd64";
#elif defined(__aarch64__)
  const std::string platform = "linux/arm64";
#else
  const std::string platform = "linux/other";
#endif
#ifdef FLEET_STATIC_LIBS
  const std::string linked = "every library static but glibc (built with glibc " +
                             std::to_string(__GLIBC__) + "." + std::to_string(__GLIBC_MINOR__) +
                             ")";
#else
  const std::string linked = "shared libraries";
#endif
  std::string probes;
  for (const fleet::EmbeddedProbe& p : fleet::EmbeddedProbes())
    probes += (probes.empty() ? "" : ", ") + p.arch;
  return std::string("fleet ") + FLEET_VERSION + " (" + FLEET_COMMIT + ")\n" +
         "platform: " + platform + ", " + linked + "\n" + "fleet-probe: " +
         (probes.empty() ? "no builds carried: uploads the one beside fleet to nodes of this "
                           "architecture, compiles it on the others"
                         : "carries " + probes +
                               " builds, uploaded by a node's uname -m; compiled on the node "
                               "for any other");
}

}  // namespace

int main(int argc, char** argv) {
  try {
    CLI::App app{"fleet: plan/apply/destroy a fleet of GPU inference nodes", "fleet"};
    app.require_subcommand(1);
    app.set_version_flag("--version", VersionText());
    // `fleet help COMMAND [SUBCOMMAND]`: that command's --help.
    std::vector<std::string> help_path;
    auto* help = app.add_subcommand("help", "show a command's help: fleet help COMMAND");
    help->add_option("command", help_path, "the command (and subcommand)");
    fleet::GlobalOptions g;
    GlobalFlags flags;
    AddGlobalOptions(&app, &g, &flags);
    Commands commands;
    AddCoreCommands(&app, &commands);
    AddShowCommands(&app, &commands);
    AddStateCommands(&app, &commands);
    AddServeCommands(&app, &commands);
    AddWatchCommands(&app, &commands);
    AddReportCommand(&app, &commands);

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
    if (*help) {
      CLI::App* target = &app;
      for (const std::string& name : help_path) {
        try {
          target = target->get_subcommand(name);
        } catch (const CLI::OptionNotFound&) {
          std::fprintf(stderr, "fleet help: no command '%s'\n", name.c_str());
          return 1;
        }
      }
      std::fputs(target->help().c_str(), stdout);
      return 0;
    }
    for (const Command& c : commands)
      if (*c.app) return c.run(g);
    return 1;
  } catch (const std::exception& e) {
    // Never a stack trace: one line, exit 1.
    std::fprintf(stderr, "fleet: internal error: %s\n", e.what());
    return 1;
  }
}
