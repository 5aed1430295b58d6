// StateStore: where the state lives, and the lock that guards it.
//
// The local backend keeps one JSON file (mode 0600). Writes are atomic: temp
// file in the same directory, fsync, rename over the old file, fsync of the
// directory; the previous version is kept as `<path>.backup`. A crash at any
// moment leaves either the old or the new state, never a torn one.
//
// Beside the state, a store keeps a history of events (what `fleet watch
// --heal` did: heal, quarantine, heal_wait, sync), appended without the
// state lock.
#ifndef FLEET_STATE_STATE_STORE_H_
#define FLEET_STATE_STATE_STORE_H_

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/clock.h"
#include "src/status.h"
#include "state/state.h"

namespace fleet {

struct LockInfo {
  std::string id;         // random id, for force-unlock
  std::string holder;     // "user@host pid 1234"
  std::string operation;  // "apply", "destroy", "state rm", ...
  std::string created;    // RFC 3339
  int pid = 0;
  std::string hostname;
};

// The user running this process ("uid1000" when it has no passwd entry).
std::string ProcessUserName();
// This machine's hostname ("unknown-host" when gethostname fails).
std::string ProcessHostName();
// Who holds a lock or saved a state: "user@host pid N" for this process.
std::string ProcessHolder();
// A lock record for `operation` held by this process, now: a random 32-hex
// id (for force-unlock), "user@host pid N" as holder, the RFC 3339 time.
// Both stores take their locks with it, so a holder reads the same in each.
LockInfo ThisProcessLock(const std::string& operation);

// An acquired lock; released by the destructor or when the process dies
// (the kernel drops the flock), so a kill -9 never leaves the state locked.
class StateLock {
 public:
  virtual ~StateLock() = default;
  virtual const LockInfo& info() const = 0;
};

// One kept version of the state (fleet state history).
struct StateVersion {
  uint64_t serial = 0;
  std::string lineage;
  std::string saved_at;  // RFC 3339 of its last write
  std::string saved_by;  // "user@host pid N (apply)" where known
  int writes = 1;        // saves with this serial (one per finished step)
};

class StateStore {
 public:
  virtual ~StateStore() = default;

  // Reads the state. A missing file is an empty state with a fresh lineage
  // and serial 0 (not yet written). An unparseable file is an error that
  // names the file and points at the backup.
  virtual Result<State> Load() = 0;

  // Writes `state` atomically (see above). REQUIRES: the caller holds the lock.
  virtual Status Save(const State& state) = 0;

  // Takes the lock without waiting. When another process holds it, the error
  // says who: "state is locked by root@box pid 42 (apply) since <time>, lock
  // id <id>; if that process is gone, run: fleet force-unlock <id>".
  virtual Result<std::unique_ptr<StateLock>> Lock(const std::string& operation) = 0;

  // Breaks the lock whose id is `lock_id`. Fails when no lock is held or the
  // id does not match (so a stale command cannot break a newer lock).
  virtual Status ForceUnlock(const std::string& lock_id) = 0;

  virtual std::string Describe() const = 0;  // e.g. the file path

  // The versions this store keeps, oldest first (the postgres backend keeps
  // every serial; the local file keeps the current one and its backup).
  virtual Result<std::vector<StateVersion>> History() = 0;

  // The last version saved with `serial`; an error when it is not kept.
  virtual Result<State> LoadSerial(uint64_t serial) = 0;

  // Appends `event` (a JSON object holding at least "time", RFC 3339 UTC, and "event") to this
  // store's history of events. Does not need the lock; safe against concurrent appenders.
  // An event without them (see CheckEvent) is refused. The local backend keeps the last
  // kEventsKept events; the postgres backend keeps every one.
  virtual Status AppendEvent(const nlohmann::json& event) = 0;

  // The kept events whose "time" is at or after `since` (RFC 3339; "" = all), oldest first.
  // Oldest first is the order they were appended in. A `since` that is not RFC 3339 is an
  // error; no events yet is an empty list.
  virtual Result<std::vector<nlohmann::json>> Events(const std::string& since) = 0;

  // Keeps one bench run (issue #47) in a history of its own: `run` is a JSON
  // object with "id", "time" (RFC 3339), "deployment", "node", "profile",
  // "outcome" and "record" (the whole run, src/engine/bench_record.h). The
  // local backend keeps the last kBenchRunsKept runs in a file beside the
  // state; the postgres backend keeps every one in its bench_runs table
  // (state/bench_runs.sql). A run whose id is kept already is not kept twice.
  virtual Status AppendBenchRun(const nlohmann::json& run) = 0;

  // The kept bench runs of `deployment` ("" = all), oldest first, each as
  // AppendBenchRun was given it.
  virtual Result<std::vector<nlohmann::json>> BenchRuns(const std::string& deployment) = 0;
};

// The local backend keeps this many bench runs (rewritten above
// kBenchRunsRewriteAbove lines, as the events).
constexpr size_t kBenchRunsKept = 1000;
constexpr size_t kBenchRunsRewriteAbove = 1100;

// What AppendBenchRun requires of `run`: the keys above, "id" and
// "deployment" non-empty strings, "time" RFC 3339, "record" an object.
Status CheckBenchRun(const nlohmann::json& run);

// The local backend keeps this many events: when its file holds more than
// kEventsRewriteAbove lines, it is rewritten with the last kEventsKept.
constexpr size_t kEventsKept = 1000;
constexpr size_t kEventsRewriteAbove = 1100;

// What AppendEvent requires of `event`: a JSON object whose "time" is an RFC
// 3339 time (ParseRfc3339Micros) and whose "event" is a non-empty string.
// The error says what is missing.
Status CheckEvent(const nlohmann::json& event);

// Microseconds since the Unix epoch of an RFC 3339 date-time such as
// "2026-11-29T17:35:24Z", "2026-11-29T17:35:24.25Z" or
// "2026-11-29T18:35:24+01:00" (the offset is honoured; 't', 'z' and a
// fraction of any length, cut to microseconds, are accepted). nullopt when
// `text` is not one (a bad field, a day past the month's end, no offset).
std::optional<int64_t> ParseRfc3339Micros(const std::string& text);

// Lock(), retried until `timeout_ms` passed (0: one try). The last refusal,
// naming the holder, is the error when the time runs out. The waiting is
// `clock`'s; the real clock by default, so that the rounds that do not
// carry a clock yet (idle, wake) keep their call. REQUIRES: clock != nullptr.
Result<std::unique_ptr<StateLock>> LockWithTimeout(StateStore* store, const std::string& operation,
                                                   int64_t timeout_ms, Clock* clock = RealClock());

// The local file backend. `path` is the state file; its directory is created
// (mode 0700) on first save. The lock file is `<path>.lock`. The events are
// JSON lines in `<path>.events` (mode 0600), appended under an flock of that
// file (not the state lock), one write() per line; a torn last line (a crash
// mid-append) is skipped when read, and the next append starts a new line.
std::unique_ptr<StateStore> MakeLocalStateStore(const std::string& path);

// The PostgreSQL backend (state/postgres_state_store.cc). The libpq
// connection string is read from the environment variable `conn_env` (libpq's
// own PG* variables, ~/.pgpass and PGSERVICE files work as usual); it never
// appears in a message. `schema` is created on first use.
std::unique_ptr<StateStore> MakePostgresStateStore(const std::string& conn_env,
                                                   const std::string& schema);

}  // namespace fleet

#endif  // FLEET_STATE_STATE_STORE_H_
