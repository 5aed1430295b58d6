#include "src/engine/sync_round.h"

#include <stdlib.h>

#include <filesystem>

#include "manifests/manifest.h"
#include "src/engine/executor.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "src/local_transport.h"
#include "src/power_switch.h"
#include "src/shell_quote.h"
#include "state/state.h"
#include "state/state_store.h"

namespace fleet {
namespace {

// git on the controller, as the operator runs it (their config, their
// credentials), in the manifests checkout.
class Git {
 public:
  explicit Git(std::string dir) : dir_(std::move(dir)), sh_(SshEndpoint{"controller", "local"}) {}

  // stdout without its last newline; an error with git's own words.
  Result<std::string> Out(std::vector<std::string> args) {
    Result<CommandResult> r = Run(std::move(args));
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) return Result<std::string>::Error(Trimmed(r->err));
    return Trimmed(r->out);
  }
  Result<CommandResult> Run(std::vector<std::string> args, const std::string& tail = "") {
    args.insert(args.begin(), {"git", "-C", dir_});
    return sh_.Run(ShellCommand(args) + tail);
  }

 private:
  static std::string Trimmed(std::string s) {
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }
  std::string dir_;
  LocalTransport sh_;
};

// A copy of `commit`'s tree in a fresh temp folder, removed with it.
class CommitCopy {
 public:
  ~CommitCopy() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  Status Make(Git* git, const std::string& commit) {
    char tmpl[] = "/tmp/fleet-sync.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return Status::Error("cannot make a temp folder");
    path_ = tmpl;
    Result<CommandResult> r = git->Run({"archive", "--format=tar", commit},
                                       " | " + ShellCommand({"tar", "-x", "-C", path_}));
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) return Status::Error("git archive " + commit + ": " + r->err);
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// "add", "change", "replace", "destroy" or "power off" for a change.
std::string SyncAction(const PlanChange& c) {
  if (c.type == "node" && c.summary.rfind("power off", 0) == 0) return "power off";
  switch (c.action) {
    case Action::kCreate:
      return "add";
    case Action::kUpdate:
      return "change";
    case Action::kReplace:
      return "replace";
    case Action::kDelete:
      return "destroy";
    default:
      return "";
  }
}

// The first change sync may not apply by itself, as a reason ("" when none).
std::string NeedsAPerson(const Plan& plan, const SyncSettings& sync) {
  for (const PlanChange& c : plan.changes) {
    const std::string a = SyncAction(c);
    if (a.empty()) continue;
    if (a == "destroy" || a == "power off") {
      if (!sync.destroy)
        return "the plan would " + a + " " + c.address + " (sync.destroy is false)";
      continue;
    }
    if (std::find(sync.allow.begin(), sync.allow.end(), a) == sync.allow.end())
      return "the plan would " + a + " " + c.address + " (sync.allow does not list " + a + ")";
  }
  return "";
}

std::string Joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

Syncer::Syncer(std::string dir, std::string ref, int64_t lock_timeout_ms)
    : dir_(std::move(dir)), ref_(std::move(ref)), lock_timeout_ms_(lock_timeout_ms) {}

std::vector<nlohmann::json> Syncer::Round(const std::function<void(const std::string&)>& progress) {
  std::vector<nlohmann::json> events;
  Git git(dir_);
  std::string ref = ref_;
  if (ref.empty()) {
    Result<std::string> up =
        git.Out({"rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"});
    ref = up.ok() ? *up : "";
  }
  auto event = [&](const std::string& commit, const std::string& outcome,
                   const std::string& detail) {
    events.push_back({{"time", NowRfc3339()},
                      {"event", "sync"},
                      {"commit", commit},
                      {"ref", ref},
                      {"outcome", outcome},
                      {"detail", detail}});
  };
  // The state the lab keeps, whatever the commit says.
  Manifest current;
  Diagnostics diags;
  const bool loaded = LoadManifest(dir_, &current, &diags);
  std::unique_ptr<StateStore> store = loaded ? OpenStateStore(current.state) : nullptr;
  auto finish = [&]() {
    for (const nlohmann::json& e : events)
      if (store && !store->AppendEvent(e).ok() && progress)
        progress("sync: cannot keep the event in the state's history");
    return events;
  };
  std::string error;
  const size_t slash = ref.find('/');
  if (!loaded)
    error = "the checkout's own manifests do not load: " + diags.front().ToString();
  else if (ref.empty() || slash == std::string::npos)
    error = "no REMOTE/BRANCH to follow (give one: fleet watch --sync origin/main)";
  Result<std::string> commit = Result<std::string>::Error("");
  if (error.empty()) {
    Result<std::string> fetched = git.Out({"fetch", "--quiet", ref.substr(0, slash)});
    if (!fetched.ok())
      error = "git fetch " + ref.substr(0, slash) + ": " + fetched.status().message();
  }
  if (error.empty()) {
    commit = git.Out({"rev-parse", "--verify", "--quiet", ref + "^{commit}"});
    if (!commit.ok()) error = "no commit at " + ref;
  }
  if (!error.empty()) {
    if (error != last_error_) event("", "error", error);
    last_error_ = error;
    return finish();
  }
  last_error_.clear();
  Result<State> peek = store->Load();
  if (!peek.ok()) {
    event(*commit, "error", peek.status().message());
    return finish();
  }
  Result<std::string> head = git.Out({"rev-parse", "HEAD"});
  const std::string base = !peek->synced_commit.empty() ? peek->synced_commit
                           : head.ok()                  ? *head
                                                        : "";
  if (*commit == base || *commit == last_tried_) return finish();
  last_tried_ = *commit;
  if (!base.empty()) {
    Result<CommandResult> is = git.Run({"merge-base", "--is-ancestor", base, *commit});
    if (!is.ok() || is->exit_code != 0) {
      event(*commit, "refused",
            "commit " + commit->substr(0, 12) + " at " + ref + " does not descend from the " +
                "applied " + base.substr(0, 12) +
                " (a force-push?): sync never goes backwards; apply it by hand if it is meant");
      return finish();
    }
  }
  CommitCopy copy;
  Status made = copy.Make(&git, *commit);
  if (!made.ok()) {
    event(*commit, "failed", made.message());
    return finish();
  }
  Manifest next;
  Diagnostics next_diags;
  if (!LoadManifest(copy.path(), &next, &next_diags)) {
    std::string why;
    for (const Diagnostic& d : next_diags)
      if (d.severity == Diagnostic::Severity::kError)
        why += (why.empty() ? "" : "; ") + d.ToString();
    event(*commit, "failed", "validate: " + why + " (the lab stays on " + base.substr(0, 12) + ")");
    return finish();
  }
  if (next.state.backend != current.state.backend) {
    event(*commit, "waiting",
          "the commit moves the state to another backend: a person migrates it");
    return finish();
  }
  next.state = current.state;  // the lab's store, not one inside the copy
  Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(store.get(), "sync", lock_timeout_ms_);
  if (!lock.ok()) {
    last_tried_.clear();  // not tried: the next round tries it again
    event(*commit, "waiting", "the state lock is held: " + lock.status().message());
    return finish();
  }
  Result<State> state = store->Load();
  if (!state.ok()) {
    event(*commit, "failed", state.status().message());
    return finish();
  }
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  NodeConnections connections(&next);
  Plan plan = Planner(&next, &providers, &connections).MakePlan(*state, PlanOptions{});
  if (!plan.errors.empty()) {
    event(*commit, "failed", "plan: " + Joined(plan.errors));
    return finish();
  }
  if (std::string why = NeedsAPerson(plan, next.sync); !why.empty()) {
    event(*commit, "waiting", why + ": a person applies it (fleet apply)");
    return finish();
  }
  const uint64_t serial = state->serial;
  ApplyReport report;
  if (plan.HasChanges()) {
    std::unique_ptr<PowerSwitch> power;
    if (next.power.present) {
      const char* token = std::getenv(next.power.token_env.c_str());
      power = MakeHomeAssistantSwitch(next.power.url, token ? token : "");
    }
    Executor executor(&next, &providers, &connections, store.get(), power.get(),
                      [&](const std::string& line) {
                        if (progress) progress("sync: " + line);
                      });
    report = executor.Apply(plan, &state.value(), ApplyOptions{});
  }
  if (!report.ok()) {
    event(*commit, "failed",
          "apply: " + Joined(report.failed) +
              (report.rollback_failed.empty()
                   ? ""
                   : "; rollback failed: " + Joined(report.rollback_failed)));
    return finish();
  }
  state->synced_commit = *commit;
  if (state->serial == serial) ++state->serial;
  Status saved = store->Save(*state);
  if (!saved.ok()) {
    event(*commit, "failed", "the state: " + saved.message());
    return finish();
  }
  last_tried_.clear();
  std::string detail = std::to_string(report.done.size()) + " change(s) applied";
  Result<CommandResult> moved = git.Run({"merge", "--ff-only", "--quiet", *commit});
  if (!moved.ok() || moved->exit_code != 0)
    detail += "; the checkout did not move to it (" +
              (moved.ok() ? moved->err : moved.status().message()) + ")";
  event(*commit, "applied", detail);
  return finish();
}

}  // namespace fleet
