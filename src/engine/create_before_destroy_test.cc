#include "src/engine/create_before_destroy.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

PlanChange Change(const std::string& address, Action action, std::vector<std::string> deps = {}) {
  PlanChange c;
  c.address = address;
  c.action = action;
  c.depends_on = std::move(deps);
  return c;
}

const PlanChange::RemovalAfter kAwayFromDgx1{"deployment.a@dgx1", "503 meanwhile"};

// A move to a free node: the new serve, then the reload, then the removal.
TEST(CreateBeforeDestroy, TheOldServeWaitsForTheReload) {
  std::vector<PlanChange> changes = {
      Change("deployment.a@dgx1", Action::kDelete), Change("deployment.a@dgx5", Action::kCreate),
      Change("gateway.lab@dgx4", Action::kUpdate, {"deployment.a@dgx5"})};
  changes[2].before_removals = {kAwayFromDgx1};
  OrderCreateBeforeDestroy(&changes);
  EXPECT_EQ(changes[0].depends_on, std::vector<std::string>{"gateway.lab@dgx4"});
  EXPECT_TRUE(changes[2].reasons.empty());
}

// The new serve needs the old one's node: stop first, and the plan says so.
TEST(CreateBeforeDestroy, WhereTheRemovalMustComeFirstThePlanSays503) {
  std::vector<PlanChange> changes = {
      Change("deployment.a@dgx1", Action::kDelete),
      Change("deployment.b@dgx1", Action::kCreate, {"deployment.a@dgx1"}),
      Change("gateway.lab@dgx4", Action::kUpdate, {"deployment.b@dgx1"})};
  changes[2].before_removals = {kAwayFromDgx1};
  OrderCreateBeforeDestroy(&changes);
  EXPECT_TRUE(changes[0].depends_on.empty());
  EXPECT_EQ(changes[2].reasons, std::vector<std::string>{"503 meanwhile"});
}

// Nothing to order: the old serve is not removed in this plan, or the
// reload is not planned.
TEST(CreateBeforeDestroy, OnlyADeleteWaitsAndOnlyForAPlannedChange) {
  std::vector<PlanChange> changes = {Change("deployment.a@dgx1", Action::kNoop),
                                     Change("gateway.lab@dgx4", Action::kUpdate),
                                     Change("gateway.lab@dgx6", Action::kNoop)};
  changes[1].before_removals = {kAwayFromDgx1};
  changes[2].before_removals = {kAwayFromDgx1};
  OrderCreateBeforeDestroy(&changes);
  EXPECT_TRUE(changes[0].depends_on.empty());
  changes[0].action = Action::kDelete;
  OrderCreateBeforeDestroy(&changes);
  EXPECT_EQ(changes[0].depends_on, std::vector<std::string>{"gateway.lab@dgx4"});
}

}  // namespace
}  // namespace fleet
