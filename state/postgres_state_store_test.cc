// Tests of the PostgreSQL state store against a real PostgreSQL that main()
// starts in a temp directory (tests/pg/pg-sim: initdb, a Unix socket, run
// as the unprivileged postgres user). Lock holders are forked children, so
// that a kill -9 ends a real database session.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "state/state_store.h"

namespace fleet {
namespace {

using nlohmann::json;

std::string g_conninfo;  // the test server's libpq string
int g_schema_counter = 0;

std::string Shell(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

State MakeState(const std::string& lineage, uint64_t serial) {
  State s;
  s.lineage = lineage;
  s.serial = serial;
  ResourceRecord r;
  r.address = "node.n1";
  r.type = "node";
  r.node = "n1";
  r.attributes = {{"serial", serial}};
  r.updated_at = "2026-11-29T17:35:24Z";
  s.Upsert(r);
  return s;
}

class PostgresStateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("FLEET_TEST_PG", g_conninfo.c_str(), 1);
    schema_ = "fleet_t" + std::to_string(++g_schema_counter);
  }
  std::unique_ptr<StateStore> Store(const std::string& env = "FLEET_TEST_PG") {
    return MakePostgresStateStore(env, schema_);
  }
  std::string schema_;
};

TEST_F(PostgresStateStoreTest, FirstUseCreatesTheSchemaAndAnEmptyState) {
  auto store = Store();
  Result<State> s = store->Load();
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(s->serial, 0u);
  EXPECT_FALSE(s->lineage.empty());
  int rc;
  std::string v = Shell(
      "psql -XAtq '" + g_conninfo + "' -c 'SELECT version FROM " + schema_ + ".schema_version'",
      &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(v, "1");
}

TEST_F(PostgresStateStoreTest, SaveNeedsTheLockAndRoundTrips) {
  auto store = Store();
  State st = MakeState("lin-a", 1);
  Status refused = store->Save(st);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("no longer holds the lock"), std::string::npos)
      << refused.message();
  auto lock = store->Lock("apply");
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  ASSERT_TRUE(store->Save(st).ok());
  auto other = Store();
  Result<State> back = other->Load();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->lineage, "lin-a");
  EXPECT_EQ(back->serial, 1u);
  EXPECT_EQ(back->ToJson(), st.ToJson());
}

TEST_F(PostgresStateStoreTest, RefusesAnotherLineageOrAnOlderSerial) {
  auto store = Store();
  auto lock = store->Lock("apply");
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE(store->Save(MakeState("lin-a", 5)).ok());
  Status other = store->Save(MakeState("lin-b", 6));
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.message().find("lin-a"), std::string::npos) << other.message();
  EXPECT_FALSE(store->Save(MakeState("lin-a", 4)).ok());
  EXPECT_TRUE(store->Save(MakeState("lin-a", 5)).ok());  // a checkpoint of the same apply
  EXPECT_TRUE(store->Save(MakeState("lin-a", 6)).ok());
}

TEST_F(PostgresStateStoreTest, HistoryKeepsEverySerial) {
  auto store = Store();
  auto lock = store->Lock("apply");
  ASSERT_TRUE(lock.ok());
  for (uint64_t serial : {1, 1, 2, 3, 3, 3}) ASSERT_TRUE(store->Save(MakeState("l", serial)).ok());
  auto h = store->History();
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->size(), 3u);
  EXPECT_EQ((*h)[0].serial, 1u);
  EXPECT_EQ((*h)[0].writes, 2);
  EXPECT_EQ((*h)[2].serial, 3u);
  EXPECT_EQ((*h)[2].writes, 3);
  EXPECT_NE((*h)[2].saved_by.find("(apply)"), std::string::npos) << (*h)[2].saved_by;
  auto two = store->LoadSerial(2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->resources[0].attributes["serial"], 2);
  EXPECT_FALSE(store->LoadSerial(9).ok());
}

TEST_F(PostgresStateStoreTest, SecondLockFailsFastNamingTheHolder) {
  auto a = Store();
  auto lock = a->Lock("apply");
  ASSERT_TRUE(lock.ok());
  auto b = Store();
  auto start = std::chrono::steady_clock::now();
  auto second = b->Lock("apply");
  ASSERT_FALSE(second.ok());
  EXPECT_TRUE(second.status().lock_held());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  const std::string& m = second.status().message();
  EXPECT_NE(m.find("locked by"), std::string::npos) << m;
  EXPECT_NE(m.find("pid " + std::to_string(getpid())), std::string::npos) << m;
  EXPECT_NE(m.find("(apply)"), std::string::npos) << m;
  EXPECT_NE(m.find((*lock)->info().id), std::string::npos) << m;
  lock = Status::Error("released");  // destroys the lock
  EXPECT_TRUE(b->Lock("apply").ok());
}

