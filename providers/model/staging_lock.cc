#include "providers/model/staging_lock.h"

#include <condition_variable>
#include <ctime>
#include <mutex>

#include "providers/model/staging_keeper_sh.h"
#include "providers/shared/node_script.h"
#include "src/process_identity.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

std::string UtcTime(int64_t t) {
  if (t <= 0) return "an unknown time";
  time_t tt = static_cast<time_t>(t);
  struct tm tm;
  gmtime_r(&tt, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

}  // namespace

std::string StagingLockPath(const std::string& cache, const std::string& repo) {
  return cache + "/.fleet-staging-" + HubRepoDirName(repo) + ".lock";
}

std::string DescribeLockOwner(const StagingLock& lock) {
  if (lock.owner.empty()) return "staging in progress (lock without an owner yet)";
  std::string by = "staging in progress by pid " + std::to_string(lock.pid) + " on " + lock.host +
                   " since " + UtcTime(lock.since);
  if (const std::optional<ControllerId> c = ParseControllerId(lock.controller))
    by += " for fleet pid " + std::to_string(c->pid) + " on " + c->host;
  return by;
}

struct StagingLockHolder::Shared {
  std::mutex mu;
  std::condition_variable cv;
  bool answered = false;
  std::string first_line;
  std::string buffer;
  bool stop = false;
  bool finished = false;
  std::string error;  // transport error or the keeper's stderr
};

namespace {

// staging_keeper.sh (beside this file; its header says what it does) with
// its values.
std::string KeeperScript(const std::string& cache, const std::string& lock_path,
                         const std::string& controller, const std::string& takeover) {
  // Not `sh -c`: the channel's own shell runs it, so that the pid in its
  // owner line ($$) is the process whose trap removes the lock.
  return ScriptWithValues({{"c", NodePathWord(cache)},
                           {"l", NodePathWord(lock_path)},
                           {"ctl", ShellQuote(controller)},
                           {"t", ShellQuote(takeover)}},
                          kStagingKeeperScript, kStagingKeeperScriptSize);
}

}  // namespace

std::string StagingLockHolder::Start(const std::string& script) {
  shared_ = std::make_shared<Shared>();
  std::shared_ptr<Shared> sh = shared_;
  Transport* t = keeper_.get();
  thread_ = std::thread([sh, t, script] {
    Result<CommandResult> r = t->RunStreaming(script, [sh](std::string_view chunk) {
      std::lock_guard<std::mutex> l(sh->mu);
      if (!sh->answered) {
        sh->buffer.append(chunk);
        size_t nl = sh->buffer.find('\n');
        if (nl != std::string::npos) {
          sh->first_line = sh->buffer.substr(0, nl);
          sh->answered = true;
          sh->cv.notify_all();
        }
      }
      return !sh->stop;
    });
    std::lock_guard<std::mutex> l(sh->mu);
    sh->finished = true;
    if (!r.ok())
      sh->error = r.status().message();
    else if (!sh->answered)
      sh->error = "the lock keeper exited " + std::to_string(r->exit_code) +
                  (r->err.empty() ? "" : ": " + r->err);
    sh->answered = true;
    sh->cv.notify_all();
  });
  std::unique_lock<std::mutex> l(sh->mu);
  sh->cv.wait(l, [&] { return sh->answered; });
  return sh->first_line;
}

Result<std::unique_ptr<StagingLockHolder>> StagingLockHolder::Acquire(
    std::unique_ptr<Transport> keeper, const std::string& cache, const std::string& repo,
    std::string* took_over) {
  using R = Result<std::unique_ptr<StagingLockHolder>>;
  const std::string lock_path = StagingLockPath(cache, repo);
  Status c = keeper->Connect();
  if (!c.ok()) return c;
  std::unique_ptr<StagingLockHolder> h(new StagingLockHolder());
  h->keeper_ = std::move(keeper);
  std::string takeover, gone;  // a dead controller's owner line, and why
  for (;;) {
    const std::string first =
        h->Start(KeeperScript(cache, lock_path, ThisControllerId(), takeover));
    if (first.rfind("acquired\t", 0) == 0) {
      std::string rest = first.substr(9);
      size_t tab = rest.find('\t');
      h->owner_ = ParseStagingLockOwner(rest.substr(0, tab));
      std::string took = tab == std::string::npos ? "" : rest.substr(tab + 1);
      if (took_over)
        *took_over = took.empty() ? "" : took + (took == takeover ? gone : ": not running");
      return R(std::move(h));
    }
    h->thread_.join();
    if (first.rfind("held\t", 0) != 0) break;
    const StagingLock held = ParseStagingLockOwner(first.substr(5));
    // The keeper of a controller killed a moment ago lives until its next
    // heartbeat fails; this host can tell that controller is gone at once.
    if (takeover.empty() && !held.controller.empty() && ControllerIsGone(held.controller)) {
      takeover = held.owner;
      gone = ": its fleet process (" + held.controller + ") is gone";
      continue;
    }
    h->released_ = true;
    return R::Error(DescribeLockOwner(held) + " (lock " + lock_path + " on " +
                    h->keeper_->Describe() +
                    "); not starting a duplicate. Run apply again when it is done; if that "
                    "process is gone for good, remove the lock folder");
  }
  h->released_ = true;
  std::lock_guard<std::mutex> l(h->shared_->mu);
  return R::Error("cannot take the staging lock " + lock_path + ": " + h->shared_->error);
}

Status StagingLockHolder::Release(Transport* control) {
  if (released_) return Status::OK();
  released_ = true;
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    shared_->stop = true;
  }
  Status s;
  if (control != nullptr && owner_.pid > 0) {
    // A keeper already gone is released too: with `stop` set, its reader
    // may end the channel first, and the keeper ends at its next heartbeat
    // (CI's model_test once lost that race: "kill: No such process").
    const std::string pid = std::to_string(owner_.pid);
    Result<CommandResult> r =
        control->Run("kill -TERM " + pid + " 2>/dev/null || ! kill -0 " + pid + " 2>/dev/null");
    if (!r.ok())
      s = r.status();
    else if (r->exit_code != 0)
      s = Status::Error("releasing the staging lock: kill exited " + std::to_string(r->exit_code) +
                        ": " + r->err);
  }
  // Without the kill, the keeper's next heartbeat (<= 1 s) ends it.
  if (thread_.joinable()) thread_.join();
  return s;
}

StagingLockHolder::~StagingLockHolder() {
  if (!released_) Release(nullptr);
  if (thread_.joinable()) thread_.join();
}

}  // namespace fleet
