// Tests of the local state store: atomic saves, backups, modes, crash safety
// and the cross-process lock. Writers and lock holders are forked children,
// so that the kernel's view (flock per open file, SIGKILL mid-write) is real.
#include "state/state_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/fake_clock.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class StateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fleet_state_test_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/fleet";  // not created: the store must create it
    path_ = dir_ + "/state.json";
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  std::string root_, dir_, path_;
};

State MakeState(uint64_t serial, int records = 3) {
  State s;
  s.lineage = "11111111-2222-4333-8444-555555555555";
  s.serial = serial;
  for (int i = 0; i < records; ++i) {
    ResourceRecord r;
    r.address = "node.n" + std::to_string(i);
    r.type = "node";
    r.node = "n" + std::to_string(i);
    r.attributes = {{"serial", serial}, {"pad", std::string(200, 'x')}};
    r.updated_at = "2026-11-29T17:35:24Z";
    s.Upsert(std::move(r));
  }
  return s;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 07777;
  return st.st_mode & 07777;
}

std::vector<std::string> Names(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  return out;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(StateStoreTest, LoadMissingIsEmptyWithFreshLineage) {
  auto store = MakeLocalStateStore(path_);
  auto a = store->Load();
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_EQ(a->serial, 0u);
  EXPECT_EQ(a->version, 1);
  EXPECT_TRUE(a->resources.empty());
  EXPECT_EQ(a->lineage.size(), 36u);
  auto b = store->Load();
  ASSERT_TRUE(b.ok());
  EXPECT_NE(a->lineage, b->lineage);  // nothing was written
  EXPECT_FALSE(fs::exists(dir_));
  EXPECT_EQ(store->Describe(), path_);
}

TEST_F(StateStoreTest, SaveThenLoadEquals) {
  auto store = MakeLocalStateStore(path_);
  State s = MakeState(7);
  ASSERT_TRUE(store->Save(s).ok());
  auto back = store->Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), s.ToJson());
  EXPECT_EQ(ModeOf(dir_), 0700u);
  // Only the state itself (and the .gitignore of the directory fleet made):
  // no temp file, and no backup before a second save.
  std::vector<std::string> names = Names(dir_);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".gitignore", "state.json"}));
}

// What a node printed can hold bytes that are not UTF-8 (a file name, a
// GPU name); fuzz/ found them crashing every JSON dump. The state still
// saves (U+FFFD in their place) rather than losing the record of a step.
TEST_F(StateStoreTest, BytesThatAreNotUtf8SaveAsReplacementCharacters) {
  auto store = MakeLocalStateStore(path_);
  State s = MakeState(2);
  s.resources[0].attributes["name"] = "model\xff.safetensors";
  ASSERT_TRUE(store->Save(s).ok());
  auto back = store->Load();
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->resources[0].attributes["name"], "model\xEF\xBF\xBD.safetensors");
}

TEST_F(StateStoreTest, ModesIgnoreTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{0277}}) {
    SCOPED_TRACE("umask " + std::to_string(mask));
    std::error_code ec;
    fs::remove_all(dir_, ec);
    mode_t old = ::umask(mask);
    auto store = MakeLocalStateStore(path_);
    Status s1 = store->Save(MakeState(1));
    Status s2 = store->Save(MakeState(2));
    auto lock = store->Lock("test");
    std::string lock_mode_path = path_ + ".lock";
    mode_t lock_mode = ModeOf(lock_mode_path);
    ::umask(old);
    ASSERT_TRUE(s1.ok()) << s1.message();
    ASSERT_TRUE(s2.ok()) << s2.message();
    ASSERT_TRUE(lock.ok()) << lock.status().message();
    EXPECT_EQ(ModeOf(path_), 0600u);
    EXPECT_EQ(ModeOf(path_ + ".backup"), 0600u);
    EXPECT_EQ(ModeOf(dir_), 0700u);
    EXPECT_EQ(lock_mode, 0600u);
  }
}