TEST_F(PostgresStateStoreTest, LockWithTimeoutWaitsForTheHolder) {
  auto a = Store();
  auto lock = a->Lock("apply");
  ASSERT_TRUE(lock.ok());
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(700));
    lock = Status::Error("released");
  });
  auto b = Store();
  auto got = LockWithTimeout(b.get(), "plan", 10000);
  release.join();
  EXPECT_TRUE(got.ok()) << got.status().message();
  auto c = Store();
  EXPECT_FALSE(LockWithTimeout(c.get(), "plan", 300).ok());
}

// A child takes the lock and writes its id to a pipe, then waits.
pid_t ForkHolder(const std::string& schema, std::string* id) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    auto store = MakePostgresStateStore("FLEET_TEST_PG", schema);
    auto lock = store->Lock("apply");
    std::string msg = lock.ok() ? (*lock)->info().id + "\n" : "ERR\n";
    if (write(fds[1], msg.data(), msg.size()) < 0) _exit(1);
    for (;;) pause();
  }
  close(fds[1]);
  char buf[64] = {};
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  *id = n > 0 ? std::string(buf, static_cast<size_t>(n) - 1) : "";
  return pid;
}

TEST_F(PostgresStateStoreTest, KillNineReleasesTheLock) {
  std::string id;
  pid_t child = ForkHolder(schema_, &id);
  ASSERT_GT(child, 0);
  ASSERT_EQ(id.size(), 32u) << id;
  auto store = Store();
  EXPECT_FALSE(store->Lock("apply").ok());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  auto got = LockWithTimeout(store.get(), "apply", 3000);
  EXPECT_TRUE(got.ok()) << got.status().message();
}

TEST_F(PostgresStateStoreTest, ForceUnlockEndsAHungHolderOnlyWithItsId) {
  std::string id;
  pid_t child = ForkHolder(schema_, &id);
  ASSERT_GT(child, 0);
  auto store = Store();
  Status wrong = store->ForceUnlock("not-the-id");
  EXPECT_FALSE(wrong.ok());
  EXPECT_NE(wrong.message().find(id), std::string::npos) << wrong.message();
  Status ok = store->ForceUnlock(id);
  EXPECT_TRUE(ok.ok()) << ok.message();
  EXPECT_TRUE(store->Lock("apply").ok());
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  EXPECT_FALSE(Store()->ForceUnlock(id).ok());
}

TEST_F(PostgresStateStoreTest, ABrokenLockCannotWrite) {
  auto holder = Store();
  auto lock = holder->Lock("apply");
  ASSERT_TRUE(lock.ok());
  ASSERT_TRUE(holder->Save(MakeState("l", 1)).ok());
  ASSERT_TRUE(Store()->ForceUnlock((*lock)->info().id).ok());
  Status s = holder->Save(MakeState("l", 2));
  EXPECT_FALSE(s.ok());
  auto back = Store()->Load();
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->serial, 1u);
}

TEST_F(PostgresStateStoreTest, TheConnectionStringNeverAppearsInErrors) {
  setenv("FLEET_TEST_BAD", "host=/nonexistent/sock user=fleet password=sekrit-pw dbname=x", 1);
  auto s = Store("FLEET_TEST_BAD")->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("sekrit-pw"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("FLEET_TEST_BAD"), std::string::npos);
  setenv("FLEET_TEST_BAD", "postgresql://fleet:sekrit-pw@/x?host=/nonexistent", 1);
  s = Store("FLEET_TEST_BAD")->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("sekrit-pw"), std::string::npos) << s.status().message();
  setenv("FLEET_TEST_BAD", "host='sekrit-pw", 1);  // malformed
  s = Store("FLEET_TEST_BAD")->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().message().find("sekrit-pw"), std::string::npos) << s.status().message();
  unsetenv("FLEET_TEST_UNSET");
  s = Store("FLEET_TEST_UNSET")->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("$FLEET_TEST_UNSET is not set"), std::string::npos);
}

