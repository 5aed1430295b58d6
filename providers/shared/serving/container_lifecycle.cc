#include "providers/shared/serving/container_lifecycle.h"

#include <cstdlib>
#include <map>
#include <vector>

#include "providers/shared/bind_list.h"
#include "providers/shared/find_image.h"
#include "providers/shared/gpu_facts.h"
#include "providers/shared/hub_cache.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "providers/shared/model_location.h"
#include "providers/shared/node_script.h"
#include "providers/shared/run_args.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/remove_container_sh.h"
#include "providers/shared/serving/serve_health.h"
#include "providers/shared/serving/swap_container_sh.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

std::string Home(const StepContext& ctx) {
  Result<CommandResult> r = ctx.transport->Run("printf '%s' \"$HOME\"");
  return r.ok() && r->exit_code == 0 ? r->out : "";
}

std::string ExpandHome(const std::string& path, const std::string& home) {
  if (path == "~") return home;
  if (path.rfind("~/", 0) == 0) return home + path.substr(1);
  return path;
}

// Nothing else may listen on the port: a server there would answer the
// health check in the serve's place.
Status CheckPortFree(const StepContext& ctx, const ContainerSpec& spec) {
  if (spec.HealthUrl().empty()) return Status::OK();  // a worker does not own the port
  Result<CommandResult> r = ctx.transport->Run(PortBusyCommand(spec.port));
  if (!r.ok()) return r.status();
  if (r->out.find("port_busy=1") != std::string::npos)
    return Status::Error("port " + std::to_string(spec.port) +
                         " is in use by another process on the node; not starting " +
                         spec.container);
  return Status::OK();
}

// `run` options: name, labels, the model's per-file binds, the recipe's
// options with {model_path} and ~ spelled as the node spells them.
Result<std::vector<std::string>> RunOptions(const StepContext& ctx, const ContainerSpec& spec,
                                            const std::string& home) {
  using R = Result<std::vector<std::string>>;
  std::vector<std::string> options = {"--detach",
                                      "--name",
                                      spec.container,
                                      "--label",
                                      std::string(kDeploymentLabel) + "=" + spec.deployment,
                                      "--label",
                                      std::string(kSpecLabel) + "=" + spec.hash};
  if (spec.model.empty()) {
    for (const std::string& o : spec.options) options.push_back(ExpandHome(o, home));
    return options;
  }
  Result<HubLocation> loc = ModelLocationOnNode(*ctx.manifest, spec.model, spec.node);
  if (!loc.ok()) return loc.status();
  Result<std::vector<BindMount>> binds =
      ModelBindList(ctx.transport, loc->cache, loc->repo, loc->revision, spec.model_root);
  if (!binds.ok()) return R::Error("model " + spec.model + ": " + binds.status().message());
  for (const BindMount& b : *binds) {
    options.push_back("--volume");
    options.push_back(b.host + ":" + b.container + ":ro");
  }
  const std::string snapshot = ExpandHome(loc->cache, home) + "/" + HubRepoDirName(loc->repo) +
                               "/snapshots/" + loc->revision;
  for (const std::string& o : spec.options)
    options.push_back(ExpandHome(FillPlaceholders(o, {{"model_path", snapshot}}), home));
  return options;
}

// The env a container gets through a file (0600), so that no value is on a
// command line, in an error or left on the node's disk. Empty path: no env.
struct EnvFile {
  std::string path;
  std::string text;
};

Result<EnvFile> PrepareEnvFile(const ContainerSpec& spec, const std::string& home) {
  using R = Result<EnvFile>;
  EnvFile f;
  if (spec.env.empty() && spec.env_from.empty()) return f;
  std::map<std::string, std::string> values = spec.env;
  for (const auto& [k, var] : spec.env_from) {
    const char* v = std::getenv(var.c_str());
    if (v == nullptr)
      return R::Error("env " + k + " comes from $" + var +
                      " on the controller (from_env), which is not set");
    values.insert_or_assign(k, v);
  }
  for (const auto& [k, v] : values) {
    if (v.find('\n') != std::string::npos)
      return R::Error("deployment " + spec.deployment + ": env " + k + " holds a newline");
    f.text += k + "=" + v + "\n";
  }
  f.path = home + "/.fleet/deployments/" + spec.container + ".env";
  return f;
}

std::string PreviousName(const ContainerSpec& spec) { return spec.container + "-previous"; }

// A replaced container is kept, stopped, until the new one is healthy; one
// left by an apply that died half way is removed.
Status SetAsidePrevious(const StepContext& ctx, const ContainerSpec& spec,
                        const ExistingContainer& existing) {
  Status s = RemoveContainer(ctx, spec.cli, PreviousName(spec));
  if (!s.ok() || !existing.exists) return s;
  if (ctx.progress)
    ctx.progress("stopping " + spec.container + " (spec " + existing.spec.substr(0, 12) + ")");
  return RunOnNode(ctx, SwapContainerScript(spec.cli, SwapWay::kAside, spec.container,
                                            PreviousName(spec)))
      .status();
}

