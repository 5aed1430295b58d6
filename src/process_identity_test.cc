#include "src/process_identity.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace fleet {
namespace {

std::string HostOf(const std::string& id) { return ParseControllerId(id).value().host; }

TEST(ProcessIdentity, ThisProcessIsOneWordAndNotGone) {
  const std::string id = ThisControllerId();
  EXPECT_EQ(id.find_first_of(" \t\n"), std::string::npos) << id;
  const std::optional<ControllerId> c = ParseControllerId(id);
  ASSERT_TRUE(c.has_value()) << id;
  EXPECT_EQ(c->pid, static_cast<long>(::getpid()));
  EXPECT_NE(c->start, 0u);
  EXPECT_NE(c->scope, "-");  // boot id and pid namespace readable here
  EXPECT_FALSE(ControllerIsGone(id));
}

TEST(ProcessIdentity, ALiveProcessOfThisHostIsNotGone) {
  const std::string id = ThisControllerId();
  // A child reports its own id through a pipe, then waits to be killed.
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::string mine = ThisControllerId();
    (void)!::write(fds[1], mine.data(), mine.size());
    ::close(fds[1]);
    ::pause();
    _exit(0);
  }
  ::close(fds[1]);
  char buf[256] = {};
  ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  ASSERT_GT(n, 0);
  const std::string child_id(buf, static_cast<size_t>(n));
  EXPECT_EQ(HostOf(child_id), HostOf(id));
  EXPECT_FALSE(ControllerIsGone(child_id)) << "running child " << child_id;

  ::kill(child, SIGKILL);
  // A zombie (killed, not reaped yet) holds no connection any more: gone.
  for (int i = 0; i < 100 && !ControllerIsGone(child_id); ++i) ::usleep(10000);
  EXPECT_TRUE(ControllerIsGone(child_id)) << "killed, unreaped child " << child_id;
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(ControllerIsGone(child_id)) << "reaped child " << child_id;
}

TEST(ProcessIdentity, AReusedPidIsGone) {
  const ControllerId c = ParseControllerId(ThisControllerId()).value();
  EXPECT_TRUE(ControllerIsGone(c.host + "/" + std::to_string(::getpid() == 1 ? 2 : 1) + "/" +
                               std::to_string(c.start + 1) + "/" + c.scope));
}

TEST(ProcessIdentity, AnotherMachineNamespaceOrGarbageIsNeverGone) {
  const ControllerId c = ParseControllerId(ThisControllerId()).value();
  const std::string h = c.host, scope = c.scope;
  // A pid that runs nowhere, named by another hostname, or by this hostname
  // with another boot or pid namespace (another CI runner called the same).
  EXPECT_TRUE(ControllerIsGone(h + "/999999999/5/" + scope));
  EXPECT_FALSE(ControllerIsGone("not-" + h + "/999999999/5/" + scope));
  EXPECT_FALSE(ControllerIsGone(h + "/999999999/5/0" + scope));
  EXPECT_FALSE(ControllerIsGone(h + "/999999999/5/-"));
  for (const std::string& bad : std::vector<std::string>{
           "", "/", "///", h, h + "/", h + "/12", h + "//5/" + scope, h + "/x/5/" + scope,
           h + "/-3/5/" + scope, h + "/0/5/" + scope, h + "/123/0/" + scope, h + "/123/5",
           h + "/123/5/" + scope + "/6", h + "/99999999999999999999999/5/" + scope})
    EXPECT_FALSE(ControllerIsGone(bad)) << bad;
}

TEST(ProcessIdentity, AnIdIsReadWholeOrNotAtAll) {
  const std::optional<ControllerId> c = ParseControllerId("spark-ctl/4242/987/b00t.4026531836");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->host, "spark-ctl");
  EXPECT_EQ(c->pid, 4242);
  EXPECT_EQ(c->start, 987u);
  EXPECT_EQ(c->scope, "b00t.4026531836");
  EXPECT_TRUE(ParseControllerId("h/1/0/-").has_value());  // start and scope unreadable
  for (const char* bad : {"", "/", "///", "h", "h/", "h/12", "h//5/s", "/1/5/s", "h/x/5/s",
                          "h/-3/5/s", "h/0/5/s", "h/1/-5/s", "h/1/5/", "h/1/5/s/6", "h/1/5 /s",
                          "h/99999999999999999999999/5/s", "h/4294967295/5/s", "h/4295967295/5/s"})
    EXPECT_FALSE(ParseControllerId(bad).has_value()) << bad;
}

}  // namespace
}  // namespace fleet