TEST_F(PostgresStateStoreTest, SslModeIsHonored) {
  // sslmode reaches libpq as written (over the test's Unix socket libpq
  // does no TLS at all, so a bad value is what shows it is read).
  setenv("FLEET_TEST_SSL", (g_conninfo + " sslmode=sometimes").c_str(), 1);
  auto s = Store("FLEET_TEST_SSL")->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("sslmode"), std::string::npos) << s.status().message();
  setenv("FLEET_TEST_SSL", (g_conninfo + " sslmode=prefer").c_str(), 1);
  EXPECT_TRUE(Store("FLEET_TEST_SSL")->Load().ok());
}

TEST_F(PostgresStateStoreTest, ANewerSchemaLayoutIsRefused) {
  ASSERT_TRUE(Store()->Load().ok());
  int rc;
  Shell("psql -XAtq '" + g_conninfo + "' -c 'INSERT INTO " + schema_ +
            ".schema_version (version) VALUES (99)'",
        &rc);
  ASSERT_EQ(rc, 0);
  auto s = Store()->Load();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("newer fleet"), std::string::npos) << s.status().message();
}

TEST_F(PostgresStateStoreTest, EventsAppendInOrderAndFilterBySince) {
  auto store = Store();
  auto none = store->Events("");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  // No lock needed: another session holds it the whole time.
  auto holder = Store();
  auto lock = holder->Lock("apply");
  ASSERT_TRUE(lock.ok()) << lock.status().message();
  const std::vector<std::string> times = {"2026-11-29T17:01:00Z", "2026-11-29T17:03:00Z",
                                          "2026-11-29T17:02:00Z", "2026-11-29T18:04:00+01:00",
                                          "2026-11-29T17:05:00.25Z"};
  for (size_t i = 0; i < times.size(); ++i) {
    json e = {{"time", times[i]}, {"event", "heal"}, {"n", i}, {"address", "deployment.q@dgx1"}};
    Status s = store->AppendEvent(e);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  auto n_of = [](const std::vector<json>& events) {
    std::vector<int> out;
    for (const json& e : events) out.push_back(e.at("n").get<int>());
    return out;
  };
  auto all = Store()->Events("");
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(n_of(*all), (std::vector<int>{0, 1, 2, 3, 4}));  // appended order, not time order
  EXPECT_EQ(
      (*all)[0],
      (json{{"time", times[0]}, {"event", "heal"}, {"n", 0}, {"address", "deployment.q@dgx1"}}));
  auto since = store->Events("2026-11-29T17:02:00Z");
  ASSERT_TRUE(since.ok()) << since.status().message();
  EXPECT_EQ(n_of(*since), (std::vector<int>{1, 2, 3, 4}));
  EXPECT_EQ(n_of(*store->Events("2026-11-29T12:03:30-05:00")), (std::vector<int>{3, 4}));
  EXPECT_EQ(n_of(*store->Events("2026-11-29T17:05:00.3Z")), (std::vector<int>{}));
  auto bad = store->Events("yesterday");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not an RFC 3339 time"), std::string::npos);
  Status refused = store->AppendEvent(json{{"event", "heal"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.message().find("needs \"time\""), std::string::npos) << refused.message();
}

TEST_F(PostgresStateStoreTest, EventsKeepWhatJsonbCannotHold) {
  auto store = Store();
  json e = {{"time", "2026-11-29T17:01:00Z"},
            {"event", "heal"},
            {"reason", std::string("got '7\0"
                                   "2'\n",
                                   10)}};
  Status s = store->AppendEvent(e);
  ASSERT_TRUE(s.ok()) << s.message();
  auto back = store->Events("");
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0]["reason"],
            "got '7\xEF\xBF\xBD"
            "2'\n");
}

TEST_F(PostgresStateStoreTest, ConcurrentAppendersAllKept) {
  constexpr int kChildren = 4, kEach = 50;
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = Store();
      for (int i = 0; i < kEach; ++i) {
        json e = {{"time", "2026-11-29T17:01:00Z"}, {"event", "sync"}, {"n", c * kEach + i}};
        if (!store->AppendEvent(e).ok()) _exit(1);
      }
      _exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int st = 0;
    waitpid(pid, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  auto all = Store()->Events("");
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), static_cast<size_t>(kChildren * kEach));
  std::vector<int> last(kChildren, -1);
  for (const json& e : *all) {
    const int n = e.at("n").get<int>();
    EXPECT_GT(n % kEach, last[n / kEach]) << n;  // each appender's in its order
    last[n / kEach] = n % kEach;
  }
}

