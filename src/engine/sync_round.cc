#include "src/engine/sync_round.h"

#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "manifests/manifest.h"
#include "src/engine/executor.h"
#include "src/engine/node_connections.h"
#include "src/engine/planner.h"
#include "src/engine/serve_commands.h"
#include "src/engine/sync_policy.h"
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
  // git ARGS in the checkout, `input` on its stdin.
  Result<CommandResult> Run(std::vector<std::string> args, std::string_view input = {}) {
    args.insert(args.begin(), {"git", "-C", dir_});
    return sh_.Run(ShellCommand(args), input);
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

// A copy of `commit`'s tree as committed, in a fresh temp folder removed
// with it: every blob's bytes as git stores them, read with `git cat-file`.
// Not `git archive` or a checkout: those apply the commit's own
// .gitattributes (export-subst writes the commit message into a file,
// export-ignore drops one, a filter rewrites one), so a commit could show a
// reviewer one fleet.yaml and hand sync another.
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
    Result<CommandResult> ls = git->Run({"ls-tree", "-r", "-z", "--full-tree", commit});
    if (!ls.ok()) return ls.status();
    if (ls->exit_code != 0) return Status::Error("git ls-tree " + commit + ": " + ls->err);
    std::vector<Entry> entries;
    std::string ids;
    for (size_t at = 0; at < ls->out.size();) {
      size_t end = ls->out.find('\0', at);
      if (end == std::string::npos) end = ls->out.size();
      Result<Entry> e = ParseEntry(ls->out.substr(at, end - at));
      at = end + 1;
      if (!e.ok()) return e.status().Prefixed("commit " + commit);
      if (e->id.empty()) continue;  // a submodule: nothing of it is in this repo
      ids += e->id + "\n";
      entries.push_back(std::move(e).value());
    }
    Result<CommandResult> blobs = git->Run({"cat-file", "--batch"}, ids);
    if (!blobs.ok()) return blobs.status();
    if (blobs->exit_code != 0) return Status::Error("git cat-file " + commit + ": " + blobs->err);
    // "<id> blob <size>\n<bytes>\n" for each id, in the order asked.
    const std::string& out = blobs->out;
    size_t at = 0;
    for (const Entry& e : entries) {
      const size_t nl = out.find('\n', at);
      const std::string head = out.substr(at, nl == std::string::npos ? 0 : nl - at);
      const size_t blob = head.find(" blob ");
      const uint64_t size =
          blob == std::string::npos ? 0 : std::strtoull(head.c_str() + blob + 6, nullptr, 10);
      if (blob == std::string::npos || nl + 1 + size > out.size())
        return Status::Error("git cat-file: unexpected answer for " + e.path + ": " + head);
      if (Status w = Write(e, out.substr(nl + 1, size)); !w.ok()) return w;
      at = nl + 1 + size + 1;
    }
    return Status::OK();
  }
  const std::string& path() const { return path_; }

 private:
  struct Entry {
    std::string mode, id, path;  // id empty: not a blob
  };
  // One line of `ls-tree -z`: "<mode> SP <type> SP <id> TAB <path>".
  static Result<Entry> ParseEntry(const std::string& line) {
    const size_t tab = line.find('\t'), sp1 = line.find(' ');
    const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
    if (tab == std::string::npos || sp2 == std::string::npos || sp2 > tab)
      return Status::Error("git ls-tree printed an unexpected line");
    Entry e{line.substr(0, sp1), line.substr(sp2 + 1, tab - sp2 - 1), line.substr(tab + 1)};
    if (line.compare(sp1 + 1, sp2 - sp1 - 1, "blob") != 0) e.id.clear();
    const std::filesystem::path rel = std::filesystem::path(e.path).lexically_normal();
    if (rel.is_absolute() || rel.empty() || *rel.begin() == ".." || *rel.begin() == ".git")
      return Status::Error("has a path fleet will not write: " + e.path);
    return e;
  }
  // A link is written as the link it is: the manifests loader refuses any
  // file fleet.yaml names that resolves outside the repo.
  Status Write(const Entry& e, const std::string& bytes) {
    namespace fs = std::filesystem;
    const fs::path target = fs::path(path_) / e.path;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (e.mode == "120000") {
      fs::create_symlink(bytes, target, ec);
      return ec ? Status::Error("cannot write the link " + e.path + ": " + ec.message())
                : Status::OK();
    }
    std::ofstream out(target, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) return Status::Error("cannot write " + target.string());
    if (e.mode == "100755")
      fs::permissions(target, fs::perms::owner_exec, fs::perm_options::add, ec);
    return Status::OK();
  }
  std::string path_;
};

