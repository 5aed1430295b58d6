#include "tests/support/stub_cli.h"

#include <sys/stat.h>

#include "src/shell_quote.h"

namespace fleet::testing_support {

StubCli::StubCli(const std::string& prefix) : dir_(prefix) {
  if (!dir().empty()) mkdir(bin().c_str(), 0755);
}

void StubCli::Tool(const std::string& name, const std::string& body) const {
  const std::string path = bin() + "/" + name;
  Write("bin/" + name, "#!/bin/sh\n" + body);
  chmod(path.c_str(), 0755);
}

void StubCli::RecordingTool(const std::string& name, const std::string& body) const {
  Tool(name, "echo \"$*\" >> " + ShellQuote(dir() + "/" + name + ".args") + "\n" + body);
}

ShellRun StubCli::Run(const std::string& script, const std::string& env) const {
  Write("script.sh", script);
  return RunShell("cd " + ShellQuote(dir()) +
                  " && env -u DOCKER_HOST -u XDG_RUNTIME_DIR -u DOCKER_CONTEXT -u CONTAINER_HOST"
                  " HOME=" +
                  ShellQuote(dir()) + " PATH=" + ShellQuote(bin()) + ":/usr/bin:/bin " + env +
                  " /bin/sh " + ShellQuote(dir() + "/script.sh"));
}

}  // namespace fleet::testing_support
