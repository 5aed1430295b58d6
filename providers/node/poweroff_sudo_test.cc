// poweroff_sudo.sh on its own under /bin/sh, with stand-ins for sudo and
// id: what the plan's node probe says of the node's sudo and the poweroff
// command.
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "providers/node/node_provider.h"
#include "src/shell_quote.h"
#include "tests/support/stub_cli.h"

namespace fleet {
namespace {

class PoweroffSudoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(dir_, "");
    stub_.Tool("id", "[ \"$1\" = -un ] && echo kilork\n");
  }
  // sudo: writes its arguments, one a line, to sudo.argv; exits `rc`.
  void Sudo(int rc) {
    stub_.Tool("sudo", "printf '%s\\n' \"$@\" > " + ShellQuote(dir_ + "/sudo.argv") + "\nexit " +
                           std::to_string(rc) + "\n");
  }
  std::string Run(const std::vector<std::string>& argv, const std::string& env = "") {
    return stub_.Run(PoweroffSudoScript(argv), env).out;
  }

  const testing_support::StubCli stub_{"poweroff_sudo_test"};
  const std::string dir_ = stub_.dir();
};

TEST_F(PoweroffSudoTest, AllowedAsksSudoForTheCommandAsPathGivesIt) {
  stub_.Tool("systemctl", "exit 0\n");
  Sudo(0);
  const std::string out = Run({"systemctl", "power off"});
  const std::string command = stub_.bin() + "/systemctl power off";
  EXPECT_EQ(out, "poweroff_sudo_user=kilork\npoweroff_sudo_command=" + command +
                     "\npoweroff_sudo=allowed\n");
  // One argument with its space: sudo -l is asked about exactly that.
  EXPECT_EQ(stub_.Read("sudo.argv"), "-n\n-l\n" + stub_.bin() + "/systemctl\npower off\n");
  const PoweroffSudo parsed = ParsePoweroffSudo(out);
  EXPECT_TRUE(parsed.checked);
  EXPECT_TRUE(parsed.allowed);
  EXPECT_EQ(parsed.user, "kilork");
  EXPECT_EQ(parsed.command, command);
}

TEST_F(PoweroffSudoTest, RefusedAndNoSudo) {
  Sudo(1);
  // Not on PATH: the word as given; no arguments: no trailing space.
  EXPECT_EQ(Run({"fleet-test-poweroff"}),
            "poweroff_sudo_user=kilork\npoweroff_sudo_command=fleet-test-poweroff\n"
            "poweroff_sudo=refused\n");
  EXPECT_EQ(stub_.Read("sudo.argv"), "-n\n-l\nfleet-test-poweroff\n");
  EXPECT_FALSE(ParsePoweroffSudo(Run({"fleet-test-poweroff"})).allowed);
  // Only the stand-ins on PATH, and no sudo among them.
  ASSERT_EQ(unlink((stub_.bin() + "/sudo").c_str()), 0);
  EXPECT_EQ(Run({"fleet-test-poweroff", "-f"}, "PATH=" + ShellQuote(stub_.bin())),
            "poweroff_sudo_user=kilork\npoweroff_sudo_command=fleet-test-poweroff -f\n"
            "poweroff_sudo=no-sudo\n");
}

TEST_F(PoweroffSudoTest, TheWordsAreNeverShell) {
  Sudo(1);
  const std::string out = Run({"fleet-test-poweroff", "$(touch pwned)", "a;b"});
  EXPECT_NE(out.find("poweroff_sudo_command=fleet-test-poweroff $(touch pwned) a;b\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(stub_.Read("sudo.argv"), "-n\n-l\nfleet-test-poweroff\n$(touch pwned)\na;b\n");
  EXPECT_NE(access((dir_ + "/pwned").c_str(), F_OK), 0);
  EXPECT_TRUE(PoweroffSudoScript({}).empty());
}

}  // namespace
}  // namespace fleet