TEST_F(StateStoreTest, BackupHoldsThePreviousVersion) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->Save(MakeState(1)).ok());
  ASSERT_TRUE(store->Save(MakeState(2)).ok());
  auto backup = State::FromJson(json::parse(ReadFile(path_ + ".backup")));
  ASSERT_TRUE(backup.ok()) << backup.status().message();
  EXPECT_EQ(backup->serial, 1u);
  ASSERT_TRUE(store->Save(MakeState(3)).ok());
  backup = State::FromJson(json::parse(ReadFile(path_ + ".backup")));
  ASSERT_TRUE(backup.ok());
  EXPECT_EQ(backup->serial, 2u);
  EXPECT_EQ(store->Load()->serial, 3u);
  // The backup is its own file, not a link to the current one.
  struct stat a, b;
  ASSERT_EQ(::stat(path_.c_str(), &a), 0);
  ASSERT_EQ(::stat((path_ + ".backup").c_str(), &b), 0);
  EXPECT_NE(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_nlink, 1u);
}

TEST_F(StateStoreTest, UnparseableFileNamesItAndTheBackup) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->Save(MakeState(1)).ok());
  ASSERT_TRUE(store->Save(MakeState(2)).ok());
  for (const char* text : {"{\"version\": 1, \"lineage\": \"x\", \"ser", "", "[1,2]",
                           "{\"version\":1,\"lineage\":\"x\",\"serial\":\"7\"}"}) {
    SCOPED_TRACE(text);
    WriteFile(path_, text);
    auto r = store->Load();
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(Contains(r.status().message(), path_)) << r.status().message();
    EXPECT_TRUE(Contains(r.status().message(), "the previous version is at " + path_ + ".backup"))
        << r.status().message();
  }
}

TEST_F(StateStoreTest, NewerVersionSaysSo) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(fs::create_directories(dir_));
  WriteFile(path_, R"({"version": 9, "whatever": true})");
  auto r = store->Load();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), "state written by a newer fleet (version 9)"))
      << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), path_));
}

TEST_F(StateStoreTest, UnreadableFileIsAnError) {
  ASSERT_TRUE(fs::create_directories(path_));  // a directory where the file is
  auto r = MakeLocalStateStore(path_)->Load();
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(Contains(r.status().message(), path_)) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), ".backup"));
}

TEST_F(StateStoreTest, RefusesToSaveWhatLoadWouldReject) {
  auto store = MakeLocalStateStore(path_);
  State s = MakeState(1);
  s.resources.push_back(s.resources[0]);  // duplicate address
  Status st = store->Save(s);
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(Contains(st.message(), "duplicate address")) << st.message();
  State no_lineage = MakeState(1);
  no_lineage.lineage.clear();
  EXPECT_FALSE(store->Save(no_lineage).ok());
  EXPECT_FALSE(fs::exists(path_));
}

// A pid that is certainly dead: a child we already reaped.
pid_t DeadPid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

TEST_F(StateStoreTest, SaveRemovesTempFilesOfDeadWriters) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->Save(MakeState(1)).ok());
  std::string dead = std::to_string(DeadPid());
  WriteFile(path_ + ".tmp." + dead, "{torn");
  WriteFile(path_ + ".backup.tmp." + dead, "{torn");
  WriteFile(path_ + ".tmp." + std::to_string(::getpid()), "{mine");
  // A live writer's file stays (only a caller ignoring the lock makes one).
  pid_t live = ::fork();
  if (live == 0) {
    ::pause();
    ::_exit(0);
  }
  std::string live_tmp = path_ + ".tmp." + std::to_string(live);
  WriteFile(live_tmp, "{busy");
  WriteFile(dir_ + "/unrelated.tmp.1", "x");

  Status saved = store->Save(MakeState(2));
  std::vector<std::string> names = Names(dir_);
  // Reap the live writer before any assertion can end the test.
  ::kill(live, SIGKILL);
  ::waitpid(live, nullptr, 0);
  ASSERT_TRUE(saved.ok()) << saved.message();
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".gitignore", "state.json", "state.json.backup",
                                             "state.json.tmp." + std::to_string(live),
                                             "unrelated.tmp.1"}));
  ASSERT_TRUE(store->Save(MakeState(3)).ok());  // now it is dead: removed
  EXPECT_FALSE(fs::exists(live_tmp));
}

