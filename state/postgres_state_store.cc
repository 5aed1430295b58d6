// The PostgreSQL backend of StateStore (see state/state_store.h).
//
// Tables, all in the manifest's schema (created on first use):
//   schema_version(version)   the layout of these tables; a newer one is refused
//   states(id, lineage, serial, saved_at, saved_by, body)
//                             insert-only: every save is a new row, so every
//                             serial (and every step's checkpoint) is kept; the
//                             current state is the row with the highest id
//   lock(name, id, operation, holder, username, hostname, pid, backend_pid, created)
//                             who holds the lock, for messages and force-unlock
//   bench_runs(id, run_id, time, deployment, node, profile, outcome, image,
//              model_revision, spec_hash, record)
//                             every bench run (AppendBenchRun), made on the
//                             first one from state/bench_runs.sql, embedded
//                             at build time (kBenchRunsSql)
//   events(id, time, body)    the history of events (AppendEvent), kept
//                             whole; read in id order. A schema made before
//                             it gets it on its first append (layout
//                             version 1 still: an older fleet ignores it)
//
// The lock itself is a session advisory lock (pg_try_advisory_lock) on a key
// derived from the schema name: the server drops it when the holder's
// session ends (exit, kill -9, lost network once TCP keepalives give up), so
// a dead holder never leaves the state locked. The lock row may outlive its
// holder; it is only believed while the advisory lock is held.
//
// Every save checks, in the same statement, that this session holds the
// lock and that the database's latest state has the same lineage and no
// higher serial: a holder whose lock was broken cannot write.
//
// The connection string comes from the environment and never appears in a
// message: libpq's errors are redacted before they leave this file.
#include <libpq-fe.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "state/bench_runs_sql.h"
#include "state/state_store.h"

namespace fleet {

namespace {

using nlohmann::json;

constexpr int kSchemaVersion = 1;

// A PGresult freed on scope exit.
class PgResult {
 public:
  explicit PgResult(PGresult* r = nullptr) : r_(r) {}
  ~PgResult() {
    if (r_) PQclear(r_);
  }
  PgResult(PgResult&& o) noexcept : r_(o.r_) { o.r_ = nullptr; }
  PgResult(const PgResult&) = delete;
  PgResult& operator=(PgResult&& o) noexcept {
    std::swap(r_, o.r_);
    return *this;
  }
  PGresult* get() const { return r_; }
  int rows() const { return PQntuples(r_); }
  std::string at(int row, int col) const { return PQgetvalue(r_, row, col); }
  bool null(int row, int col) const { return PQgetisnull(r_, row, col); }
  std::string sqlstate() const {
    const char* s = PQresultErrorField(r_, PG_DIAG_SQLSTATE);
    return s ? s : "";
  }

 private:
  PGresult* r_;
};

// FNV-1a: the advisory lock key of a schema, stable across fleet builds.
int64_t LockKey(const std::string& schema) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : "fleet-state:" + schema) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return static_cast<int64_t>(h);
}

class PostgresStateStore;

class PostgresStateLock : public StateLock {
 public:
  PostgresStateLock(PostgresStateStore* store, LockInfo info)
      : store_(store), info_(std::move(info)) {}
  ~PostgresStateLock() override;
  const LockInfo& info() const override { return info_; }

 private:
  PostgresStateStore* store_;
  LockInfo info_;
};

class PostgresStateStore : public StateStore {
 public:
  PostgresStateStore(std::string conn_env, std::string schema)
      : conn_env_(std::move(conn_env)),
        schema_(std::move(schema)),
        q_("\"" + schema_ + "\""),
        key_(LockKey(schema_)) {}
  ~PostgresStateStore() override {
    if (conn_) PQfinish(conn_);
  }

  Result<State> Load() override;
  Status Save(const State& state) override;
  Result<std::unique_ptr<StateLock>> Lock(const std::string& operation) override;
  Status ForceUnlock(const std::string& lock_id) override;
  std::string Describe() const override {
    return "PostgreSQL schema " + schema_ + " via $" + conn_env_;
  }
  Result<std::vector<StateVersion>> History() override;
  Result<State> LoadSerial(uint64_t serial) override;
  Status AppendEvent(const json& event) override;
  Result<std::vector<json>> Events(const std::string& since) override;
  Status AppendBenchRun(const json& run) override;
  Result<std::vector<json>> BenchRuns(const std::string& deployment) override;

