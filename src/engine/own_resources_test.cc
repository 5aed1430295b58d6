#include "src/engine/own_resources.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

namespace fleet {
namespace {

TEST(RaiseFileLimit, TheSoftLimitBecomesTheHardOne) {
  rlimit l{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &l), 0);
  rlimit low = l;
  low.rlim_cur = std::min<rlim_t>(256, l.rlim_max);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  const FileLimit raised = RaiseFileLimit();
  EXPECT_EQ(raised.error, "");
  EXPECT_EQ(raised.soft, l.rlim_max);
  EXPECT_EQ(raised.hard, l.rlim_max);
  rlimit now{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, l.rlim_max);
}

TEST(CheckOwnHeadroom, NoDescriptorLeftIsAnOwnFault) {
  EXPECT_TRUE(CheckOwnHeadroom().ok());
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  const Status s = CheckOwnHeadroom();
  for (int fd : held) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(s.own_fault());
  EXPECT_EQ(s.message(), "cannot open a socket: Too many open files (EMFILE)");
}

}  // namespace
}  // namespace fleet
