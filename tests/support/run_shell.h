// Runs a command line under /bin/sh and keeps what it printed on stdout and
// how it ended: the popen loop unit tests of node-side scripts all need.
#ifndef FLEET_TESTS_SUPPORT_RUN_SHELL_H_
#define FLEET_TESTS_SUPPORT_RUN_SHELL_H_

#include <string>

namespace fleet::testing_support {

struct ShellRun {
  std::string out;     // stdout; stderr goes to the test's own
  int exit_code = -1;  // -1 when killed by a signal or not started
};

ShellRun RunShell(const std::string& command);

}  // namespace fleet::testing_support

#endif  // FLEET_TESTS_SUPPORT_RUN_SHELL_H_