  void Release(const std::string& lock_id);

 private:
  Status Connect();
  Status EnsureSchema();
  // CREATE TABLE IF NOT EXISTS of the events table and its index.
  std::string EventsDdl() const;
  // Runs EventsDdl() in a schema made before it, under the lock of
  // EnsureSchema. REQUIRES: connected, mu_ held.
  Status CreateEventsTable();
  // state/bench_runs.sql in this schema, under the same lock as the events
  // table's creation.
  Status CreateBenchRunsTable();
  std::string Redact(std::string text) const;
  Status ErrorOf(const std::string& what, const PgResult& r) const;
  // Runs one statement. On failure, `sqlstate` (when given) gets the
  // server's SQLSTATE of it ("" when there was none, e.g. no connection).
  Result<PgResult> Exec(const std::string& what, const std::string& sql,
                        const std::vector<std::string>& params = {},
                        std::string* sqlstate = nullptr);
  Result<State> ParseBody(const std::string& body, const std::string& what) const;
  std::string HeldMessage();
  std::string KeyHeld(const std::string& alias) const;
  std::string LockedByUs() const;

  const std::string conn_env_;
  const std::string schema_;
  const std::string q_;  // the schema, quoted for SQL
  const int64_t key_;
  std::string conninfo_;           // never printed
  std::vector<std::string> hide_;  // secrets to redact from libpq's text
  PGconn* conn_ = nullptr;
  std::string saved_by_;
  std::recursive_mutex mu_;  // one statement at a time on the connection
};

// libpq's text without the secrets, on one line.
std::string PostgresStateStore::Redact(std::string text) const {
  for (const std::string& secret : hide_) {
    if (secret.size() < 3) continue;
    for (size_t at; (at = text.find(secret)) != std::string::npos;)
      text.replace(at, secret.size(), "***");
  }
  std::string line;
  for (char c : text) {
    if (c == '\n' || c == '\t') c = ' ';
    if (c == ' ' && !line.empty() && line.back() == ' ') continue;
    line.push_back(c);
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  return line;
}

// Server notices ("terminating connection due to ...") would go to stderr
// in the middle of the apply's output; the error that follows says it.
void IgnoreNotice(void*, const char*) {}

Status PostgresStateStore::ErrorOf(const std::string& what, const PgResult& r) const {
  std::string msg = r.get() ? PQresultErrorMessage(r.get()) : "";
  if (msg.empty() && conn_) msg = PQerrorMessage(conn_);
  return Status::Error(what + " in the state database (" + Describe() + "): " + Redact(msg));
}

Status PostgresStateStore::Connect() {
  if (conn_ && PQstatus(conn_) == CONNECTION_OK) return Status::OK();
  if (!std::regex_match(schema_, std::regex("[a-z_][a-z0-9_]{0,62}")))
    return Status::Error("state schema '" + schema_ + "' must be lower-case letters, digits, _");
  if (conn_) {
    return Status::Error("lost the connection to the state database (" + Describe() +
                         "): " + Redact(PQerrorMessage(conn_)));
  }
  const char* env = std::getenv(conn_env_.c_str());
  if (env == nullptr) {
    return Status::Error("the state is in PostgreSQL but $" + conn_env_ +
                         " is not set: set it to a libpq connection string, e.g. "
                         "'host=db.lan dbname=fleet user=fleet sslmode=verify-full' (the "
                         "password from ~/.pgpass or PGPASSWORD, or 'service=NAME' for "
                         "~/.pg_service.conf)");
  }
  conninfo_ = env;
  hide_ = {conninfo_};
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(conninfo_.c_str(), &err);
  if (opts == nullptr) {
    if (err) PQfreemem(err);  // its text quotes the string: not shown
    return Status::Error("$" + conn_env_ +
                         " is not a valid libpq connection string (the details are withheld: "
                         "they would show it)");
  }
  for (PQconninfoOption* o = opts; o->keyword; ++o)
    if (o->val && std::string(o->keyword) == "password") hide_.push_back(o->val);
  PQconninfoFree(opts);
  const char* keys[] = {"dbname", "fallback_application_name", nullptr};
  const char* vals[] = {conninfo_.c_str(), "fleet", nullptr};
  conn_ = PQconnectdbParams(keys, vals, /*expand_dbname=*/1);
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Status::Error("cannot connect to the state database ($" + conn_env_ +
                         "): " + Redact(PQerrorMessage(conn_)));
  }
  // Server-side keepalives: a holder lost with its network loses its lock
  // after about a minute (ignored on Unix sockets).
  PgResult r(PQexec(conn_,
                    "SET tcp_keepalives_idle = 30; SET tcp_keepalives_interval = 10; "
                    "SET tcp_keepalives_count = 3"));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) return ErrorOf("setting keepalives", r);
  return EnsureSchema();
}

