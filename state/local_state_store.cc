// The local file backend of StateStore (see state/state_store.h).
//
// Files, all in the state file's directory:
//   <path>                    the state (mode 0600)
//   <path>.backup             the previous version (mode 0600)
//   <path>.lock               the lock: flock()ed while held, holds LockInfo
//   <path>.tmp.<pid>          a save in progress (or killed mid-way)
//   <path>.backup.tmp.<pid>   a backup in progress (or killed mid-way)
//   <path>.events             the history of events: one JSON object a line
//   <path>.bench              the bench runs (AppendBenchRun), one a line, the
//                             last kBenchRunsKept, rewritten as the events are
//                             (mode 0600); appenders flock() it (not the
//                             state lock), then append with O_APPEND, one
//                             write() per line
//   <path>.events.tmp.<pid>   a rewrite of the events in progress (or killed)
// Temp files left by a killed writer are removed by the next Save.
//
// The events file is rewritten (temp file, fsync, rename) with its last
// kEventsKept events when it holds more than kEventsRewriteAbove lines, by
// the appender that found it so, still holding the flock of the old file.
// An appender that waited on that flock then finds the path renamed over
// and takes the flock of the new file instead.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "src/atomic_file.h"
#include "src/json_number.h"
#include "state/state_store.h"

namespace fleet {

namespace {

using nlohmann::json;

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// "open /x/y: No such file or directory"
Status SysError(const std::string& what, const std::string& path, int err) {
  return Status::Error(what + " " + path + ": " + ErrnoText(err));
}

std::string DirName(const std::string& path) {
  auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Closes an fd on scope exit unless released.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }
  // close() reports deferred write errors (e.g. NFS), so callers that wrote
  // through the fd check it.
  int Close() { return ::close(release()); }

 private:
  int fd_;
};

int OpenRetry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

Status WriteAll(int fd, const std::string& data, const std::string& path) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("write", path, errno);
    }
    off += static_cast<size_t>(n);
  }
  return Status::OK();
}

Status ReadAll(int fd, const std::string& path, std::string* out) {
  out->clear();
  char buf[65536];
  off_t off = 0;
  for (;;) {
    // pread from 0: the fd may have been read before (lock retries).
    ssize_t n = ::pread(fd, buf, sizeof(buf), off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return SysError("read", path, errno);
    }
    if (n == 0) return Status::OK();
    out->append(buf, static_cast<size_t>(n));
    off += n;
  }
}

Status FsyncFd(int fd, const std::string& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return SysError("fsync", path, errno);
  }
  return Status::OK();
}

// mkdir -p with mode 0700 for every directory it creates; existing ones are
// left as they are (they may be shared, e.g. the user's home).
Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    if (!S_ISDIR(st.st_mode)) {
      return Status::Error("state directory " + dir + " is not a directory");
    }
    return Status::OK();
  }
  if (errno != ENOENT) return SysError("stat", dir, errno);
  std::string parent = DirName(dir);
  if (parent != dir) {
    Status s = MakeDirs(parent);
    if (!s.ok()) return s;
  }
  if (::mkdir(dir.c_str(), 0700) != 0) {
    if (errno == EEXIST) return Status::OK();  // lost a race: fine
    return SysError("create directory", dir, errno);
  }
  // mkdir's mode is filtered by the umask; a umask like 0277 must not leave
  // the directory unusable, nor may a loose one widen it.
  if (::chmod(dir.c_str(), 0700) != 0) return SysError("chmod", dir, errno);
  return Status::OK();
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

json LockInfoToJson(const LockInfo& i) {
  return json{{"id", i.id},           {"holder", i.holder}, {"operation", i.operation},
              {"created", i.created}, {"pid", i.pid},       {"hostname", i.hostname}};
}

// Parses what a lock holder wrote; false when the text is not (yet) a
// complete lock record, e.g. the holder is between truncate and write.
bool LockInfoFromText(const std::string& text, LockInfo* out) {
  try {
    json j = json::parse(text);
    if (!j.is_object()) return false;
    out->id = j.at("id").get<std::string>();
    out->holder = j.value("holder", std::string());
    out->operation = j.value("operation", std::string());
    out->created = j.value("created", std::string());
    out->pid = IntegerOr(j, "pid", 0);
    out->hostname = j.value("hostname", std::string());
    return !out->id.empty();
  } catch (const std::exception&) {
    return false;
  }
}