// A writer saving in a loop, killed at random moments: every kill must leave
// a state that loads, a backup that loads, and no temp file but the victim's
// (which the next writer's Save removes).
TEST_F(StateStoreTest, KillDuringSaveNeverTearsTheFile) {
  std::mt19937 rng(20261129);
  std::uniform_int_distribution<int> delay_us(0, 15000);
  uint64_t last_serial = 0;
  for (int i = 0; i < 50; ++i) {
    SCOPED_TRACE("iteration " + std::to_string(i));
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(ready[0]);
      auto store = MakeLocalStateStore(path_);
      auto lock = store->Lock("crash test");
      if (!lock.ok()) ::_exit(2);
      auto loaded = store->Load();
      if (!loaded.ok()) ::_exit(3);
      State s = std::move(loaded).value();
      bool told = false;
      for (;;) {
        ++s.serial;
        ResourceRecord r;
        r.address = "model.m" + std::to_string(s.serial % 64) + "@nas";
        r.type = "model";
        r.node = "nas";
        r.attributes = {{"serial", s.serial}, {"pad", std::string(4096, 'y')}};
        s.Upsert(std::move(r));
        if (!store->Save(s).ok()) ::_exit(4);
        if (!told) {
          // One save done: the previous victim's temp file is gone by now.
          told = ::write(ready[1], "x", 1) == 1;
        }
      }
    }
    ::close(ready[1]);
    char c;
    ssize_t n = ::read(ready[0], &c, 1);
    ::close(ready[0]);
    if (n != 1) {
      int status = 0;
      ::waitpid(pid, &status, 0);
      FAIL() << "writer died early, status " << status;
    }
    ::usleep(static_cast<useconds_t>(delay_us(rng)));
    ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status)) << "writer exited with " << status;

    auto loaded = MakeLocalStateStore(path_)->Load();
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    EXPECT_GT(loaded->serial, last_serial);
    last_serial = loaded->serial;
    if (fs::exists(path_ + ".backup")) {
      auto backup = State::FromJson(json::parse(ReadFile(path_ + ".backup"), nullptr, false));
      EXPECT_TRUE(backup.ok()) << backup.status().message();
    }
    const std::string victim = "." + std::to_string(pid);
    for (const std::string& name : Names(dir_)) {
      if (!Contains(name, ".tmp.")) continue;
      EXPECT_TRUE(name.size() > victim.size() &&
                  name.compare(name.size() - victim.size(), victim.size(), victim) == 0)
          << "stray temp file " << name;
    }
  }
  // And the next save cleans up after the last victim.
  auto store = MakeLocalStateStore(path_);
  auto loaded = store->Load();
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(store->Save(*loaded).ok());
  for (const std::string& name : Names(dir_)) {
    EXPECT_FALSE(Contains(name, ".tmp.")) << name;
  }
}

// A child that takes the lock, reports its id, and holds it until told to
// release (a byte on *release_fd) or killed.
pid_t SpawnLockHolder(const std::string& path, std::string* id, int* release_fd) {
  int ready[2], release[2];
  if (::pipe(ready) != 0 || ::pipe(release) != 0) return -1;
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(ready[0]);
    ::close(release[1]);
    auto store = MakeLocalStateStore(path);
    auto lock = store->Lock("apply");
    if (!lock.ok()) ::_exit(2);
    std::string msg = (*lock)->info().id + "\n";
    if (::write(ready[1], msg.data(), msg.size()) != static_cast<ssize_t>(msg.size())) ::_exit(3);
    char c;
    while (::read(release[0], &c, 1) < 0 && errno == EINTR) {
    }
    lock = Status::Error("released");  // runs the lock's destructor
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(release[0]);
  id->clear();
  char c;
  while (::read(ready[0], &c, 1) == 1 && c != '\n') id->push_back(c);
  ::close(ready[0]);
  *release_fd = release[1];
  return pid;
}

