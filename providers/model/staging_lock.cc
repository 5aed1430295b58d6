#include "providers/model/staging_lock.h"

#include <condition_variable>
#include <ctime>
#include <mutex>

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

// The keeper: takes the lock (a folder holding its owner line, renamed into
// place), or takes over a stale one, prints
// "acquired\tOWNER\tTOOK" or "held\tOWNER", then lives until the lock goes
// or its channel closes. `takeover`: an owner line whose fleet process the
// controller found gone; a lock still held under exactly that line has its
// keeper ended first (its trap would remove the lock under us otherwise).
// A pid in an owner line is judged only on the node, boot and pid namespace
// that wrote it; a lock is only ever moved away while it still holds the
// owner line judged (another apply may have taken it in between).
std::string KeeperScript(const std::string& cache, const std::string& lock_path,
                         const std::string& controller, const std::string& takeover) {
  return "set -f; c=" + NodePathWord(cache) + "; l=" + NodePathWord(lock_path) +
         "; ctl=" + ShellQuote(controller) + "; t=" + ShellQuote(takeover) + "\n" +
         R"SH(mkdir -p -- "$c" || exit 3
b=$(cat /proc/sys/kernel/random/boot_id 2>/dev/null); [ -n "$b" ] || b=-
h=$(uname -n)
n=$(readlink /proc/self/ns/pid 2>/dev/null | tr -cd 0-9); [ -n "$n" ] || n=-
me="$$ $h $b $(date +%s) $ctl $n"
tmp="$c/.fleet-newlock.$$"
# alive PID: its /proc entry is there and it is not a zombie (a stat this
# user may not read, as under hidepid, counts as alive).
alive() { [ -d "/proc/$1" ] && [ "$(sed 's/.*) //; s/ .*//' "/proc/$1/stat" 2>/dev/null)" != Z ]; }
# owner_of DIR: its owner line, at most 512 bytes ("" if none), in o.
owner_of() { o=; [ -r "$1/owner" ] && { IFS= read -r o < "$1/owner" || :; }; o=$(printf '%.512s' "$o"); }
# fresh: the lock made ours, born with its owner line (a folder renamed into
# place: a crash can no longer leave a lock without an owner). 0: taken,
# 1: there already, 2: cannot write here ($e says why).
fresh() {
  rm -rf -- "$tmp"
  e=$(mkdir -- "$tmp" 2>&1) || return 2
  e=$( { printf '%s\n' "$me" > "$tmp/owner"; } 2>&1) || { rm -rf -- "$tmp"; return 2; }
  # -n: renameat2(RENAME_NOREPLACE), which replaces no folder, not even an
  # empty one; it exits 0 either way, so the folder left tells.
  mv -n -T -- "$tmp" "$l" 2>/dev/null; [ -e "$tmp" ] || return 0
  rm -rf -- "$tmp"; return 1
}
# retake OWNER: the lock, if it still holds OWNER, moved away and made ours.
retake() {
  mv -n -T -- "$l" "$l.stale.$$" 2>/dev/null; [ -d "$l.stale.$$" ] || return 1
  w=$1; owner_of "$l.stale.$$"
  [ "$o" = "$w" ] || { mv -n -T -- "$l.stale.$$" "$l" 2>/dev/null; o=$w; return 1; }
  o=$w; rm -rf -- "$l.stale.$$"; fresh
}
# Folders of keepers a crash stopped between their mkdir and rename.
find "$c" -maxdepth 1 -name '.fleet-newlock.*' -mmin +1 -exec rm -rf -- {} + 2>/dev/null
took=
fresh; r=$?
# Cannot write here: an error, unless the lock is there (then report it).
[ $r != 2 ] || [ -d "$l" ] || { printf '%s\n' "$e" >&2; exit 73; }
if [ $r != 0 ]; then
  owner_of "$l"
  set -- $o
  here=; [ "$2" = "$h" ] && [ "${6:-$n}" = "$n" ] && here=1
  case $1 in ''|*[!0-9]*) here= ;; esac
  ok=
  if [ -z "$o" ]; then
    # An older fleet's lock (it wrote the owner after its mkdir): give its
    # holder a minute, or none if the node booted since.
    boot=$(awk '/^btime/{print $2}' /proc/stat 2>/dev/null)
    { [ -n "$(find "$l" -maxdepth 0 -mmin +1 2>/dev/null)" ] ||
      [ "$(stat -c %Y -- "$l" 2>/dev/null || echo 0)" -lt "${boot:-0}" ]; } && retake "" && ok=1
  elif [ -n "$here" ] && { [ "$3" != "$b" ] || ! alive "$1"; }; then
    retake "$o" && ok=1
  elif [ -n "$here" ] && [ -n "$t" ] && [ "$o" = "$t" ]; then
    kill -TERM "$1" 2>/dev/null; i=0
    while alive "$1" && [ $i -lt 50 ]; do i=$((i+1)); sleep 0.1; done
    # Its trap removed the lock (then fresh), or it had none (then retake).
    ! alive "$1" && { fresh || retake "$o"; } && ok=1
  fi
  [ -n "$ok" ] || { printf 'held\t%s\n' "$o"; exit 75; }
  took=${o:-"(no owner)"}
fi
trap 'rm -rf -- "$l"; exit 0' EXIT HUP INT TERM PIPE
printf 'acquired\t%s\t%s\n' "$me" "$took"
while [ -d "$l" ]; do sleep 1 </dev/null >/dev/null 2>&1 & wait $!; printf '.\n' || exit 0; done
)SH";
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