class LocalStateLock : public StateLock {
 public:
  LocalStateLock(int fd, std::string lock_path, LockInfo info)
      : fd_(fd), lock_path_(std::move(lock_path)), info_(std::move(info)) {}

  ~LocalStateLock() override {
    // Unlink before close: a process that opened this inode and is waiting
    // to flock it then finds the path gone and retries on a fresh file.
    // Unlink only when the path is still ours: after a force-unlock it may
    // name another process's lock, which must survive our release.
    struct stat mine, now;
    if (::fstat(fd_.get(), &mine) == 0 && ::stat(lock_path_.c_str(), &now) == 0 &&
        SameFile(mine, now)) {
      ::unlink(lock_path_.c_str());
    }
  }

  const LockInfo& info() const override { return info_; }

 private:
  Fd fd_;
  std::string lock_path_;
  LockInfo info_;
};

class LocalStateStore : public StateStore {
 public:
  explicit LocalStateStore(std::string path)
      : path_(std::move(path)),
        dir_(DirName(path_)),
        base_(BaseName(path_)),
        backup_path_(path_ + ".backup"),
        lock_path_(path_ + ".lock"),
        events_path_(path_ + ".events"),
        bench_path_(path_ + ".bench") {}

  Result<State> Load() override;
  Status Save(const State& state) override;
  Result<std::unique_ptr<StateLock>> Lock(const std::string& operation) override;
  Status ForceUnlock(const std::string& lock_id) override;
  std::string Describe() const override { return path_; }
  Result<std::vector<StateVersion>> History() override;
  Result<State> LoadSerial(uint64_t serial) override;
  Status AppendEvent(const json& event) override;
  Result<std::vector<json>> Events(const std::string& since) override;
  Status AppendBenchRun(const json& run) override;
  Result<std::vector<json>> BenchRuns(const std::string& deployment) override;

 private:
  Result<State> LoadFile(const std::string& path) const;
  Status EnsureDir() const;
  Status Unreadable(const std::string& why) const;
  void RemoveStaleTemps() const;
  Status WriteBackup(pid_t pid) const;
  std::string HeldMessage(int fd) const;
  // Rewrites the events file with the last kEventsKept of the events in
  // `text`. REQUIRES: the caller holds the flock of the events file.
  Status RewriteEvents(const std::string& text) const {
    return RewriteKept(events_path_, text, kEventsKept, "events");
  }
  // Rewrites `path` with the last `kept` lines of `text` (JSON objects).
  // REQUIRES: the caller holds the flock of `path`.
  Status RewriteKept(const std::string& path, const std::string& text, size_t kept,
                     const std::string& what) const;
  // Appends `line` to `path` under its flock; above `rewrite_above` lines,
  // keeps the last `kept`.
  Status AppendKept(const std::string& path, const std::string& line, size_t kept,
                    size_t rewrite_above, const std::string& what) const;

  const std::string path_;
  const std::string dir_;
  const std::string base_;
  const std::string backup_path_;
  const std::string lock_path_;
  const std::string events_path_;
  const std::string bench_path_;
};