TEST_F(StateStoreTest, LockHeldElsewhereFailsFastAndDiesWithItsHolder) {
  std::string id;
  int release_fd;
  pid_t child = SpawnLockHolder(path_, &id, &release_fd);
  ASSERT_GT(child, 0);
  ASSERT_FALSE(id.empty());

  auto store = MakeLocalStateStore(path_);
  auto t0 = std::chrono::steady_clock::now();
  auto denied = store->Lock("plan");
  auto ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  ASSERT_FALSE(denied.ok());
  EXPECT_LT(ms, 250) << "Lock() must not wait for the holder";
  const std::string& msg = denied.status().message();
  EXPECT_TRUE(Contains(msg, "pid " + std::to_string(child))) << msg;
  EXPECT_TRUE(Contains(msg, "@")) << msg;
  EXPECT_TRUE(Contains(msg, "(apply)")) << msg;
  EXPECT_TRUE(Contains(msg, " since ")) << msg;
  EXPECT_TRUE(Contains(msg, "lock id " + id)) << msg;
  EXPECT_TRUE(Contains(msg, "fleet force-unlock " + id)) << msg;

  // kill -9: the kernel drops the flock; the stale info is simply replaced.
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(release_fd);
  EXPECT_TRUE(fs::exists(path_ + ".lock"));
  auto mine = store->Lock("plan");
  ASSERT_TRUE(mine.ok()) << mine.status().message();
  EXPECT_EQ((*mine)->info().pid, ::getpid());
  EXPECT_EQ((*mine)->info().operation, "plan");
  EXPECT_NE((*mine)->info().id, id);
  json on_disk = json::parse(ReadFile(path_ + ".lock"));
  EXPECT_EQ(on_disk["id"], (*mine)->info().id);
  EXPECT_EQ(on_disk["pid"], ::getpid());

  // Released by the destructor: the file goes, the next Lock succeeds.
  mine = Status::Error("dropped");
  EXPECT_FALSE(fs::exists(path_ + ".lock"));
  EXPECT_TRUE(store->Lock("plan").ok());
}

TEST_F(StateStoreTest, LockIsExclusiveWithinOneProcessToo) {
  auto a = MakeLocalStateStore(path_);
  auto b = MakeLocalStateStore(path_);
  auto la = a->Lock("apply");
  ASSERT_TRUE(la.ok()) << la.status().message();
  auto lb = b->Lock("destroy");
  ASSERT_FALSE(lb.ok());
  EXPECT_TRUE(Contains(lb.status().message(), (*la)->info().id));
  EXPECT_TRUE(Contains((*la)->info().holder, " pid " + std::to_string(::getpid())));
}

TEST_F(StateStoreTest, ForceUnlock) {
  auto store = MakeLocalStateStore(path_);
  Status none = store->ForceUnlock("abc");
  ASSERT_FALSE(none.ok());
  EXPECT_TRUE(Contains(none.message(), "no lock held")) << none.message();

  std::string id;
  int release_fd;
  pid_t child = SpawnLockHolder(path_, &id, &release_fd);
  ASSERT_GT(child, 0);

  Status wrong = store->ForceUnlock("0123456789abcdef");
  ASSERT_FALSE(wrong.ok());
  EXPECT_TRUE(Contains(wrong.message(), id)) << wrong.message();
  EXPECT_FALSE(store->Lock("apply").ok());

  ASSERT_TRUE(store->ForceUnlock(id).ok());
  // The old holder still lives (and still holds its flock on the unlinked
  // file), yet a new lock is granted.
  ASSERT_EQ(::kill(child, 0), 0);
  auto mine = store->Lock("apply");
  ASSERT_TRUE(mine.ok()) << mine.status().message();

  // When the old holder finally releases, it must not remove our lock file.
  ASSERT_EQ(::write(release_fd, "x", 1), 1);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ::close(release_fd);
  EXPECT_TRUE(fs::exists(path_ + ".lock"));
  auto other = MakeLocalStateStore(path_)->Lock("destroy");
  ASSERT_FALSE(other.ok());
  EXPECT_TRUE(Contains(other.status().message(), (*mine)->info().id));

  // A stale force-unlock command cannot break the newer lock.
  Status stale = store->ForceUnlock(id);
  ASSERT_FALSE(stale.ok());
  EXPECT_TRUE(Contains(stale.message(), (*mine)->info().id)) << stale.message();
}