// Creates the schema and tables on first use, under a transaction-level
// advisory lock so that two first users do not race; refuses a newer layout.
Status PostgresStateStore::EnsureSchema() {
  std::string check = "SELECT max(version) FROM " + q_ + ".schema_version";
  PgResult r(PQexec(conn_, check.c_str()));
  if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) {
    // 3F000 no such schema, 42P01 no such table: first use.
    if (r.sqlstate() != "3F000" && r.sqlstate() != "42P01")
      return ErrorOf("reading the schema version", r);
    const std::string ddl =
        "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(key_ ^ 1) +
        "); CREATE SCHEMA IF NOT EXISTS " + q_ + "; CREATE TABLE IF NOT EXISTS " + q_ +
        ".schema_version (version integer NOT NULL, applied_at timestamptz NOT NULL "
        "DEFAULT now()); CREATE TABLE IF NOT EXISTS " +
        q_ +
        ".states (id bigserial PRIMARY KEY, lineage text NOT NULL, serial bigint NOT NULL, "
        "saved_at timestamptz NOT NULL DEFAULT now(), saved_by text NOT NULL, body text NOT "
        "NULL); CREATE INDEX IF NOT EXISTS states_serial ON " +
        q_ + ".states (serial, id); CREATE TABLE IF NOT EXISTS " + q_ +
        ".lock (name text PRIMARY KEY, id text NOT NULL, operation text NOT NULL, holder "
        "text NOT NULL, username text NOT NULL, hostname text NOT NULL, pid integer NOT NULL, "
        "backend_pid integer NOT NULL, created timestamptz NOT NULL); " +
        EventsDdl() + " INSERT INTO " + q_ + ".schema_version (version) SELECT " +
        std::to_string(kSchemaVersion) + " WHERE NOT EXISTS (SELECT 1 FROM " + q_ +
        ".schema_version); COMMIT;";
    PgResult c(PQexec(conn_, ddl.c_str()));
    if (PQresultStatus(c.get()) != PGRES_COMMAND_OK) {
      PgResult rb(PQexec(conn_, "ROLLBACK"));
      return ErrorOf("creating schema " + schema_, c);
    }
    r = PgResult(PQexec(conn_, check.c_str()));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) return ErrorOf("reading the schema version", r);
  }
  const int version = r.null(0, 0) ? 0 : std::atoi(r.at(0, 0).c_str());
  if (version > kSchemaVersion) {
    return Status::Error("the state database's schema " + schema_ + " has layout version " +
                         std::to_string(version) + ", written by a newer fleet (this one knows " +
                         std::to_string(kSchemaVersion) + "): upgrade fleet");
  }
  return Status::OK();
}

std::string PostgresStateStore::EventsDdl() const {
  return "CREATE TABLE IF NOT EXISTS " + q_ +
         ".events (id bigserial PRIMARY KEY, time timestamptz NOT NULL, body jsonb NOT NULL); "
         "CREATE INDEX IF NOT EXISTS events_time ON " +
         q_ + ".events (time);";
}

Status PostgresStateStore::CreateBenchRunsTable() {
  std::string ddl(kBenchRunsSql, kBenchRunsSqlSize);
  for (size_t at; (at = ddl.find("{schema}")) != std::string::npos;) ddl.replace(at, 8, q_);
  const std::string tx =
      "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(key_ ^ 1) + "); " + ddl + " COMMIT;";
  PgResult c(PQexec(conn_, tx.c_str()));
  if (PQresultStatus(c.get()) != PGRES_COMMAND_OK) {
    PgResult rb(PQexec(conn_, "ROLLBACK"));
    return ErrorOf("creating the bench_runs table", c);
  }
  return Status::OK();
}

Status PostgresStateStore::CreateEventsTable() {
  const std::string ddl = "BEGIN; SELECT pg_advisory_xact_lock(" + std::to_string(key_ ^ 1) +
                          "); " + EventsDdl() + " COMMIT;";
  PgResult c(PQexec(conn_, ddl.c_str()));
  if (PQresultStatus(c.get()) != PGRES_COMMAND_OK) {
    PgResult rb(PQexec(conn_, "ROLLBACK"));
    return ErrorOf("creating the events table", c);
  }
  return Status::OK();
}