// The state directory, with a `.gitignore` of `*` when fleet made it or it
// is the default `.fleet`: a manifests repo must never commit a state file
// (it holds what undo needs, node facts) or a saved plan by accident.
Status LocalStateStore::EnsureDir() const {
  struct stat st;
  const bool existed = ::stat(dir_.c_str(), &st) == 0;
  Status s = MakeDirs(dir_);
  if (!s.ok()) return s;
  if (existed && BaseName(dir_) != ".fleet") return Status::OK();
  const std::string ignore = dir_ + "/.gitignore";
  if (::stat(ignore.c_str(), &st) == 0) return Status::OK();
  Fd fd(OpenRetry(ignore.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) return errno == EEXIST ? Status::OK() : SysError("create", ignore, errno);
  s = WriteAll(fd.get(),
               "# fleet's state, its backup, lock and saved plans: never commit them\n*\n", ignore);
  if (s.ok() && fd.Close() != 0) s = SysError("close", ignore, errno);
  return s;
}

Status LocalStateStore::Unreadable(const std::string& why) const {
  struct stat st;
  std::string hint = ::stat(backup_path_.c_str(), &st) == 0
                         ? "the previous version is at " + backup_path_
                         : "no previous version exists at " + backup_path_;
  return Status::Error("cannot read state file " + path_ + ": " + why + "; " + hint);
}

Result<State> LocalStateStore::Load() {
  Fd fd(OpenRetry(path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      State empty;
      empty.lineage = NewLineage();
      return empty;
    }
    // No descriptor or memory left in this process: the reader's failure,
    // not the file's (manifests/own_fault.h; the store depends only on
    // status.h, hence the short list here). A watch judges nothing on it.
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
      return Status::OwnFault(Unreadable(ErrnoText(errno)).message());
    return Unreadable(ErrnoText(errno));
  }
  std::string text;
  Status s = ReadAll(fd.get(), path_, &text);
  if (!s.ok()) return Unreadable(s.message());
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception& e) {
    return Unreadable(std::string("not valid JSON (") + e.what() + ")");
  }
  auto st = State::FromJson(j);
  if (!st.ok()) {
    // A newer fleet's file is intact; pointing at the backup would mislead.
    auto v = j.is_object() ? j.find("version") : j.end();
    if (j.is_object() && v != j.end() && v->is_number_integer() &&
        v->get<int64_t>() > State::kVersion) {
      return st.status().Prefixed("state file " + path_);
    }
    return Unreadable(st.status().message());
  }
  return st;
}

// Removes temp files of writers that died mid-save. A writer that is still
// alive (only possible if a caller ignored the lock) keeps its file.
void LocalStateStore::RemoveStaleTemps() const {
  DIR* d = ::opendir(dir_.c_str());
  if (d == nullptr) return;
  const std::string prefixes[] = {base_ + ".tmp.", base_ + ".backup.tmp.", base_ + ".events.tmp.",
                                  base_ + ".bench.tmp."};
  const pid_t self = ::getpid();
  while (struct dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    for (const auto& prefix : prefixes) {
      if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix)) continue;
      std::string digits = name.substr(prefix.size());
      if (digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 9)
        continue;  // not ours
      pid_t pid = static_cast<pid_t>(std::stol(digits));
      if (pid == self || (::kill(pid, 0) != 0 && errno == ESRCH)) {
        ::unlink((dir_ + "/" + name).c_str());
      }
    }
  }
  ::closedir(d);
}