TEST_F(StateStoreTest, TheDirectoryFleetMakesIsIgnoredByGit) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->Save(MakeState(1)).ok());
  EXPECT_TRUE(Contains(ReadFile(dir_ + "/.gitignore"), "\n*\n"));
  // A directory the user made and named otherwise is left alone.
  fs::create_directories(root_ + "/mine");
  auto other = MakeLocalStateStore(root_ + "/mine/state.json");
  ASSERT_TRUE(other->Save(MakeState(1)).ok());
  EXPECT_FALSE(fs::exists(root_ + "/mine/.gitignore"));
}

TEST_F(StateStoreTest, HistoryIsTheStateAndItsBackup) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->Save(MakeState(1)).ok());
  ASSERT_TRUE(store->Save(MakeState(2)).ok());
  ASSERT_TRUE(store->Save(MakeState(3)).ok());
  auto h = store->History();
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0].serial, 2u);
  EXPECT_EQ((*h)[1].serial, 3u);
  auto two = store->LoadSerial(2);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->ToJson(), MakeState(2).ToJson());
  auto one = store->LoadSerial(1);
  ASSERT_FALSE(one.ok());
  EXPECT_TRUE(Contains(one.status().message(), "postgres backend keeps every serial"));
}

TEST_F(StateStoreTest, LockWithTimeoutWaitsThenNamesTheHolder) {
  auto a = MakeLocalStateStore(path_);
  auto held = a->Lock("apply");
  ASSERT_TRUE(held.ok());
  auto b = MakeLocalStateStore(path_);
  FakeClock clock;
  auto refused = LockWithTimeout(b.get(), "plan", 400, &clock);
  EXPECT_GE(clock.Elapsed(), std::chrono::milliseconds(400));
  EXPECT_GE(clock.sleeps(), 2);  // retried, backing off, not one long wait
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(refused.status().lock_held());
  EXPECT_TRUE(Contains(refused.status().message(), "locked by"));
  // The holder lets go during the wait: the next try takes the lock.
  FakeClock waiting;
  waiting.OnSleep([&] { held = Status::Error("released"); });
  EXPECT_TRUE(LockWithTimeout(b.get(), "plan", 400, &waiting).ok());
  EXPECT_LT(waiting.Elapsed(), std::chrono::milliseconds(400));
}

// --- the history of events (AppendEvent / Events) ---

json Event(const std::string& time, const std::string& kind, int n = 0) {
  return json{{"time", time}, {"event", kind}, {"n", n}};
}

// "2026-11-29T17:<minute>:<second>Z" for the nth second after 17:00:00.
std::string TimeAt(int n) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "2026-11-29T%02d:%02d:%02dZ", 17 + n / 3600, n / 60 % 60, n % 60);
  return buf;
}

std::vector<int> Ns(const std::vector<json>& events) {
  std::vector<int> out;
  for (const json& e : events) out.push_back(e.value("n", -1));
  return out;
}

size_t LineCount(const std::string& path) {
  const std::string text = ReadFile(path);
  return static_cast<size_t>(std::count(text.begin(), text.end(), '\n'));
}

TEST_F(StateStoreTest, EventsAppendAndReadBackInOrder) {
  auto store = MakeLocalStateStore(path_);
  auto none = store->Events("");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(fs::exists(dir_));  // reading creates nothing
  json heal = Event(TimeAt(1), "heal", 1);
  heal["address"] = "deployment.qwen38@dgx5";
  heal["reason"] = "smoke math: got '72\n7'";  // a newline stays inside its line
  ASSERT_TRUE(store->AppendEvent(heal).ok());
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(2), "quarantine", 2)).ok());
  // Appended out of time order: kept in the order appended.
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(0), "sync", 3)).ok());
  auto all = MakeLocalStateStore(path_)->Events("");
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0], heal);
  EXPECT_EQ(Ns(*all), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(LineCount(path_ + ".events"), 3u);
  EXPECT_EQ(ModeOf(dir_), 0700u);  // made as the state's directory is
  EXPECT_TRUE(fs::exists(dir_ + "/.gitignore"));
}