Result<PgResult> PostgresStateStore::Exec(const std::string& what, const std::string& sql,
                                          const std::vector<std::string>& params,
                                          std::string* sqlstate) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  if (sqlstate) sqlstate->clear();
  Status c = Connect();
  if (!c.ok()) return c;
  std::vector<const char*> p;
  for (const std::string& s : params) p.push_back(s.c_str());
  PgResult r(PQexecParams(conn_, sql.c_str(), static_cast<int>(p.size()), nullptr, p.data(),
                          nullptr, nullptr, 0));
  ExecStatusType st = PQresultStatus(r.get());
  if (st != PGRES_TUPLES_OK && st != PGRES_COMMAND_OK) {
    if (sqlstate) *sqlstate = r.sqlstate();
    return ErrorOf(what, r);
  }
  return r;
}

Result<State> PostgresStateStore::ParseBody(const std::string& body,
                                            const std::string& what) const {
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return Status::Error(what + " in " + Describe() + " is not valid JSON");
  Result<State> s = State::FromJson(j);
  if (!s.ok()) return s.status().Prefixed(what + " in " + Describe());
  return s;
}

Result<State> PostgresStateStore::Load() {
  auto r = Exec("reading the state", "SELECT body FROM " + q_ + ".states ORDER BY id DESC LIMIT 1");
  if (!r.ok()) return r.status();
  if (r->rows() == 0) {
    State empty;
    empty.lineage = NewLineage();
    return empty;
  }
  return ParseBody(r->at(0, 0), "the latest state");
}

// SQL: row `alias` of pg_locks is the state's advisory lock, granted (a
// bigint key shows as classid = high half, objid = low half, objsubid 1).
std::string PostgresStateStore::KeyHeld(const std::string& alias) const {
  const uint64_t k = static_cast<uint64_t>(key_);
  return alias + ".locktype = 'advisory' AND " + alias + ".granted AND " + alias +
         ".objsubid = 1 AND " + alias + ".classid = " + std::to_string(k >> 32) + "::oid AND " +
         alias + ".objid = " + std::to_string(k & 0xffffffffu) + "::oid";
}

// SQL: this session holds the state lock.
std::string PostgresStateStore::LockedByUs() const {
  return "EXISTS (SELECT 1 FROM pg_locks k WHERE k.pid = pg_backend_pid() AND " + KeyHeld("k") +
         ")";
}

Status PostgresStateStore::Save(const State& state) {
  std::string body;
  try {
    json j = state.ToJson();
    auto check = State::FromJson(j);
    if (!check.ok()) return check.status().Prefixed("refusing to save an invalid state");
    body = j.dump();
  } catch (const std::exception& e) {
    return Status::Error(std::string("cannot serialize the state: ") + e.what());
  }
  std::lock_guard<std::recursive_mutex> l(mu_);
  if (saved_by_.empty()) saved_by_ = ProcessHolder();
  auto r =
      Exec("saving the state",
           "INSERT INTO " + q_ +
               ".states (lineage, serial, saved_by, body) "
               "SELECT $1, $2, $3, $4 WHERE " +
               LockedByUs() + " AND NOT EXISTS (SELECT 1 FROM (SELECT lineage, serial FROM " + q_ +
               ".states ORDER BY id DESC LIMIT 1) last WHERE last.lineage <> $1 OR "
               "last.serial > $2::bigint) RETURNING id",
           {state.lineage, std::to_string(state.serial), saved_by_, body});
  if (!r.ok()) return r.status();
  if (r->rows() == 1) return Status::OK();
  // Refused: say why (only on this path: one round trip per save otherwise).
  auto why = Exec("reading the state", "SELECT " + LockedByUs() +
                                           ", (SELECT lineage || ' serial ' || serial FROM " + q_ +
                                           ".states ORDER BY id DESC LIMIT 1)");
  if (!why.ok()) return why.status();
  if (why->at(0, 0) != "t") {
    return Status::Error("refusing to save the state: this fleet no longer holds the lock on " +
                         Describe() + " (was it broken with force-unlock?)");
  }
  return Status::Error("refusing to save serial " + std::to_string(state.serial) + " of lineage " +
                       state.lineage + ": " + Describe() + " holds lineage " + why->at(0, 1) +
                       "; the state moved under this run");
}