// Makes <path>.backup the current <path> (if any), atomically: a hard link
// (or a copy where links are refused) under a temp name, renamed into place.
Status LocalStateStore::WriteBackup(pid_t pid) const {
  const std::string tmp = backup_path_ + ".tmp." + std::to_string(pid);
  ::unlink(tmp.c_str());
  if (::link(path_.c_str(), tmp.c_str()) != 0) {
    if (errno == ENOENT) return Status::OK();  // first save: nothing to keep
    // Some filesystems refuse hard links: copy instead.
    Fd src(OpenRetry(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (src.get() < 0) {
      if (errno == ENOENT) return Status::OK();
      return SysError("open", path_, errno);
    }
    std::string old;
    Status s = ReadAll(src.get(), path_, &old);
    if (!s.ok()) return s;
    Fd dst(OpenRetry(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (dst.get() < 0) return SysError("create", tmp, errno);
    s = WriteAll(dst.get(), old, tmp);
    if (s.ok()) s = FsyncFd(dst.get(), tmp);
    if (s.ok() && dst.Close() != 0) s = SysError("close", tmp, errno);
    if (!s.ok()) {
      ::unlink(tmp.c_str());
      return s;
    }
  }
  // The link shares the old file's inode; it was written 0600 by us, but a
  // hand-made or restored file may not have been.
  if (::chmod(tmp.c_str(), 0600) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return SysError("chmod", tmp, err);
  }
  if (::rename(tmp.c_str(), backup_path_.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return SysError("rename to", backup_path_, err);
  }
  // rename() is a no-op when both names already link the same inode (a save
  // killed right after its backup step); the temp name then still exists.
  ::unlink(tmp.c_str());
  return Status::OK();
}

Status LocalStateStore::Save(const State& state) {
  std::string text;
  try {
    json j = state.ToJson();
    // Never write what Load would refuse (duplicate addresses, no lineage).
    auto check = State::FromJson(j);
    if (!check.ok()) {
      return check.status().Prefixed("refusing to save an invalid state to " + path_);
    }
    // What a node printed may hold bytes that are not UTF-8: saved as
    // U+FFFD rather than failing to record a step that was done.
    text = j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (const std::exception& e) {
    return Status::Error("cannot serialize the state for " + path_ + ": " + e.what());
  }

  Status s = EnsureDir();
  if (!s.ok()) return s;
  RemoveStaleTemps();

  // Mode 0600 whatever the umask: the state holds what undo needs and must
  // be readable by its owner only. The backup of the old state is taken
  // once the new one is durable, before it replaces the old.
  const pid_t pid = ::getpid();
  AtomicWriteOptions options;
  options.before_rename = [&] { return WriteBackup(pid); };
  bool renamed = false;
  s = WriteFileAtomic(path_, text, options, &renamed);
  if (!s.ok() && !renamed) return s.Prefixed("saving state");
  if (!s.ok()) return s.Prefixed("state written to " + path_ + " but may not survive a power loss");
  return Status::OK();
}

std::string LocalStateStore::HeldMessage(int fd) const {
  LockInfo info;
  std::string text;
  // The holder writes its info right after taking the flock; give it a few
  // milliseconds before calling the lock anonymous.
  for (int i = 0; i < 20; ++i) {
    if (ReadAll(fd, lock_path_, &text).ok() && LockInfoFromText(text, &info)) {
      return "state is locked by " + info.holder + " (" + info.operation + ") since " +
             info.created + ", lock id " + info.id +
             "; if that process is gone, run: fleet force-unlock " + info.id;
    }
    RealClock()->SleepFor(std::chrono::milliseconds(1));
  }
  return "state is locked by another process, which has not recorded who it "
         "is in " +
         lock_path_;
}

Result<std::unique_ptr<StateLock>> LocalStateStore::Lock(const std::string& operation) {
  Status s = EnsureDir();
  if (!s.ok()) return s;
  // Each retry means the file we flocked was unlinked under us (released or
  // force-unlocked); a handful is plenty unless something is badly wrong.
  for (int attempt = 0; attempt < 100; ++attempt) {
    Fd fd(OpenRetry(lock_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600));
    if (fd.get() < 0) return SysError("open lock file", lock_path_, errno);
    if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
      if (errno == EWOULDBLOCK) return Status::LockHeld(HeldMessage(fd.get()));
      if (errno == EINTR) continue;
      return SysError("flock", lock_path_, errno);
    }
    struct stat mine, now;
    if (::fstat(fd.get(), &mine) != 0) return SysError("fstat", lock_path_, errno);
    if (::stat(lock_path_.c_str(), &now) != 0 || !SameFile(mine, now)) {
      continue;  // unlinked after we opened it: that lock is dead, retry
    }
    LockInfo info = ThisProcessLock(operation);
    std::string text;
    try {
      text = LockInfoToJson(info).dump() + "\n";
    } catch (const std::exception& e) {
      return Status::Error("cannot serialize lock info: " + std::string(e.what()));
    }
    // A dead holder's info may still be in the file: overwrite it whole.
    if (::fchmod(fd.get(), 0600) != 0) s = SysError("chmod", lock_path_, errno);
    if (s.ok() && ::ftruncate(fd.get(), 0) != 0) {
      s = SysError("truncate", lock_path_, errno);
    }
    if (s.ok() && ::lseek(fd.get(), 0, SEEK_SET) < 0) {
      s = SysError("seek", lock_path_, errno);
    }
    if (s.ok()) s = WriteAll(fd.get(), text, lock_path_);
    if (s.ok()) s = FsyncFd(fd.get(), lock_path_);
    if (!s.ok()) {
      ::unlink(lock_path_.c_str());
      return s;
    }
    return std::unique_ptr<StateLock>(
        new LocalStateLock(fd.release(), lock_path_, std::move(info)));
  }
  return Status::Error("cannot lock " + lock_path_ + ": the lock file keeps being replaced");
}

Status LocalStateStore::ForceUnlock(const std::string& lock_id) {
  if (lock_id.empty()) return Status::Error("force-unlock needs a lock id");
  Fd fd(OpenRetry(lock_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      return Status::Error("no lock held on " + path_ + " (no " + lock_path_ + ")");
    }
    return SysError("open lock file", lock_path_, errno);
  }
  std::string text;
  Status s = ReadAll(fd.get(), lock_path_, &text);
  if (!s.ok()) return s;
  LockInfo info;
  if (!LockInfoFromText(text, &info)) {
    return Status::Error("lock file " + lock_path_ +
                         " holds no readable lock id; not breaking it (if no "
                         "fleet runs, the next command takes the lock anyway)");
  }
  if (info.id != lock_id) {
    return Status::Error("lock id " + lock_id +
                         " does not match the current "
                         "lock on " +
                         path_ + ": id " + info.id + ", held by " + info.holder + " (" +
                         info.operation + ") since " + info.created);
  }
  // Unlink only the file we read: if it was replaced meanwhile, that newer
  // lock has another id and must survive.
  struct stat mine, now;
  if (::fstat(fd.get(), &mine) != 0 || ::stat(lock_path_.c_str(), &now) != 0 ||
      !SameFile(mine, now)) {
    return Status::Error("the lock on " + path_ + " changed while breaking it; check it again");
  }
  if (::unlink(lock_path_.c_str()) != 0) {
    return SysError("remove lock file", lock_path_, errno);
  }
  return Status::OK();
}

// A kept version (the current file or its backup), parsed.
Result<State> LocalStateStore::LoadFile(const std::string& path) const {
  Fd fd(OpenRetry(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return SysError("open", path, errno);
  std::string text;
  Status s = ReadAll(fd.get(), path, &text);
  if (!s.ok()) return s;
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) return Status::Error(path + " is not valid JSON");
  auto st = State::FromJson(j);
  if (!st.ok()) return st.status().Prefixed(path);
  return st;
}

Result<std::vector<StateVersion>> LocalStateStore::History() {
  std::vector<StateVersion> out;
  for (const std::string& p : {backup_path_, path_}) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) continue;
    Result<State> s = LoadFile(p);
    if (!s.ok()) return s.status();
    StateVersion v;
    v.serial = s->serial;
    v.lineage = s->lineage;
    char buf[32];
    struct tm tm;
    gmtime_r(&st.st_mtime, &tm);
    strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
    v.saved_at = buf;
    v.saved_by = p == path_ ? "(current)" : "(backup)";
    if (!out.empty() && out.back().serial == v.serial) out.pop_back();
    out.push_back(v);
  }
  return out;
}

Result<State> LocalStateStore::LoadSerial(uint64_t serial) {
  for (const std::string& p : {path_, backup_path_}) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) continue;
    Result<State> s = LoadFile(p);
    if (s.ok() && s->serial == serial) return s;
  }
  return Status::Error("serial " + std::to_string(serial) + " is not kept in " + path_ +
                       ": the local backend keeps the current state and the one before it "
                       "(the postgres backend keeps every serial)");
}

// The lines of `text` that are JSON objects, in order; a torn or otherwise
// unreadable line is left out.
std::vector<json> EventLines(const std::string& text) {
  std::vector<json> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) {
      json j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(start),
                           text.begin() + static_cast<std::ptrdiff_t>(end), nullptr, false);
      if (!j.is_discarded() && j.is_object()) out.push_back(std::move(j));
    }
    start = end + 1;
  }
  return out;
}

