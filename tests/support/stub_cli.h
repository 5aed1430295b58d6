// Stand-in command-line tools for node-side scripts: a scratch folder whose
// bin/ holds the stand-ins, and a runner that puts only them and the base
// system on PATH, so a script meets the tools the test wrote and never the
// machine's own docker, podman or curl.
#ifndef FLEET_TESTS_SUPPORT_STUB_CLI_H_
#define FLEET_TESTS_SUPPORT_STUB_CLI_H_

#include <string>

#include "tests/support/run_shell.h"
#include "tests/support/temp_dir.h"

namespace fleet::testing_support {

class StubCli {
 public:
  explicit StubCli(const std::string& prefix = "fleet-stub-cli");

  // The scratch folder: the script's HOME and working folder.
  const std::string& dir() const { return dir_.path(); }
  // Where the stand-ins are: first on the script's PATH.
  std::string bin() const { return dir() + "/bin"; }

  // An executable bin/<name> running `body` under /bin/sh.
  void Tool(const std::string& name, const std::string& body) const;
  // Like Tool, first appending its arguments, one call a line, to
  // <dir>/<name>.args (see Calls).
  void RecordingTool(const std::string& name, const std::string& body) const;
  // The argument lines RecordingTool's `name` was called with; "" if never.
  std::string Calls(const std::string& name) const { return Read(name + ".args"); }

  void Write(const std::string& relative, const std::string& text) const {
    dir_.Write(relative, text);
  }
  std::string Read(const std::string& relative) const { return dir_.Read(relative); }

  // Runs `script` (written to <dir>/script.sh) by /bin/sh from dir(), with
  // HOME=dir(), PATH=bin():/usr/bin:/bin and no engine variables of the
  // caller's (DOCKER_HOST, DOCKER_CONTEXT, CONTAINER_HOST, XDG_RUNTIME_DIR);
  // `env` adds assignments ("A=1 B=2", quoted by the caller) after those.
  ShellRun Run(const std::string& script, const std::string& env = "") const;

 private:
  TempDir dir_;
};

}  // namespace fleet::testing_support

#endif  // FLEET_TESTS_SUPPORT_STUB_CLI_H_
