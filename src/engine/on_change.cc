#include "src/engine/on_change.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>

extern char** environ;

namespace fleet {
namespace {

// The value of NAME in `env`, or nullptr.
const char* Find(char* const* env, const std::string& name) {
  for (char* const* e = env; e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, name.c_str(), name.size()) == 0 && (*e)[name.size()] == '=')
      return *e + name.size() + 1;
  return nullptr;
}

}  // namespace

std::vector<std::string> OnChangeEnvironment(const std::vector<std::string>& names,
                                             char* const* env) {
  std::vector<std::string> out;
  std::vector<std::string> done;
  auto add = [&](const std::string& name, const char* fallback) {
    if (std::find(done.begin(), done.end(), name) != done.end()) return;
    done.push_back(name);
    const char* v = Find(env, name);
    if (v == nullptr) v = fallback;
    if (v != nullptr) out.push_back(name + "=" + v);
  };
  add("PATH", "/usr/local/bin:/usr/bin:/bin");
  add("HOME", nullptr);
  add("LANG", nullptr);
  for (const std::string& n : names) add(n, nullptr);
  return out;
}

void RunOnChange(const std::string& cmd, const std::vector<std::string>& env_names,
                 const nlohmann::json& event) {
  const std::vector<std::string> env = OnChangeEnvironment(env_names, environ);
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    std::cerr << "fleet watch: cannot run --on-change command: pipe: " << std::strerror(errno)
              << "\n";
    return;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], STDIN_FILENO);
  const char* argv[] = {"sh", "-c", cmd.c_str(), nullptr};
  pid_t pid = 0;
  const int rc =
      posix_spawn(&pid, "/bin/sh", &actions, nullptr, const_cast<char**>(argv), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[0]);
  if (rc != 0) {
    close(pipe_fds[1]);
    std::cerr << "fleet watch: cannot run --on-change command: " << std::strerror(rc) << "\n";
    return;
  }
  const std::string text = event.dump() + "\n";
  for (size_t off = 0; off < text.size();) {
    const ssize_t n = write(pipe_fds[1], text.data() + off, text.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the command does not read its stdin: fine
    off += static_cast<size_t>(n);
  }
  close(pipe_fds[1]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (status != 0) std::cerr << "fleet watch: --on-change command exited " << status << "\n";
}

}  // namespace fleet
