#include "tests/support/run_shell.h"

#include <stdio.h>
#include <sys/wait.h>

namespace fleet::testing_support {

ShellRun RunShell(const std::string& command) {
  ShellRun run;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return run;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) run.out.append(buf, n);
  const int status = pclose(p);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace fleet::testing_support
