// The staging lock's keeper run for real, on this machine (LocalTransport:
// the same script an SSH node runs), with fake keepers standing in for a
// killed controller's keeper that has not noticed yet.
#include "providers/model/staging_lock.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "src/local_transport.h"
#include "src/process_identity.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

std::unique_ptr<Transport> Local() { return std::make_unique<LocalTransport>(SshEndpoint{"dgx1"}); }

bool Exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Running and not a zombie.
bool Alive(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return false;
  size_t close = stat.rfind(") ");
  return close != std::string::npos && stat[close + 2] != 'Z';
}

// A fleet process of this host that runs (until KillLive): its id.
pid_t live_pid = 0;
std::string LiveControllerId() {
  int fds[2];
  if (::pipe(fds) != 0) return "";
  live_pid = ::fork();
  if (live_pid == 0) {
    std::string id = ThisControllerId();
    (void)!::write(fds[1], id.data(), id.size());
    ::close(fds[1]);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  char buf[256] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}
void KillLive() {
  if (live_pid <= 0) return;
  ::kill(live_pid, SIGKILL);
  ::waitpid(live_pid, nullptr, 0);
  live_pid = 0;
}

// The id of a fleet process of this host that has exited.
std::string DeadControllerId() {
  const std::string id = LiveControllerId();
  KillLive();
  return id;
}

class StagingLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/staging_lock_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    cache_ = tmpl;
    lock_ = StagingLockPath(cache_, "org/tiny");
  }
  void TearDown() override {
    if (fake_pid_ > 0) ::kill(static_cast<pid_t>(fake_pid_), SIGKILL);
    std::system(("rm -rf -- " + ShellQuote(cache_)).c_str());
  }

  // A keeper the way a killed controller leaves it: alive, holding the lock
  // with the owner line "PID HOST BOOT NOW CONTROLLER", removing the lock
  // when it is ended (as the real keeper's trap does).
  void FakeKeeper(const std::string& controller, const std::string& pid_ns = "") {
    ASSERT_EQ(::mkdir(lock_.c_str(), 0755), 0);
    const std::string pid_file = cache_ + "/fake.pid";
    const std::string cmd = "l=" + ShellQuote(lock_) +
                            "; sh -c 'trap \"rm -rf -- \\\"$0\\\"; exit 0\" TERM; "
                            "while :; do sleep 0.1; done' \"$l\" >/dev/null 2>&1 & echo $! > " +
                            ShellQuote(pid_file);
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    fake_pid_ = std::stol(ReadLine(pid_file));
    struct utsname u;
    ASSERT_EQ(::uname(&u), 0);
    const std::string owner = std::to_string(fake_pid_) + " " + u.nodename + " " +
                              ReadLine("/proc/sys/kernel/random/boot_id") + " " +
                              std::to_string(::time(nullptr)) + " " + controller +
                              (pid_ns.empty() ? "" : " " + pid_ns);
    std::ofstream(lock_ + "/owner") << owner << "\n";
    fake_owner_ = owner;
  }

  std::string cache_, lock_, fake_owner_;
  long fake_pid_ = 0;
};

TEST_F(StagingLockTest, TakesAFreeLockNamingThisControllerAndReleasesIt) {
  std::string took = "unset";
  auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", &took);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(took, "");
  EXPECT_EQ(h.value()->owner().controller, ThisControllerId());
  EXPECT_EQ(ReadLine(lock_ + "/owner"), h.value()->owner().owner);
  auto control = Local();
  EXPECT_TRUE(h.value()->Release(control.get()).ok());
  EXPECT_FALSE(Exists(lock_));
}

TEST_F(StagingLockTest, ALockOfThisLiveControllerIsRefusedNamingIt) {
  auto first = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  ASSERT_TRUE(first.ok()) << first.status().message();
  auto second = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  ASSERT_FALSE(second.ok());
  const std::string id = ThisControllerId();
  const std::string host = id.substr(0, id.find('/'));
  EXPECT_NE(
      second.status().message().find("for fleet pid " + std::to_string(::getpid()) + " on " + host),
      std::string::npos)
      << second.status().message();
  EXPECT_TRUE(Exists(lock_ + "/owner"));
  auto control = Local();
  EXPECT_TRUE(first.value()->Release(control.get()).ok());
}

