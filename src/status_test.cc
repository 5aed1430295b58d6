#include "src/status.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(StatusTest, WrappersKeepTheUnreachableMark) {
  // The executor skips later steps on a node whose step failed unreachable;
  // a wrapper that adds context must not hide that.
  const Status dark = Status::Unreachable("cannot connect (timeout 10 s)");
  EXPECT_TRUE(dark.Prefixed("model.m@dgx2").unreachable());
  EXPECT_EQ(dark.Prefixed("model.m@dgx2").message(), "model.m@dgx2: cannot connect (timeout 10 s)");
  const Status reworded = dark.Reworded(dark.message() + " (module restored)");
  EXPECT_FALSE(reworded.ok());
  EXPECT_TRUE(reworded.unreachable());
  EXPECT_EQ(reworded.message(), "cannot connect (timeout 10 s) (module restored)");
  EXPECT_FALSE(Status::Error("exit 1").Reworded("exit 1; more").unreachable());
  EXPECT_FALSE(Status::OK().Reworded("a failure after all").ok());
  EXPECT_TRUE(Status::OK().Prefixed("x").ok());
}

TEST(StatusTest, WrappersKeepTheOwnFaultMark) {
  const Status own = Status::OwnFault("socket: Too many open files (EMFILE)");
  EXPECT_TRUE(own.own_fault());
  EXPECT_FALSE(own.unreachable());
  EXPECT_TRUE(own.Prefixed("smoke model").own_fault());
  EXPECT_FALSE(Status::Unreachable("refused").own_fault());
}

TEST(StatusTest, CallersBranchOnTheCodeNotTheText) {
  const Status held = Status::LockHeld("state is locked by root@box pid 42 (apply)");
  EXPECT_FALSE(held.ok());
  EXPECT_TRUE(held.lock_held());
  EXPECT_EQ(held.code(), StatusCode::kLockHeld);
  EXPECT_TRUE(held.Prefixed("apply").lock_held());
  // The words alone make nothing typed.
  EXPECT_FALSE(Status::Error("state is locked by root@box").lock_held());
  EXPECT_EQ(Status::Error("x").code(), StatusCode::kFailed);
  EXPECT_EQ(Status::OK().code(), StatusCode::kOk);
  const Status taken = Status::AlreadyExists("the name fleet-a is already in use");
  EXPECT_TRUE(taken.already_exists());
  EXPECT_FALSE(taken.unreachable());
  EXPECT_FALSE(taken.lock_held());
  EXPECT_TRUE(Status::Unreachable("refused").Reworded("more").unreachable());
  const Status missing = Status::NotFound("no such repo");
  EXPECT_TRUE(missing.not_found());
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_TRUE(missing.Prefixed("model.m").not_found());
  EXPECT_FALSE(missing.unreachable());
  EXPECT_FALSE(Status::Error("no such repo").not_found());
}

}  // namespace
}  // namespace fleet
