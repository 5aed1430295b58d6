// RenderPlan / RenderState on what nodes print.
#include "src/engine/render.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

// Bytes that are not UTF-8 in a probed attribute (a file name, a GPU name)
// made nlohmann's dump throw type_error 316 and ended `fleet plan` (found
// by fuzz/): they show as U+FFFD.
TEST(RenderTest, BytesThatAreNotUtf8ShowAsReplacementCharacters) {
  Plan plan;
  PlanChange c;
  c.address = "model.m@n1";
  c.type = "model";
  c.node = "n1";
  c.action = Action::kUpdate;
  c.summary = "restage";
  c.before = {{"file", "shard\xff.safetensors"}};
  c.after = {{"file", "shard.safetensors"}};
  plan.changes.push_back(c);
  std::string out;
  ASSERT_NO_THROW(out = RenderPlan(plan, {}));
  EXPECT_NE(out.find("shard\xEF\xBF\xBD.safetensors"), std::string::npos) << out;

  State state;
  state.lineage = "l";
  state.resources.push_back({"model.m@n1", "model", "n1", {{"file", "\xc3("}}, "t"});
  ASSERT_NO_THROW(out = RenderState(state));
  EXPECT_NE(out.find("\xEF\xBF\xBD("), std::string::npos) << out;
}

// An unreachable node is its own line, first, whatever follows from it (the
// lab's names not resolving gave a fabric error quoting the resolver three
// parentheses deep, and nothing of the other nodes).
TEST(RenderTest, EachUnreachableNodeIsOneLineBeforeTheErrors) {
  Plan plan;
  plan.unreachable["dgx1"] = "dgx1 (u@dgx1.lab:22): cannot connect: Failed to resolve hostname";
  plan.unreachable["dgx2"] = "connection refused";
  plan.errors.push_back({"deployment.p@dgx1", "deployment.p@dgx1: dgx1 has no fabric address", ""});
  const std::string out = RenderPlan(plan, {});
  EXPECT_EQ(out.rfind("Unreachable: dgx1 (u@dgx1.lab:22): cannot connect: Failed to resolve "
                      "hostname\nUnreachable: dgx2: connection refused\nError: ",
                      0),
            0u)
      << out;
}

// A diagnostic is one line: its summary, then its detail in parentheses.
TEST(RenderTest, ErrorIsTheDiagnosticsLine) {
  Plan plan;
  plan.errors.push_back(
      {"serve.s@n1", "serve.s@n1 must wait for serve.old@n1", "add it with --target"});
  plan.errors.push_back({"", "dependency cycle between resources", ""});
  const std::string out = RenderPlan(plan, {});
  EXPECT_NE(out.find("Error: serve.s@n1 must wait for serve.old@n1 (add it with --target)\n"
                     "Error: dependency cycle between resources\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("Plan failed: 2 error(s)"), std::string::npos) << out;
}

}  // namespace
}  // namespace fleet