TEST_F(StagingLockTest, ADeadControllersLiveKeeperIsEndedAndItsLockTakenAtOnce) {
  const std::string dead = DeadControllerId();
  ASSERT_TRUE(ControllerIsGone(dead)) << dead;
  FakeKeeper(dead);
  std::string took;
  auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", &took);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(took, fake_owner_ + ": its fleet process (" + dead + ") is gone");
  EXPECT_FALSE(Alive(fake_pid_)) << "the old keeper was not ended";
  // The old keeper's trap ran before the lock was taken again, not after.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(ReadLine(lock_ + "/owner"), h.value()->owner().owner);
  EXPECT_EQ(h.value()->owner().controller, ThisControllerId());
  auto control = Local();
  EXPECT_TRUE(h.value()->Release(control.get()).ok());
  EXPECT_FALSE(Exists(lock_));
}

TEST_F(StagingLockTest, ALiveControllersLockIsNeverTakenOver) {
  const std::string live = LiveControllerId();
  ASSERT_FALSE(ControllerIsGone(live)) << live;
  FakeKeeper(live);
  auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  KillLive();
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("staging in progress by pid " + std::to_string(fake_pid_)),
            std::string::npos)
      << h.status().message();
  EXPECT_TRUE(Alive(fake_pid_)) << "the live controller's keeper was ended";
  EXPECT_EQ(ReadLine(lock_ + "/owner"), fake_owner_);
}

// A keeper of another pid namespace on the same node (a container sharing
// the cache): its pid means nothing here, dead controller or not.
TEST_F(StagingLockTest, AKeeperOfAnotherPidNamespaceIsNeverJudged) {
  const std::string dead = DeadControllerId();
  FakeKeeper(dead, "1");
  auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  ASSERT_FALSE(h.ok());
  EXPECT_TRUE(Alive(fake_pid_)) << "a keeper of another pid namespace was ended";
  // Its pid gone from here changes nothing either.
  ::kill(static_cast<pid_t>(fake_pid_), SIGKILL);
  for (int i = 0; i < 100 && Alive(fake_pid_); ++i) ::usleep(20000);
  std::ofstream(lock_ + "/owner") << fake_owner_ << "\n";  // (no trap ran on SIGKILL)
  h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(ReadLine(lock_ + "/owner"), fake_owner_);
  fake_pid_ = 0;
}

// An owner-less lock folder is an older fleet's (this one's is born with
// its owner): its holder gets a minute, unless the node booted since.
TEST_F(StagingLockTest, AnOwnerlessLockWaitsAMinuteUnlessTheNodeBootedSince) {
  ASSERT_EQ(::mkdir(lock_.c_str(), 0755), 0);
  auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("lock without an owner yet"), std::string::npos)
      << h.status().message();
  // Made before the boot: no process of this boot can hold it.
  ASSERT_EQ(std::system(("touch -d @1000000000 " + ShellQuote(lock_)).c_str()), 0);
  std::string took;
  h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", &took);
  ASSERT_TRUE(h.ok()) << h.status().message();
  EXPECT_EQ(took, "(no owner): not running");
  EXPECT_EQ(ReadLine(lock_ + "/owner"), h.value()->owner().owner);
  auto control = Local();
  EXPECT_TRUE(h.value()->Release(control.get()).ok());
}

TEST_F(StagingLockTest, ALockOfAnotherMachineOrNoControllerIsNeverTakenOver) {
  // A dead pid, but named by another host: this host cannot judge it.
  const std::string dead = DeadControllerId();
  // Or the same host name with another boot or pid namespace (another CI
  // runner called the same): its pid means nothing here.
  const std::string other_scope =
      dead.substr(0, dead.rfind('/')) + "/0" + dead.substr(dead.rfind('/') + 1);
  for (const std::string& controller : {std::string("not-") + dead, other_scope, std::string("")}) {
    SCOPED_TRACE(controller);
    FakeKeeper(controller);
    auto h = StagingLockHolder::Acquire(Local(), cache_, "org/tiny", nullptr);
    ASSERT_FALSE(h.ok());
    EXPECT_NE(h.status().message().find("staging in progress by pid " + std::to_string(fake_pid_)),
              std::string::npos)
        << h.status().message();
    EXPECT_TRUE(Alive(fake_pid_));
    EXPECT_EQ(ReadLine(lock_ + "/owner"), fake_owner_);
    ::kill(static_cast<pid_t>(fake_pid_), SIGTERM);
    for (int i = 0; i < 100 && Exists(lock_); ++i) ::usleep(20000);
    ASSERT_FALSE(Exists(lock_));
    fake_pid_ = 0;
  }
}

}  // namespace
}  // namespace fleet