TEST_F(StateStoreTest, EventsSinceKeepsThoseAtOrAfterIt) {
  auto store = MakeLocalStateStore(path_);
  for (int n = 1; n <= 5; ++n)
    ASSERT_TRUE(store->AppendEvent(Event(TimeAt(n * 60), "heal", n)).ok());
  // An event with a fraction and an offset: 17:03:30 UTC.
  ASSERT_TRUE(store->AppendEvent(Event("2026-11-29T18:03:30.5+01:00", "sync", 6)).ok());
  auto since = store->Events(TimeAt(180));  // 17:03:00, the third's time
  ASSERT_TRUE(since.ok()) << since.status().message();
  EXPECT_EQ(Ns(*since), (std::vector<int>{3, 4, 5, 6}));
  // The same instant written with an offset.
  EXPECT_EQ(Ns(*store->Events("2026-11-29T12:03:00-05:00")), (std::vector<int>{3, 4, 5, 6}));
  EXPECT_EQ(Ns(*store->Events("2026-11-29T17:03:30.5Z")), (std::vector<int>{4, 5, 6}));
  EXPECT_EQ(Ns(*store->Events("2026-11-29T17:03:30.6Z")), (std::vector<int>{4, 5}));
  EXPECT_TRUE(store->Events("2027-01-01T00:00:00Z")->empty());
  EXPECT_EQ(store->Events("")->size(), 6u);
  for (const char* bad : {"yesterday", "2026-11-29", "2026-11-29T17:03:00", "2026-02-30T00:00:00Z",
                          "2026-11-29T24:00:00Z"}) {
    auto refused = store->Events(bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_TRUE(Contains(refused.status().message(), "is not an RFC 3339 time"))
        << refused.status().message();
  }
}

TEST_F(StateStoreTest, EventsWithoutTimeOrKindAreRefused) {
  auto store = MakeLocalStateStore(path_);
  const std::vector<std::pair<json, std::string>> cases = {
      {json::array(), "must be a JSON object"},
      {json{{"event", "heal"}}, "needs \"time\""},
      {json{{"time", "now"}, {"event", "heal"}}, "needs \"time\""},
      {json{{"time", TimeAt(0)}}, "needs \"event\""},
      {json{{"time", TimeAt(0)}, {"event", ""}}, "needs \"event\""},
      {json{{"time", TimeAt(0)}, {"event", 7}}, "needs \"event\""},
  };
  for (const auto& [event, want] : cases) {
    Status s = store->AppendEvent(event);
    ASSERT_FALSE(s.ok()) << event.dump();
    EXPECT_TRUE(Contains(s.message(), want)) << s.message();
  }
  EXPECT_FALSE(fs::exists(path_ + ".events"));
}

TEST_F(StateStoreTest, EventsKeepTheLastThousand) {
  auto store = MakeLocalStateStore(path_);
  const std::string events = path_ + ".events";
  for (int n = 1; n <= static_cast<int>(kEventsRewriteAbove); ++n)
    ASSERT_TRUE(store->AppendEvent(Event(TimeAt(n), "heal", n)).ok());
  EXPECT_EQ(LineCount(events), kEventsRewriteAbove);  // not more than 1,100 yet
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(1101), "heal", 1101)).ok());
  EXPECT_EQ(LineCount(events), kEventsKept);
  EXPECT_EQ(ModeOf(events), 0600u);
  auto kept = store->Events("");
  ASSERT_TRUE(kept.ok()) << kept.status().message();
  ASSERT_EQ(kept->size(), kEventsKept);
  EXPECT_EQ(kept->front()["n"], 102);
  EXPECT_EQ(kept->back()["n"], 1101);
  // The rewrite left no temp file, and appends go on after it.
  std::vector<std::string> names = Names(dir_);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{".gitignore", "state.json.events"}));
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(1102), "heal", 1102)).ok());
  EXPECT_EQ(store->Events("")->back()["n"], 1102);
  EXPECT_EQ(LineCount(events), kEventsKept + 1);
}