// Why `commit` may not be applied for its signature ("" when it may): a good
// SSH signature by a key of the allowed-signers file, or a good OpenPGP one
// by a listed key, as git's own verification (`git verify-commit`) judges it.
std::string SignatureProblem(Git* git, const std::string& commit, const SyncOptions& o) {
  if (!o.RequiresSignature()) return "";
  std::vector<std::string> args = {"-c", "log.showSignature=false"};
  if (!o.allowed_signers.empty())
    args.insert(args.end(), {"-c", "gpg.ssh.allowedSignersFile=" + o.allowed_signers});
  args.insert(args.end(), {"log", "-1", "--format=%G?%n%GF%n%GP%n%GS", commit});
  Result<CommandResult> r = git->Run(args);
  if (!r.ok()) return "cannot check its signature: " + r.status().message();
  if (r->exit_code != 0) return "cannot check its signature: " + r->err;
  std::vector<std::string> f;
  std::istringstream in(r->out);
  for (std::string line; std::getline(in, line);) f.push_back(line);
  f.resize(4);
  const std::string &verdict = f[0], &key = f[1], &primary = f[2], &signer = f[3];
  auto same = [](const std::string& a, const std::string& b) {
    auto norm = [](const std::string& s) {
      std::string out;
      for (char c : s)
        if (c != ' ') out += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      return out;
    };
    return !a.empty() && norm(a) == norm(b);
  };
  // git prints an SSH key's fingerprint as "SHA256:...", an OpenPGP one as hex.
  const bool ssh = key.rfind("SHA256:", 0) == 0;
  if (ssh && !o.allowed_signers.empty() && verdict == "G") return "";
  if (!ssh && (verdict == "G" || verdict == "U"))  // U: good, the key not certified
    for (const std::string& k : o.gpg_keys)
      if (same(k, key) || same(k, primary)) return "";
  if (verdict == "N") return "it is not signed, and this watch applies only signed commits";
  if (verdict == "B") return "its signature is bad";
  return "its signature (git's verdict " + verdict + (key.empty() ? "" : ", key " + key) +
         (signer.empty() ? "" : ", signer " + signer) + ") is not from a key this watch allows";
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
// `current`: the checkout's manifests, the applied commit's: its state
// settings and its `sync:` policy gate this commit. `approved`: a person
// approved this commit (fleet sync approve), so what only a person may
// change goes through.
Outcome ApplyCommit(Git* git, const Manifest& current, StateStore* store, const std::string& commit,
                    const SyncOptions& options, bool approved,
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
  // Before the rebase below points next's controller paths at the checkout.
  const std::vector<std::string> trust_files =
      TrustFileChanges(next, copy.path(), current.root_dir);
  RebaseControllerPaths(copy.path(), current.root_dir, &next);
  if (std::vector<std::string> env = EnvNamesNotAllowed(next, options.allow_env); !env.empty())
    return {"refused",
            "a recipe reads a variable of the watch's environment that "
            "--sync-allow-env does not list: " +
                Joined(env)};
  const std::string approve =
      ": a person applies it (fleet apply) or approves it (fleet sync approve " +
      commit.substr(0, 12) + ")";
  if (!approved)
    if (std::vector<std::string> trust = ChangesForAPerson(current, next);
        !trust.empty() || !trust_files.empty()) {
      trust.insert(trust.end(), trust_files.begin(), trust_files.end());
      return {"waiting", Joined(trust) + approve};
    }
  next.state = current.state;  // the lab's store, not one inside the copy
  Result<std::unique_ptr<StateLock>> lock = LockWithTimeout(store, "sync", options.lock_timeout_ms);
  if (!lock.ok()) return {"busy", "the state lock is held: " + lock.status().message()};
  Result<State> state = store->Load();
  if (!state.ok()) return {"failed", state.status().message()};
  std::vector<std::unique_ptr<Provider>> providers = MakeProviders();
  NodeConnections connections(&next);
  std::unique_ptr<PowerSwitch> power = MakeDeclaredPowerSwitch(next.power);
  Plan plan = Planner(&next, &providers, &connections, power.get()).MakePlan(*state, PlanOptions{});
  if (!plan.errors.empty()) return {"failed", "plan: " + Joined(DiagnosticLines(plan.errors))};
  if (!approved)
    if (std::string why = PlanNeedsAPerson(plan, current.sync, providers); !why.empty())
      return {"waiting", why + approve};
  const uint64_t serial = state->serial;
  ApplyReport report;
  if (plan.HasChanges()) {
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
  if (state->sync_approved == commit) state->sync_approved.clear();
  if (state->serial == serial) ++state->serial;
  if (Status saved = store->Save(*state); !saved.ok())
    return {"failed", "the state: " + saved.message()};
  std::string detail = std::to_string(report.done.size()) + " change(s) applied";
  if (approved) detail += " (approved by a person)";
  Result<CommandResult> moved = git->Run({"merge", "--ff-only", "--quiet", commit});
  if (!moved.ok() || moved->exit_code != 0)
    detail += "; the checkout did not move to it (" +
              (moved.ok() ? moved->err : moved.status().message()) + ")";
  return {"applied", detail};
}

}  // namespace

Syncer::Syncer(std::string dir, SyncOptions options)
    : dir_(std::move(dir)), options_(std::move(options)) {}

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
  std::string ref = options_.ref, commit;
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
    // A commit is tried once; again only when a person approved it since.
    const bool approved = !peek->sync_approved.empty() && peek->sync_approved == commit;
    if (commit != base && (commit != last_tried_ || (approved && !last_tried_approved_))) {
      last_tried_ = commit;
      last_tried_approved_ = approved;
      Result<CommandResult> is = git.Run({"merge-base", "--is-ancestor", base, commit});
      Outcome o;
      if (!base.empty() && (!is.ok() || is->exit_code != 0))
        o = {"refused", "commit " + commit.substr(0, 12) + " at " + ref +
                            " does not descend from the applied " + base.substr(0, 12) +
                            " (a force-push?): sync never goes backwards; "
                            "apply it by hand if it is meant"};
      else if (std::string why = SignatureProblem(&git, commit, options_); !why.empty())
        o = {"refused", "commit " + commit.substr(0, 12) + ": " + why};
      else
        o = ApplyCommit(&git, current, store.get(), commit, options_, approved, progress);
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

int CmdSyncApprove(const GlobalOptions& g, const std::string& commit_arg) {
  Manifest m;
  if (!LoadManifestSaying(g, &m)) return 1;
  Git git(g.dir);
  Result<std::string> commit =
      git.Out({"rev-parse", "--verify", "--quiet", commit_arg + "^{commit}"});
  if (!commit.ok() || commit->empty()) {
    std::cerr << "fleet: no commit " << commit_arg << " in " << g.dir
              << " (the watch fetched it? give the hash its sync event names)\n";
    return 1;
  }
  std::unique_ptr<StateStore> store = OpenStateStore(m.state);
  Result<std::unique_ptr<StateLock>> lock = store->Lock("sync approve");
  if (!lock.ok()) {
    std::cerr << "fleet: " << lock.status().message() << "\n";
    return 1;
  }
  Result<State> state = store->Load();
  if (!state.ok()) {
    std::cerr << "fleet: " << state.status().message() << "\n";
    return 1;
  }
  state->sync_approved = *commit;
  ++state->serial;
  if (Status saved = store->Save(*state); !saved.ok()) {
    std::cerr << "fleet: " << saved.message() << "\n";
    return 1;
  }
  (void)store->AppendEvent({{"time", NowRfc3339()},
                            {"event", "sync"},
                            {"commit", *commit},
                            {"outcome", "approved"},
                            {"detail", "approved by a person (fleet sync approve)"}});
  std::cout << "Approved " << *commit
            << ": fleet watch --sync applies it at its next round, while it is the tip of the "
               "branch it follows.\n";
  return 0;
}

}  // namespace fleet