// A schema made before events were kept (no events table): reading finds
// none, and the first append makes the table.
TEST_F(PostgresStateStoreTest, EventsTableMadeOnFirstAppendInAnOlderSchema) {
  ASSERT_TRUE(Store()->Load().ok());
  int rc;
  Shell("psql -XAtq '" + g_conninfo + "' -c 'DROP TABLE " + schema_ + ".events'", &rc);
  ASSERT_EQ(rc, 0);
  auto store = Store();
  auto none = store->Events("");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  Status s = store->AppendEvent(json{{"time", "2026-11-29T17:01:00Z"}, {"event", "quarantine"}});
  ASSERT_TRUE(s.ok()) << s.message();
  auto one = Store()->Events("2026-11-29T17:01:00Z");
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0]["event"], "quarantine");
  std::string v = Shell(
      "psql -XAtq '" + g_conninfo + "' -c 'SELECT version FROM " + schema_ + ".schema_version'",
      &rc);
  EXPECT_EQ(v, "1");
}

// The bench runs' table of their own (issue #47): made on the first run
// (state/bench_runs.sql), every run kept once, read by deployment in order,
// its columns queryable without the JSON.
TEST_F(PostgresStateStoreTest, BenchRunsHaveATableOfTheirOwn) {
  auto store = Store();
  ASSERT_TRUE(store->Load().ok());
  auto none = store->BenchRuns("");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  auto run = [](int n, const std::string& deployment, const std::string& outcome) {
    return json{{"id", "2026-12-06T05-0" + std::to_string(n) + "-00Z_0123456789ab"},
                {"time", "2026-12-06T05:0" + std::to_string(n) + ":00Z"},
                {"deployment", deployment},
                {"node", "dgx3"},
                {"profile", "quick"},
                {"outcome", outcome},
                {"record",
                 {{"id", "r"},
                  {"cells", json::array()},
                  {"spec", {{"image", "r@sha256:aa"}, {"spec_hash", "0123456789ab"}}}}}};
  };
  ASSERT_TRUE(store->AppendBenchRun(run(1, "lab", "gate baseline")).ok());
  ASSERT_TRUE(store->AppendBenchRun(run(2, "other", "recorded")).ok());
  Status s = store->AppendBenchRun(run(3, "lab", "gate refused"));
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(store->AppendBenchRun(run(3, "lab", "gate refused")).ok());  // kept once
  EXPECT_FALSE(store->AppendBenchRun(json{{"id", "x"}}).ok());
  auto lab = Store()->BenchRuns("lab");
  ASSERT_TRUE(lab.ok()) << lab.status().message();
  ASSERT_EQ(lab->size(), 2u);
  EXPECT_EQ((*lab)[0]["outcome"], "gate baseline");
  EXPECT_EQ((*lab)[1]["time"], "2026-12-06T05:03:00Z");
  EXPECT_EQ((*lab)[1]["record"]["spec"]["image"], "r@sha256:aa");
  EXPECT_EQ(Store()->BenchRuns("")->size(), 3u);
  int rc;
  std::string refused =
      Shell("psql -XAtq '" + g_conninfo + "' -c \"SELECT count(*) FROM " + schema_ +
                ".bench_runs WHERE outcome = 'gate refused' AND spec_hash = "
                "'0123456789ab' AND image = 'r@sha256:aa'\"",
            &rc);
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(refused, "1");
  // No bench event was written: the events are another history.
  EXPECT_TRUE(Store()->Events("")->empty());
}

}  // namespace
}  // namespace fleet

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const char* sim = std::getenv("FLEET_PG_SIM");
  std::string pg_sim = sim ? sim : "tests/pg/pg-sim";
  char tmpl[] = "/var/tmp/fleet-pg-unit.XXXXXX";
  if (!mkdtemp(tmpl)) return 1;
  const std::string dir = tmpl;
  int rc;
  fleet::g_conninfo = fleet::Shell("bash " + pg_sim + " start " + dir, &rc);
  if (rc == 77) {
    std::fprintf(stderr, "skipped: PostgreSQL server binaries not installed\n");
    fleet::Shell("rm -rf " + dir, &rc);
    return 77;
  }
  int result = 1;
  if (rc == 0) {
    result = RUN_ALL_TESTS();
  } else {
    std::fprintf(stderr, "cannot start the test PostgreSQL (%s)\n", dir.c_str());
  }
  fleet::Shell("bash " + pg_sim + " kill " + dir + "; rm -rf " + dir, &rc);
  return result;
}
