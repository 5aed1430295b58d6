#include "src/engine/removal_order.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

PlanChange Change(const std::string& type, const std::string& name, const std::string& node,
                  Action action) {
  PlanChange c;
  c.type = type;
  c.node = node;
  c.address = type + "." + name + "@" + node;
  c.action = action;
  return c;
}

const std::vector<std::string> kTypes = {"node",  "probe", "display_ram",
                                         "image", "model", "deployment"};

// The purge the fault tests found: serve, image and model all dropped from
// the manifests; the image and model must wait for the serve's removal.
TEST(OrderUndeclaredRemovals, ImageAndModelWaitForTheServeOnTheirNode) {
  std::vector<PlanChange> changes = {
      Change("image", "bb", "dgx2", Action::kDelete),
      Change("model", "m", "dgx2", Action::kDelete),
      Change("deployment", "serve", "dgx2", Action::kDelete),
      Change("image", "bb", "dgx3", Action::kDelete),
  };
  OrderUndeclaredRemovals({}, kTypes, &changes);
  EXPECT_EQ(changes[0].depends_on,
            (std::vector<std::string>{"model.m@dgx2", "deployment.serve@dgx2"}));
  EXPECT_EQ(changes[1].depends_on, std::vector<std::string>{"deployment.serve@dgx2"});
  EXPECT_TRUE(changes[2].depends_on.empty());
  EXPECT_TRUE(changes[3].depends_on.empty());  // another node: nothing to wait for
}

TEST(OrderUndeclaredRemovals, DeclaredChangesAndOtherActionsAreLeftAlone) {
  std::vector<PlanChange> changes = {
      Change("image", "bb", "dgx2", Action::kDelete),         // declared: its own graph
      Change("image", "old", "dgx2", Action::kDelete),        // undeclared
      Change("deployment", "new", "dgx2", Action::kCreate),   // not a removal
      Change("deployment", "kept", "dgx2", Action::kDelete),  // declared removal
  };
  changes[1].depends_on = {"deployment.kept@dgx2"};  // already there: not repeated
  OrderUndeclaredRemovals({{"image.bb@dgx2", {}}, {"deployment.kept@dgx2", {}}}, kTypes, &changes);
  EXPECT_TRUE(changes[0].depends_on.empty());
  EXPECT_EQ(changes[1].depends_on, std::vector<std::string>{"deployment.kept@dgx2"});
  EXPECT_TRUE(changes[2].depends_on.empty());
  EXPECT_TRUE(changes[3].depends_on.empty());
}

}  // namespace
}  // namespace fleet
