#include "src/process_identity.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace fleet {
namespace {

// The four fields of an id: HOST, PID, START, SCOPE.
std::vector<std::string> Fields(const std::string& id) {
  std::vector<std::string> f;
  size_t from = 0;
  for (int i = 0; i < 3; ++i) {
    size_t slash = id.find('/', from);
    if (slash == std::string::npos) break;
    f.push_back(id.substr(from, slash - from));
    from = slash + 1;
  }
  f.push_back(id.substr(from));
  return f;
}
std::string HostOf(const std::string& id) { return Fields(id)[0]; }

TEST(ProcessIdentity, ThisProcessIsOneWordAndNotGone) {
  const std::string id = ThisControllerId();
  EXPECT_EQ(id.find_first_of(" \t\n"), std::string::npos) << id;
  const std::vector<std::string> f = Fields(id);
  ASSERT_EQ(f.size(), 4u) << id;
  EXPECT_EQ(f[1], std::to_string(::getpid()));
  EXPECT_NE(f[2], "0");
  EXPECT_NE(f[3], "-");  // boot id and pid namespace readable here
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
  const std::vector<std::string> f = Fields(ThisControllerId());
  const std::string other_start = std::to_string(std::stoull(f[2]) + 1);
  EXPECT_TRUE(ControllerIsGone(f[0] + "/" + std::to_string(::getpid() == 1 ? 2 : 1) + "/" +
                               other_start + "/" + f[3]));
}

TEST(ProcessIdentity, AnotherMachineNamespaceOrGarbageIsNeverGone) {
  const std::vector<std::string> f = Fields(ThisControllerId());
  const std::string h = f[0], scope = f[3];
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

}  // namespace
}  // namespace fleet