TEST_F(StateStoreTest, EventsFileIs0600WhateverTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{0277}}) {
    SCOPED_TRACE("umask " + std::to_string(mask));
    std::error_code ec;
    fs::remove_all(dir_, ec);
    mode_t old = ::umask(mask);
    Status s = MakeLocalStateStore(path_)->AppendEvent(Event(TimeAt(0), "heal"));
    ::umask(old);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(ModeOf(path_ + ".events"), 0600u);
    EXPECT_EQ(ModeOf(dir_), 0700u);
  }
  // A file loosened by hand is tightened by the next append.
  ASSERT_EQ(::chmod((path_ + ".events").c_str(), 0644), 0);
  ASSERT_TRUE(MakeLocalStateStore(path_)->AppendEvent(Event(TimeAt(1), "heal")).ok());
  EXPECT_EQ(ModeOf(path_ + ".events"), 0600u);
}

TEST_F(StateStoreTest, ATornLastLineIsSkippedAndTheNextAppendIsWhole) {
  auto store = MakeLocalStateStore(path_);
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(1), "heal", 1)).ok());
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(2), "heal", 2)).ok());
  // A crash in the middle of the third append.
  {
    std::ofstream out(path_ + ".events", std::ios::binary | std::ios::app);
    out << R"({"event":"heal","n":3,"time":"2026-11-29T17:0)";
  }
  auto read = store->Events("");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(Ns(*read), (std::vector<int>{1, 2}));
  auto since = store->Events(TimeAt(2));
  ASSERT_TRUE(since.ok()) << since.status().message();
  EXPECT_EQ(Ns(*since), (std::vector<int>{2}));
  ASSERT_TRUE(store->AppendEvent(Event(TimeAt(4), "heal", 4)).ok());
  read = store->Events("");
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(Ns(*read), (std::vector<int>{1, 2, 4}));
}

TEST_F(StateStoreTest, EventsNeedNotTheStateLock) {
  std::string id;
  int release_fd;
  pid_t child = SpawnLockHolder(path_, &id, &release_fd);
  ASSERT_GT(child, 0);
  auto store = MakeLocalStateStore(path_);
  Status s = store->AppendEvent(Event(TimeAt(0), "heal_wait"));
  auto read = store->Events("");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(release_fd);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->size(), 1u);
}