// Puts the container set aside back and starts it; what happened, as the
// tail of an error message.
std::string PutBackPrevious(const StepContext& ctx, const ContainerSpec& spec) {
  Status s = RunOnNode(ctx, SwapContainerScript(spec.cli, SwapWay::kBack, PreviousName(spec),
                                                spec.container))
                 .status();
  return s.ok() ? "; the container it replaced is back and started (its health is not "
                  "waited for)"
                : "; putting back the container it replaced failed: " + s.message();
}

}  // namespace

// The only place that reads the engine's words on a refused `run`. podman
// exits 125 for every refusal, so its message is all there is to tell "the
// name is taken" from the rest.
Status RunRefusal(const ContainerSpec& spec, const CommandResult& run) {
  const std::string message = "`" + spec.cli + " run` of " + spec.container + " failed: " + run.err;
  if (run.err.find("is already in use") != std::string::npos) return Status::AlreadyExists(message);
  return Status::Error(message);
}

namespace {

// `run --pull=never` of the image by ID. A node that lost power while
// podman created a container can keep the name in podman's storage with no
// container podman lists (`run` then says the name "is already in use", and
// no plan sees it): that storage-only container is removed (`rm --storage`
// refuses any container podman knows) and the run tried once more.
Status RunContainer(const StepContext& ctx, const ContainerSpec& spec,
                    const std::vector<std::string>& options, const std::string& image_id) {
  const std::string run_command =
      ShellCommand(RunArgsNoPull(spec.cli, options, image_id, spec.command));
  Result<CommandResult> run = ctx.transport->Run(run_command);
  if (run.ok() && run->exit_code != 0 && spec.cli == "podman" &&
      RunRefusal(spec, *run).already_exists()) {
    Result<CommandResult> rm =
        ctx.transport->Run(ShellCommand({spec.cli, "rm", "--storage", spec.container}));
    if (rm.ok() && rm->exit_code == 0) {
      if (ctx.progress) ctx.progress("removed a storage-only " + spec.container + " (power loss?)");
      run = ctx.transport->Run(run_command);
    }
  }
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) return RunRefusal(spec, *run);
  return Status::OK();
}

// `run --pull=never` of the image by ID, the env file written right before
// and removed right after, whatever happens: the container holds the values
// from then on.
Status StartContainer(const StepContext& ctx, const ContainerSpec& spec,
                      std::vector<std::string> options, const EnvFile& env,
                      const std::string& image_id, const std::string& home) {
  Status started = CheckPortFree(ctx, spec);
  if (started.ok() && !env.path.empty()) {
    options.push_back("--env-file");
    options.push_back(env.path);
    started =
        RunOnNode(ctx, ShellCommand({"mkdir", "-p", "-m", "0700", home + "/.fleet/deployments"}))
            .status();
    if (started.ok()) started = ctx.transport->WriteFile(env.path, env.text, 0600);
  }
  if (started.ok()) {
    if (ctx.progress) ctx.progress("starting " + spec.container + " from " + spec.image_ref);
    started = RunContainer(ctx, spec, options, image_id);
  }
  if (!env.path.empty()) {
    Status removed = RunOnNode(ctx, ShellCommand({"rm", "-f", env.path})).status();
    if (!removed.ok())  // the file holds the serve's secrets: say it stayed
      started = removed.Reworded((started.ok() ? "" : started.message() + "; ") + "the env file " +
                                 env.path + " stayed on the node: " + removed.message());
  }
  return started;
}

}  // namespace

// remove_container.sh (beside this file; its header says what is an
// error) with its values.
std::string RemoveContainerScript(const std::string& cli, const std::string& name) {
  return ScriptWithValues({{"rmc_cli", ShellQuote(cli)}, {"rmc_name", ShellQuote(name)}},
                          kRemoveContainerScript, kRemoveContainerScriptSize);
}

// swap_container.sh (beside this file) with its values.
std::string SwapContainerScript(const std::string& cli, SwapWay how, const std::string& from,
                                const std::string& to) {
  return ScriptWithValues({{"swc_how", how == SwapWay::kAside ? "aside" : "back"},
                           {"swc_cli", ShellQuote(cli)},
                           {"swc_from", ShellQuote(from)},
                           {"swc_to", ShellQuote(to)}},
                          kSwapContainerScript, kSwapContainerScriptSize);
}

Status RemoveContainer(const StepContext& ctx, const std::string& cli, const std::string& name) {
  return RunOnNode(ctx, RemoveContainerScript(cli, name)).status();
}

// The ID of the image, by digest, already on the node: never a pull.
Result<std::string> StagedImage(const StepContext& ctx, const ContainerSpec& spec) {
  const ImageRef ref = ParseImageRef(spec.image_ref);
  Result<FoundImage> image = FindImage(ctx.transport, spec.cli, ref, "");
  if (!image.ok()) return image.status();
  if (!image->present)
    return Result<std::string>::Error("image " + spec.image + " (" + spec.image_ref +
                                      ") is not on the node; refusing to start " + spec.container +
                                      " (a run would pull it): apply image." + spec.image + "@" +
                                      spec.node + " first");
  return image->id;
}

