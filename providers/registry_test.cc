#include <gtest/gtest.h>

#include <set>

#include "src/provider.h"

namespace fleet {
namespace {

// The engine's commands find serves, gateways and images by RoleOf, never
// by the type's name: each role is the one provider's that has it.
TEST(Registry, RoleOfNamesTheProviderThatPlaysIt) {
  EXPECT_EQ(RoleOf("deployment"), Role::kServe);
  EXPECT_EQ(RoleOf("gateway"), Role::kGateway);
  EXPECT_EQ(RoleOf("image"), Role::kImage);
  for (const char* type : {"node", "probe", "display_ram", "model"})
    EXPECT_EQ(RoleOf(type), Role::kOther) << type;
  EXPECT_EQ(RoleOf("no_such_type"), Role::kOther);
}

TEST(Registry, EachRoleButOtherHasOneProvider) {
  std::set<Role> seen;
  for (const std::unique_ptr<Provider>& p : MakeProviders()) {
    if (p->role() == Role::kOther) continue;
    EXPECT_TRUE(seen.insert(p->role()).second) << p->type() << " repeats a role";
  }
  EXPECT_EQ(seen.size(), 3u);
}

}  // namespace
}  // namespace fleet