Status LocalStateStore::RewriteKept(const std::string& path, const std::string& text,
                                    size_t kept_count, const std::string& what) const {
  std::vector<json> lines = EventLines(text);
  const size_t skip = lines.size() > kept_count ? lines.size() - kept_count : 0;
  std::string kept;
  for (size_t i = skip; i < lines.size(); ++i)
    kept += lines[i].dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  bool renamed = false;
  Status s = WriteFileAtomic(path, kept, {}, &renamed);
  if (!s.ok() && !renamed)
    return s.Prefixed("keeping the last " + std::to_string(kept_count) + " " + what);
  return s;
}

Status LocalStateStore::AppendEvent(const json& event) {
  Status s = CheckEvent(event);
  if (!s.ok()) return s;
  std::string line;
  try {
    // One line: dump() without indent escapes every newline in a string.
    line = event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (const std::exception& e) {
    return Status::Error("cannot serialize the event for " + events_path_ + ": " + e.what());
  }
  return AppendKept(events_path_, line, kEventsKept, kEventsRewriteAbove, "events");
}

Status LocalStateStore::AppendKept(const std::string& path, const std::string& line, size_t kept,
                                   size_t rewrite_above, const std::string& what) const {
  Status s = EnsureDir();
  if (!s.ok()) return s;
  // Each retry means the file was rewritten (renamed over) while we waited
  // for its flock.
  for (int attempt = 0; attempt < 100; ++attempt) {
    Fd fd(OpenRetry(path.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600));
    if (fd.get() < 0) return SysError("open", path, errno);
    while (::flock(fd.get(), LOCK_EX) != 0) {
      if (errno != EINTR) return SysError("flock", path, errno);
    }
    struct stat mine, now;
    if (::fstat(fd.get(), &mine) != 0) return SysError("fstat", path, errno);
    if (::stat(path.c_str(), &now) != 0 || !SameFile(mine, now)) continue;
    // The umask may have stripped bits, or the file was made by hand.
    if ((mine.st_mode & 07777) != 0600 && ::fchmod(fd.get(), 0600) != 0)
      return SysError("chmod", path, errno);
    std::string out = line;
    if (mine.st_size > 0) {
      // A torn last line (a crash mid-append) must not swallow this one.
      char last = '\n';
      ssize_t n;
      do {
        n = ::pread(fd.get(), &last, 1, mine.st_size - 1);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return SysError("read", path, errno);
      if (n == 1 && last != '\n') out = "\n" + out;
    }
    s = WriteAll(fd.get(), out, path);
    if (!s.ok()) return s;
    std::string text;
    s = ReadAll(fd.get(), path, &text);
    if (!s.ok()) return s;
    if (static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) > rewrite_above)
      return RewriteKept(path, text, kept, what);
    return Status::OK();
  }
  return Status::Error("cannot append to " + path + ": the file keeps being replaced");
}

Status LocalStateStore::AppendBenchRun(const json& run) {
  Status s = CheckBenchRun(run);
  if (!s.ok()) return s;
  Result<std::vector<json>> kept = BenchRuns("");
  if (!kept.ok()) return kept.status();
  for (const json& r : *kept)
    if (r.value("id", "") == run["id"].get<std::string>()) return Status::OK();
  std::string line;
  try {
    line = run.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
  } catch (const std::exception& e) {
    return Status::Error("cannot serialize the bench run for " + bench_path_ + ": " + e.what());
  }
  return AppendKept(bench_path_, line, kBenchRunsKept, kBenchRunsRewriteAbove, "bench runs");
}

Result<std::vector<json>> LocalStateStore::BenchRuns(const std::string& deployment) {
  Fd fd(OpenRetry(bench_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::vector<json>{};
    return SysError("open", bench_path_, errno);
  }
  std::string text;
  Status s = ReadAll(fd.get(), bench_path_, &text);
  if (!s.ok()) return s;
  std::vector<json> out;
  for (json& r : EventLines(text))
    if (deployment.empty() || r.value("deployment", "") == deployment) out.push_back(std::move(r));
  return out;
}

Result<std::vector<json>> LocalStateStore::Events(const std::string& since) {
  std::optional<int64_t> from;
  if (!since.empty()) {
    from = ParseRfc3339Micros(since);
    if (!from)
      return Status::Error("'" + since +
                           "' is not an RFC 3339 time (such as 2026-11-29T17:35:24Z)");
  }
  Fd fd(OpenRetry(events_path_.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return std::vector<json>{};
    return SysError("open", events_path_, errno);
  }
  std::string text;
  Status s = ReadAll(fd.get(), events_path_, &text);
  if (!s.ok()) return s;
  std::vector<json> events = EventLines(text);
  if (!from) return events;
  std::vector<json> out;
  for (json& e : events) {
    const auto time = e.find("time");
    if (time == e.end() || !time->is_string()) continue;
    const auto at = ParseRfc3339Micros(time->get<std::string>());
    if (at && *at >= *from) out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

std::unique_ptr<StateStore> MakeLocalStateStore(const std::string& path) {
  return std::make_unique<LocalStateStore>(path);
}

}  // namespace fleet