Result<ExistingContainer> InspectExisting(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> now = ctx.transport->Run(
      ShellCommand({spec.cli, "container", "inspect", "--format",
                    std::string("{{index .Config.Labels \"") + kSpecLabel + "\"}}",
                    spec.container}) +
      " 2>/dev/null");
  if (!now.ok()) return now.status();
  ExistingContainer e;
  e.exists = now->exit_code == 0;
  e.spec = e.exists ? now->out : "";
  while (!e.spec.empty() && e.spec.back() == '\n') e.spec.pop_back();
  return e;
}

// The declared container is there: start it when it is stopped, and wait
// for its health.
Status DropPageCache(const StepContext& ctx) {
  const std::string command = ShellCommand(DropCachesArgv());
  if (ctx.progress) ctx.progress("dropping the page cache first (sudo -n " + command + ")");
  // sync first: dirty pages are not dropped, and written back they are.
  return RunOnNode(ctx, "sync && sudo -n " + command + " >/dev/null").status();
}

Status StartExisting(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> state = ctx.transport->Run(ShellCommand(
      {spec.cli, "container", "inspect", "--format", "{{.State.Status}}", spec.container}));
  if (!state.ok()) return state.status();
  if (state->out.rfind("running", 0) != 0) {
    Status s = CheckPortFree(ctx, spec);
    if (!s.ok()) return s;
    if (ctx.progress) ctx.progress("starting " + spec.container);
    s = RunOnNode(ctx, ShellCommand({spec.cli, "start", spec.container}) + " >/dev/null").status();
    if (!s.ok()) return s;
  }
  return WaitServing(ctx, spec);
}

// A new container in place of what is there (nothing, or another spec):
// set the old one aside, start the new one, wait for its health; on
// failure remove it and put the old one back.
Status ReplaceContainer(const StepContext& ctx, const ContainerSpec& spec,
                        const ExistingContainer& existing, const std::string& image_id,
                        bool keep_previous) {
  const std::string home = Home(ctx);
  if (home.empty()) return Status::Error("cannot read $HOME on the node");
  Result<std::vector<std::string>> options = RunOptions(ctx, spec, home);
  if (!options.ok()) return options.status();
  Result<EnvFile> env = PrepareEnvFile(spec, home);
  if (!env.ok()) return env.status();
  Status s = SetAsidePrevious(ctx, spec, existing);
  if (!s.ok()) return s;
  Status started = StartContainer(ctx, spec, *options, *env, image_id, home);
  Status healthy = started.ok() ? WaitServing(ctx, spec) : started;
  if (!healthy.ok()) {
    Status removed = RemoveContainer(ctx, spec.cli, spec.container);
    const std::string message = healthy.message() + "\n  " + spec.container +
                                (removed.ok() ? " removed" : " not removed: " + removed.message()) +
                                (existing.exists ? PutBackPrevious(ctx, spec) : "");
    // The removal is the latest word on the node: it answered, or not.
    return removed.ok() ? Status::Error(message) : removed.Reworded(message);
  }
  if (existing.exists && !keep_previous) RemoveContainer(ctx, spec.cli, PreviousName(spec));
  return Status::OK();
}

Status RestorePrevious(const StepContext& ctx, const ContainerSpec& spec) {
  Status s = RemoveContainer(ctx, spec.cli, spec.container);
  if (!s.ok()) return s;
  if (ctx.progress) ctx.progress("putting back " + spec.container + " (the spec it replaced)");
  s = RunOnNode(ctx,
                SwapContainerScript(spec.cli, SwapWay::kBack, PreviousName(spec), spec.container))
          .status();
  if (!s.ok()) return s;
  return WaitServing(ctx, spec);
}

Status RemovePrevious(const StepContext& ctx, const ContainerSpec& spec) {
  return RemoveContainer(ctx, spec.cli, PreviousName(spec));
}

// The started container's id, for the state record. A node that stops
// answering here fails the step: the serve answered a moment ago, but the
// apply cannot say it still runs (tests/faults/silent.sh found an apply that
// ended 0 with the node dark since just after the health check).
Result<std::string> ContainerId(const StepContext& ctx, const ContainerSpec& spec) {
  Result<CommandResult> id = ctx.transport->Run(
      ShellCommand({spec.cli, "container", "inspect", "--format", "{{.Id}}", spec.container}));
  if (!id.ok()) return id.status();
  if (id->exit_code != 0)
    return Result<std::string>::Error("container " + spec.container +
                                      " is gone right after it answered: inspect exited " +
                                      std::to_string(id->exit_code) + ": " + id->err);
  std::string cid = id->out;
  while (!cid.empty() && cid.back() == '\n') cid.pop_back();
  return cid;
}

}  // namespace fleet