std::string PostgresStateStore::HeldMessage() {
  // The holder inserts its row right after taking the lock: give it a moment.
  for (int i = 0; i < 40; ++i) {
    auto r = Exec("reading the lock",
                  "SELECT id, holder, operation, to_char(created AT TIME ZONE 'UTC', "
                  "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), backend_pid FROM " +
                      q_ +
                      ".lock l WHERE name = 'state' AND EXISTS (SELECT 1 FROM pg_locks k WHERE "
                      "k.pid = l.backend_pid AND " +
                      KeyHeld("k") + ")");
    if (r.ok() && r->rows() == 1) {
      const std::string id = r->at(0, 0);
      return "state is locked by " + r->at(0, 1) + " (" + r->at(0, 2) + ") since " + r->at(0, 3) +
             ", lock id " + id +
             "; the lock goes with that process's database "
             "session; if it hangs, run: fleet force-unlock " +
             id;
    }
    RealClock()->SleepFor(std::chrono::milliseconds(5));
  }
  return "state is locked by another session of " + Describe() + " that has not recorded who it is";
}

Result<std::unique_ptr<StateLock>> PostgresStateStore::Lock(const std::string& operation) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  LockInfo info = ThisProcessLock(operation);
  auto r = Exec("taking the lock",
                "WITH got AS (SELECT pg_try_advisory_lock(" + std::to_string(key_) +
                    ") AS ok) INSERT INTO " + q_ +
                    ".lock (name, id, operation, holder, username, hostname, pid, backend_pid, "
                    "created) SELECT 'state', $1, $2, $3, $4, $5, $6, pg_backend_pid(), now() "
                    "FROM got WHERE ok ON CONFLICT (name) DO UPDATE SET id = EXCLUDED.id, "
                    "operation = EXCLUDED.operation, holder = EXCLUDED.holder, username = "
                    "EXCLUDED.username, hostname = EXCLUDED.hostname, pid = EXCLUDED.pid, "
                    "backend_pid = EXCLUDED.backend_pid, created = EXCLUDED.created RETURNING id",
                {info.id, operation, info.holder, ProcessUserName(), info.hostname,
                 std::to_string(info.pid)});
  if (!r.ok()) {
    // The advisory lock may have been taken before the insert failed.
    PgResult u(PQexec(conn_, ("SELECT pg_advisory_unlock(" + std::to_string(key_) + ")").c_str()));
    return r.status();
  }
  if (r->rows() == 0) return Status::LockHeld(HeldMessage());
  saved_by_ = info.holder + " (" + operation + ")";
  return std::unique_ptr<StateLock>(new PostgresStateLock(this, std::move(info)));
}

void PostgresStateStore::Release(const std::string& lock_id) {
  std::lock_guard<std::recursive_mutex> l(mu_);
  if (!conn_ || PQstatus(conn_) != CONNECTION_OK) return;  // the lock went with the session
  // lock_id is our own hex id: safe to inline.
  const std::string sql = "DELETE FROM " + q_ + ".lock WHERE id = '" + lock_id +
                          "'; SELECT pg_advisory_unlock(" + std::to_string(key_) + ")";
  PgResult r(PQexec(conn_, sql.c_str()));
}

PostgresStateLock::~PostgresStateLock() { store_->Release(info_.id); }