// Forked appenders, through rewrites: no event is lost (an appender that
// waited on the old file's flock must append to the new file) or torn.
TEST_F(StateStoreTest, ConcurrentAppendersLoseNothing) {
  constexpr int kChildren = 4;
  constexpr int kEach = 600;  // 2,400 in all: a rewrite at the 1,101st, then every 101st
  std::vector<pid_t> children;
  for (int c = 0; c < kChildren; ++c) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto store = MakeLocalStateStore(path_);
      for (int i = 0; i < kEach; ++i) {
        json e = Event(TimeAt(i), "heal", c * kEach + i);
        e["pad"] = std::string(100 + i % 50, 'x');
        if (!store->AppendEvent(e).ok()) ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  auto read = MakeLocalStateStore(path_)->Events("");
  ASSERT_TRUE(read.ok()) << read.status().message();
  size_t lines = 0;  // what the file must hold after that many appends
  for (int i = 0; i < kChildren * kEach; ++i)
    if (++lines > kEventsRewriteAbove) lines = kEventsKept;
  EXPECT_EQ(read->size(), lines);
  EXPECT_EQ(LineCount(path_ + ".events"), read->size());
  // The file keeps a tail of the order the appends landed in, so each
  // appender's kept events are a tail of its own: in its order, without a
  // gap, ending at its last. An appender that finished early may have none
  // left (the others' later events pushed all of its out), but the last
  // appender to finish always has some.
  std::vector<int> first(kChildren, -1), last(kChildren, -1), kept(kChildren, 0);
  for (const json& e : *read) {
    const int n = e["n"];
    const int c = n / kEach;
    EXPECT_GT(n % kEach, last[c]) << n;
    if (first[c] < 0) first[c] = n % kEach;
    last[c] = n % kEach;
    ++kept[c];
  }
  int with_events = 0;
  for (int c = 0; c < kChildren; ++c) {
    if (kept[c] == 0) continue;
    ++with_events;
    EXPECT_EQ(last[c], kEach - 1) << c;
    EXPECT_EQ(kept[c], kEach - first[c]) << c;
  }
  EXPECT_GE(with_events, 1);
}

TEST(Rfc3339, ParsesToMicroseconds) {
  EXPECT_EQ(ParseRfc3339Micros("1970-01-01T00:00:00Z"), 0);
  EXPECT_EQ(ParseRfc3339Micros("1970-01-01T00:00:01.5Z"), 1500000);
  EXPECT_EQ(ParseRfc3339Micros("1970-01-01t01:00:00+01:00"), 0);
  EXPECT_EQ(ParseRfc3339Micros("2026-11-29T17:35:24Z"), int64_t{1795973724} * 1000000);
  EXPECT_EQ(ParseRfc3339Micros("2024-02-29T00:00:00.1234567z"),
            int64_t{1709164800} * 1000000 + 123456);
  for (const char* bad : {"", "2026-11-29T17:35:24", "2026-11-29 17:35:24Z", "2025-02-29T00:00:00Z",
                          "2026-13-01T00:00:00Z", "2026-11-29T17:35:24.Z",
                          "2026-11-29T17:35:24+1:00", "2026-11-29T17:35:24Zjunk"})
    EXPECT_FALSE(ParseRfc3339Micros(bad).has_value()) << bad;
}

// --- the bench runs' own history (AppendBenchRun / BenchRuns, issue #47) ---

json BenchRunOf(int n, const std::string& deployment) {
  return json{{"id", "run" + std::to_string(n)},
              {"time", TimeAt(n)},
              {"deployment", deployment},
              {"node", "dgx1"},
              {"profile", "quick"},
              {"outcome", "recorded"},
              {"record", {{"id", "run" + std::to_string(n)}, {"cells", json::array()}}}};
}

TEST_F(StateStoreTest, BenchRunsKeepTheLast1000ByDeployment) {
  auto store = MakeLocalStateStore(path_);
  auto none = store->BenchRuns("");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->empty());
  EXPECT_FALSE(store->AppendBenchRun(json{{"id", "x"}}).ok());  // not a run
  const int total = static_cast<int>(kBenchRunsRewriteAbove) + 1;
  for (int n = 1; n <= total; ++n) {
    Status s = store->AppendBenchRun(BenchRunOf(n, n % 2 ? "lab" : "other"));
    ASSERT_TRUE(s.ok()) << s.message();
  }
  // Kept once: the same id again is not a second run.
  ASSERT_TRUE(store->AppendBenchRun(BenchRunOf(total, "other")).ok());
  auto all = MakeLocalStateStore(path_)->BenchRuns("");
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_EQ(all->size(), kBenchRunsKept);
  EXPECT_EQ(all->front().value("id", ""), "run" + std::to_string(total - 999));
  EXPECT_EQ(all->back().value("id", ""), "run" + std::to_string(total));
  auto lab = store->BenchRuns("lab");
  ASSERT_TRUE(lab.ok());
  for (const json& r : *lab) EXPECT_EQ(r.value("deployment", ""), "lab");
  EXPECT_EQ(lab->size(), 500u);
  // The events are another history: none was written.
  EXPECT_TRUE(store->Events("")->empty());
  EXPECT_EQ(ModeOf(path_ + ".bench"), 0600u);
}

}  // namespace
}  // namespace fleet
