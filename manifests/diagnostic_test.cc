#include "manifests/diagnostic.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(SourceLocTest, ToStringHasAsMuchAsIsKnown) {
  EXPECT_EQ((SourceLoc{"fleet.yaml", 12, 5}).ToString(), "fleet.yaml:12:5");
  EXPECT_EQ((SourceLoc{"fleet.yaml", 12, 0}).ToString(), "fleet.yaml:12");
  EXPECT_EQ((SourceLoc{"fleet.yaml", 0, 0}).ToString(), "fleet.yaml");
  EXPECT_EQ((SourceLoc{"recipes/a.toml", 3, 1}).ToString(),
            "recipes/a.toml:3:1");
}

TEST(DiagnosticTest, ToStringIsLocationSeverityMessage) {
  Diagnostic error{
      Diagnostic::Severity::kError, {"fleet.yaml", 12, 5}, "unknown key 'x'"};
  EXPECT_EQ(error.ToString(), "fleet.yaml:12:5: error: unknown key 'x'");
  Diagnostic warning{
      Diagnostic::Severity::kWarning, {"fleet.yaml", 1, 2}, "floats"};
  EXPECT_EQ(warning.ToString(), "fleet.yaml:1:2: warning: floats");
  Diagnostic unlocated{Diagnostic::Severity::kError, {}, "no fleet.yaml"};
  EXPECT_EQ(unlocated.ToString(), "error: no fleet.yaml");
}

TEST(DiagnosticTest, HasErrorsIgnoresWarnings) {
  Diagnostics diags;
  EXPECT_FALSE(HasErrors(diags));
  diags.push_back({Diagnostic::Severity::kWarning, {}, "w"});
  EXPECT_FALSE(HasErrors(diags));
  diags.push_back({Diagnostic::Severity::kError, {}, "e"});
  EXPECT_TRUE(HasErrors(diags));
}

TEST(NearestNameTest, FindsOneTypoAway) {
  const std::vector<std::string> keys = {"address", "ssh", "hostname", "power",
                                         "paths"};
  EXPECT_EQ(NearestName("adress", keys), "address");    // deletion
  EXPECT_EQ(NearestName("addresss", keys), "address");  // insertion
  EXPECT_EQ(NearestName("adrdess", keys), "address");   // transposition
  EXPECT_EQ(NearestName("hostnmae", keys), "hostname");
  EXPECT_EQ(NearestName("Address", keys), "address");  // case only
  EXPECT_EQ(NearestName("pwer", keys), "power");
}

TEST(NearestNameTest, NoHintWhenNothingIsClose) {
  const std::vector<std::string> keys = {"address", "ssh", "hostname"};
  EXPECT_EQ(NearestName("frobnicate", keys), "");
  EXPECT_EQ(NearestName("port", keys), "");
  EXPECT_EQ(NearestName("", keys), "");
  EXPECT_EQ(NearestName("x", {}), "");
}

TEST(NearestNameTest, NoHintWhenTwoAreEquallyClose) {
  // dgx9 is one edit from both: guessing would mislead.
  EXPECT_EQ(NearestName("dgx9", {"dgx1", "dgx2"}), "");
  EXPECT_EQ(NearestName("b12y", {"b12x", "exl3"}), "b12x");
}

TEST(NearestNameTest, ThresholdGrowsWithLength) {
  EXPECT_EQ(NearestName("qwen", {"qwen38"}), "");  // two edits on four letters
  EXPECT_EQ(NearestName("deploymnts", {"deployments"}), "deployments");
  EXPECT_EQ(NearestName("conect_timout", {"connect_timeout"}),
            "connect_timeout");
}

}  // namespace
}  // namespace fleet