Status PostgresStateStore::ForceUnlock(const std::string& lock_id) {
  if (lock_id.empty()) return Status::Error("force-unlock needs a lock id");
  auto r = Exec("reading the lock",
                "SELECT id, holder, operation, backend_pid, EXISTS (SELECT 1 FROM pg_locks k "
                "WHERE k.pid = l.backend_pid AND " +
                    KeyHeld("k") + ") FROM " + q_ + ".lock l WHERE name = 'state'");
  if (!r.ok()) return r.status();
  if (r->rows() == 0) return Status::Error("no lock held on " + Describe());
  if (r->at(0, 0) != lock_id) {
    return Status::Error("lock id " + lock_id + " does not match the current lock on " +
                         Describe() + ": id " + r->at(0, 0) + ", held by " + r->at(0, 1) + " (" +
                         r->at(0, 2) + ")");
  }
  const std::string backend = r->at(0, 3);
  if (r->at(0, 4) == "t") {
    // The holder's session is alive (a hung process): end it; the server
    // then drops its lock, and its next save fails.
    auto t =
        Exec("ending the holder's session", "SELECT pg_terminate_backend($1::integer)", {backend});
    if (!t.ok() || t->at(0, 0) != "t") {
      return Status::Error(
          "cannot end the lock holder's database session (backend pid " + backend + ")" +
          (t.ok() ? "" : ": " + t.status().message()) +
          "; a database superuser (or a member of pg_signal_backend) can run: SELECT "
          "pg_terminate_backend(" +
          backend + ")");
    }
    // The server drops the lock as the session ends: wait for it, so that
    // the next command finds the state unlocked.
    for (int i = 0; i < 100; ++i) {
      auto gone = Exec("reading the lock",
                       "SELECT NOT EXISTS (SELECT 1 FROM pg_locks k WHERE " + KeyHeld("k") + ")");
      if (!gone.ok()) return gone.status();
      if (gone->at(0, 0) == "t") break;
      RealClock()->SleepFor(std::chrono::milliseconds(50));
    }
  }
  auto d = Exec("removing the lock row", "DELETE FROM " + q_ + ".lock WHERE id = $1", {lock_id});
  return d.status();
}

Result<std::vector<StateVersion>> PostgresStateStore::History() {
  auto r = Exec("reading the history",
                "SELECT serial, lineage, to_char(max(saved_at) AT TIME ZONE 'UTC', "
                "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), (array_agg(saved_by ORDER BY id DESC))[1], "
                "count(*) FROM " +
                    q_ + ".states GROUP BY serial, lineage ORDER BY min(id)");
  if (!r.ok()) return r.status();
  std::vector<StateVersion> out;
  for (int i = 0; i < r->rows(); ++i) {
    StateVersion v;
    v.serial = std::stoull(r->at(i, 0));
    v.lineage = r->at(i, 1);
    v.saved_at = r->at(i, 2);
    v.saved_by = r->at(i, 3);
    v.writes = std::atoi(r->at(i, 4).c_str());
    out.push_back(v);
  }
  return out;
}

Result<State> PostgresStateStore::LoadSerial(uint64_t serial) {
  auto r = Exec("reading the history",
                "SELECT body FROM " + q_ +
                    ".states WHERE serial = $1::bigint ORDER BY id DESC "
                    "LIMIT 1",
                {std::to_string(serial)});
  if (!r.ok()) return r.status();
  if (r->rows() == 0)
    return Status::Error("no state with serial " + std::to_string(serial) + " in " + Describe());
  return ParseBody(r->at(0, 0), "serial " + std::to_string(serial));
}

// `j` with every NUL in its strings (keys too) made U+FFFD: jsonb cannot
// hold \u0000, and an event must not be lost for a byte a serve printed.
json WithoutNul(const json& j) {
  auto clean = [](std::string s) {
    for (size_t at; (at = s.find('\0')) != std::string::npos;) s.replace(at, 1, "\xEF\xBF\xBD");
    return s;
  };
  if (j.is_string()) return clean(j.get<std::string>());
  if (j.is_array()) {
    json out = json::array();
    for (const json& v : j) out.push_back(WithoutNul(v));
    return out;
  }
  if (j.is_object()) {
    json out = json::object();
    for (auto it = j.begin(); it != j.end(); ++it) out[clean(it.key())] = WithoutNul(it.value());
    return out;
  }
  return j;
}

// An RFC 3339 time (ParseRfc3339Micros accepted it) as PostgreSQL reads
// one: 't' and 'z' upper-cased.
std::string PgTime(std::string t) {
  for (char& c : t)
    if (c == 't' || c == 'z') c = static_cast<char>(c - 'a' + 'A');
  return t;
}

Status PostgresStateStore::AppendEvent(const json& event) {
  Status s = CheckEvent(event);
  if (!s.ok()) return s;
  std::string body;
  try {
    body = WithoutNul(event).dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::Error(std::string("cannot serialize the event: ") + e.what());
  }
  const std::string time = PgTime(event.at("time").get<std::string>());
  const std::string sql =
      "INSERT INTO " + q_ + ".events (time, body) VALUES ($1::timestamptz, $2::jsonb)";
  std::lock_guard<std::recursive_mutex> l(mu_);
  std::string state;
  auto r = Exec("keeping the event", sql, {time, body}, &state);
  if (r.ok() || state != "42P01") return r.status();
  // 42P01, no such table: a schema made before events were kept.
  s = CreateEventsTable();
  if (!s.ok()) return s;
  return Exec("keeping the event", sql, {time, body}).status();
}

