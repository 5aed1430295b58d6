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

namespace {

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

// What one commit's try reports: an outcome and a detail.
struct Outcome {
  std::string outcome, detail;
};

// Validates, plans and applies `commit` (descended from the applied one)
// from a copy of it, under the lock; records it as synced when it applied.
// `current`: the checkout's manifests (the lab's state settings).
Outcome ApplyCommit(Git* git, const Manifest& current, StateStore* store, const std::string& commit,
                    int64_t lock_timeout_ms,
                    const std::function<void(const std::string&)>& progress) {
  CommitCopy copy;
  if (Status made = copy.Make(git, commit); !made.ok()) return {"failed", made.message()};
  Manifest next;
  Diagnostics diags;
  if (!LoadManifest(copy.path(), &next, &diags)) {
    std::string why;
    for (const Diagnostic& d : diags)
      if (d.severity == Diagnostic::Severity::kError)
        why += (why.empty() ? "" : "; ") + d.ToString();
    return {"failed", "validate: " + why};
  }
  if (next.state.backend != current.state.backend)
    return {"waiting", "the commit moves the state to another backend: a person migrates it"};
  next.state = current.state;  // the lab's store, not one inside the copy
  Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(store, "sync", lock_timeout_ms);
  if (!lock.ok()) return {"busy", "the state lock is held: " + lock.status().message()};
  Result<State> state = store->Load();
  if (!state.ok()) return {"failed", state.status().message()};
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  NodeConnections connections(&next);
  Plan plan = Planner(&next, &providers, &connections).MakePlan(*state, PlanOptions{});
  if (!plan.errors.empty()) return {"failed", "plan: " + Joined(plan.errors)};
  if (std::string why = NeedsAPerson(plan, next.sync); !why.empty())
    return {"waiting", why + ": a person applies it (fleet apply)"};
  const uint64_t serial = state->serial;
  ApplyReport report;
  if (plan.HasChanges()) {
    std::unique_ptr<PowerSwitch> power;
    if (next.power.present) {
      const char* token = std::getenv(next.power.token_env.c_str());
      power = MakeHomeAssistantSwitch(next.power.url, token ? token : "");
    }
    Executor executor(&next, &providers, &connections, store, power.get(),
                      [&](const std::string& line) {
                        if (progress) progress("sync: " + line);
                      });
    report = executor.Apply(plan, &state.value(), ApplyOptions{});
  }
  if (!report.ok())
    return {"failed", "apply: " + Joined(report.failed) +
                          (report.rollback_failed.empty()
                               ? ""
                               : "; rollback failed: " + Joined(report.rollback_failed))};
  state->synced_commit = commit;
  if (state->serial == serial) ++state->serial;
  if (Status saved = store->Save(*state); !saved.ok())
    return {"failed", "the state: " + saved.message()};
  std::string detail = std::to_string(report.done.size()) + " change(s) applied";
  Result<CommandResult> moved = git->Run({"merge", "--ff-only", "--quiet", commit});
  if (!moved.ok() || moved->exit_code != 0)
    detail += "; the checkout did not move to it (" +
              (moved.ok() ? moved->err : moved.status().message()) + ")";
  return {"applied", detail};
}

}  // namespace

Syncer::Syncer(std::string dir, std::string ref, int64_t lock_timeout_ms)
    : dir_(std::move(dir)), ref_(std::move(ref)), lock_timeout_ms_(lock_timeout_ms) {}

std::string Syncer::Fetch(Git* git, std::string* ref, std::string* commit) const {
  if (ref->empty()) {
    Result<std::string> up =
        git->Out({"rev-parse", "--abbrev-ref", "--symbolic-full-name", "@{upstream}"});
    *ref = up.ok() ? *up : "";
  }
  const size_t slash = ref->find('/');
  if (ref->empty() || slash == std::string::npos)
    return "no REMOTE/BRANCH to follow (give one: fleet watch --sync origin/main)";
  const std::string remote = ref->substr(0, slash);
  if (Result<std::string> f = git->Out({"fetch", "--quiet", remote}); !f.ok())
    return "git fetch " + remote + ": " + f.status().message();
  Result<std::string> c = git->Out({"rev-parse", "--verify", "--quiet", *ref + "^{commit}"});
  if (!c.ok()) return "no commit at " + *ref;
  *commit = *c;
  return "";
}

std::vector<nlohmann::json> Syncer::Round(const std::function<void(const std::string&)>& progress) {
  std::vector<nlohmann::json> events;
  Git git(dir_);
  std::string ref = ref_, commit;
  auto event = [&](const std::string& outcome, const std::string& detail) {
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
  std::string error = loaded ? Fetch(&git, &ref, &commit)
                             : "the checkout's own manifests do not load: " +
                                   (diags.empty() ? std::string() : diags.front().ToString());
  Result<State> peek = error.empty() ? store->Load() : Result<State>::Error(error);
  if (error.empty() && !peek.ok()) error = peek.status().message();
  if (!error.empty()) {
    if (error != last_error_) event("error", error);  // said once, not every round
    last_error_ = error;
  } else {
    last_error_.clear();
    Result<std::string> head = git.Out({"rev-parse", "HEAD"});
    const std::string base = !peek->synced_commit.empty() ? peek->synced_commit
                             : head.ok()                  ? *head
                                                          : "";
    if (commit != base && commit != last_tried_) {
      last_tried_ = commit;
      Result<CommandResult> is = git.Run({"merge-base", "--is-ancestor", base, commit});
      Outcome o =
          !base.empty() && (!is.ok() || is->exit_code != 0)
              ? Outcome{"refused", "commit " + commit.substr(0, 12) + " at " + ref +
                                       " does not descend from the applied " + base.substr(0, 12) +
                                       " (a force-push?): sync never goes backwards; "
                                       "apply it by hand if it is meant"}
              : ApplyCommit(&git, current, store.get(), commit, lock_timeout_ms_, progress);
      if (o.outcome == "busy") {  // not tried: the next round tries it again
        last_tried_.clear();
        o.outcome = "waiting";
      }
      if (o.outcome == "applied") last_tried_.clear();
      if (o.outcome == "failed") o.detail += " (the lab stays on " + base.substr(0, 12) + ")";
      event(o.outcome, o.detail);
    }
  }
  for (const nlohmann::json& e : events)
    if (store && !store->AppendEvent(e).ok() && progress)
      progress("sync: cannot keep the event in the state's history");
  return events;
}

}  // namespace fleet
