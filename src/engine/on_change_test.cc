#include "src/engine/on_change.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(OnChangeEnvironment, OnlyTheNamedVariablesAndAMinimalBase) {
  const char* env[] = {"PATH=/opt/bin:/usr/bin",
                       "HOME=/home/lab",
                       "LANG=C.UTF-8",
                       "FLEET_DEMO_HA_TOKEN=ha1",
                       "HF_TOKEN=hf_abc",
                       "SLACK_HOOK=https://h",
                       "PAGER_KEY=k",
                       "LANGUAGE=ignored",
                       nullptr};
  const std::vector<std::string> out =
      OnChangeEnvironment({"SLACK_HOOK", "UNSET_NAME", "SLACK_HOOK"}, const_cast<char**>(env));
  EXPECT_EQ(out, (std::vector<std::string>{"PATH=/opt/bin:/usr/bin", "HOME=/home/lab",
                                           "LANG=C.UTF-8", "SLACK_HOOK=https://h"}));
}

TEST(OnChangeEnvironment, APathEvenWhenTheWatchHasNone) {
  const char* env[] = {"HF_TOKEN=hf_abc", nullptr};
  EXPECT_EQ(OnChangeEnvironment({}, const_cast<char**>(env)),
            (std::vector<std::string>{"PATH=/usr/local/bin:/usr/bin:/bin"}));
}

}  // namespace
}  // namespace fleet