Status PostgresStateStore::AppendBenchRun(const json& run) {
  Status s = CheckBenchRun(run);
  if (!s.ok()) return s;
  std::string record;
  try {
    record = WithoutNul(run["record"]).dump(-1, ' ', false, json::error_handler_t::replace);
  } catch (const std::exception& e) {
    return Status::Error(std::string("cannot serialize the bench run: ") + e.what());
  }
  const json& spec = run["record"].value("spec", json::object());
  auto str = [](const json& o, const char* k) {
    return o.contains(k) && o[k].is_string() ? o[k].get<std::string>() : std::string();
  };
  const std::vector<std::string> params = {str(run, "id"),         PgTime(str(run, "time")),
                                           str(run, "deployment"), str(run, "node"),
                                           str(run, "profile"),    str(run, "outcome"),
                                           str(spec, "image"),     str(spec, "model_revision"),
                                           str(spec, "spec_hash"), record};
  const std::string sql =
      "INSERT INTO " + q_ +
      ".bench_runs (run_id, time, deployment, node, profile, outcome, image, model_revision, "
      "spec_hash, record) VALUES ($1, $2::timestamptz, $3, $4, $5, $6, $7, $8, $9, $10::jsonb) "
      "ON CONFLICT (run_id) DO NOTHING";
  std::string state;
  auto r = Exec("keeping the bench run", sql, params, &state);
  if (r.ok() || state != "42P01") return r.status();
  // 42P01, no such table: a schema made before bench runs had one.
  s = CreateBenchRunsTable();
  if (!s.ok()) return s;
  return Exec("keeping the bench run", sql, params).status();
}

Result<std::vector<json>> PostgresStateStore::BenchRuns(const std::string& deployment) {
  const std::string cols =
      "SELECT run_id, to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), "
      "deployment, node, profile, outcome, record FROM " +
      q_ + ".bench_runs";
  std::string state;
  auto r = deployment.empty()
               ? Exec("reading the bench runs", cols + " ORDER BY id", {}, &state)
               : Exec("reading the bench runs", cols + " WHERE deployment = $1 ORDER BY id",
                      {deployment}, &state);
  if (!r.ok()) {
    if (state == "42P01") return std::vector<json>{};  // none kept yet
    return r.status();
  }
  std::vector<json> out;
  for (int i = 0; i < PQntuples(r->get()); ++i) {
    json record = json::parse(r->at(i, 6), nullptr, false);
    if (record.is_discarded())
      return Status::Error("a bench run in " + Describe() + " is not valid JSON");
    out.push_back({{"id", r->at(i, 0)},
                   {"time", r->at(i, 1)},
                   {"deployment", r->at(i, 2)},
                   {"node", r->at(i, 3)},
                   {"profile", r->at(i, 4)},
                   {"outcome", r->at(i, 5)},
                   {"record", std::move(record)}});
  }
  return out;
}

Result<std::vector<json>> PostgresStateStore::Events(const std::string& since) {
  if (!since.empty() && !ParseRfc3339Micros(since))
    return Status::Error("'" + since + "' is not an RFC 3339 time (such as 2026-11-29T17:35:24Z)");
  std::string state;
  auto r =
      since.empty()
          ? Exec("reading the events", "SELECT body FROM " + q_ + ".events ORDER BY id", {}, &state)
          : Exec("reading the events",
                 "SELECT body FROM " + q_ + ".events WHERE time >= $1::timestamptz ORDER BY id",
                 {PgTime(since)}, &state);
  if (!r.ok()) {
    if (state == "42P01") return std::vector<json>{};  // none appended yet
    return r.status();
  }
  std::vector<json> out;
  for (int i = 0; i < r->rows(); ++i) {
    json j = json::parse(r->at(i, 0), nullptr, false);
    if (j.is_discarded()) return Status::Error("an event in " + Describe() + " is not valid JSON");
    out.push_back(std::move(j));
  }
  return out;
}

}  // namespace

std::unique_ptr<StateStore> MakePostgresStateStore(const std::string& conn_env,
                                                   const std::string& schema) {
  return std::make_unique<PostgresStateStore>(conn_env, schema);
}

}  // namespace fleet
