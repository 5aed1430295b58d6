// MakeTransport and the helpers both transports share.
#include "src/transport.h"

#include <pwd.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "src/local_transport.h"
#include "src/ssh_transport.h"
#include "src/transport_internal.h"

namespace fleet {

std::unique_ptr<Transport> MakeTransport(const SshEndpoint& endpoint) {
  if (endpoint.address == "local") {
    return std::make_unique<LocalTransport>(endpoint);
  }
  return std::make_unique<SshTransport>(endpoint);
}

namespace transport_internal {

StdinPull StdinFromView(std::string_view data) {
  return [data, done = false](std::string_view* piece) mutable {
    if (done || data.empty()) return false;
    done = true;
    *piece = data;
    return true;
  };
}

StdinPull StdinFromCallback(
    const std::function<bool(std::string* chunk)>& next_stdin) {
  // The buffer is shared so that the returned std::function stays copyable
  // and the piece handed out stays valid until the next pull.
  auto buffer = std::make_shared<std::string>();
  return [&next_stdin, buffer, eof = false](std::string_view* piece) mutable {
    if (eof) return false;
    buffer->clear();
    if (!next_stdin(buffer.get())) {
      eof = true;
      if (buffer->empty()) return false;
    }
    *piece = *buffer;
    return true;
  };
}

std::string CommandSnippet(const std::string& command) {
  constexpr size_t kMax = 80;
  std::string out = "'";
  size_t n = 0;
  for (char c : command) {
    if (n++ == kMax) {
      out.append("...");
      break;
    }
    if (c == '\n') {
      out.append("\\n");
    } else {
      out.push_back(c);
    }
  }
  out.push_back('\'');
  return out;
}

void AppendSignalNote(const std::string& signal_name, bool core_dumped,
                      std::string* err) {
  if (!err->empty() && err->back() != '\n') err->push_back('\n');
  err->append("killed by signal SIG" + signal_name);
  if (core_dumped) err->append(" (core dumped)");
  err->push_back('\n');
}

namespace {

// getpwuid_r, not getpwuid: transports are created on several threads.
bool OwnPasswdEntry(std::string* name, std::string* home) {
  passwd pw;
  passwd* found = nullptr;
  char buf[4096];
  if (getpwuid_r(getuid(), &pw, buf, sizeof(buf), &found) != 0 ||
      found == nullptr) {
    return false;
  }
  if (name != nullptr) *name = pw.pw_name;
  if (home != nullptr) *home = pw.pw_dir;
  return true;
}

}  // namespace

std::string ExpandHome(const std::string& path) {
  if (path != "~" && path.rfind("~/", 0) != 0) return path;
  std::string home;
  if (const char* h = std::getenv("HOME"); h != nullptr && *h != '\0') {
    home = h;
  } else {
    OwnPasswdEntry(nullptr, &home);
  }
  if (home.empty()) return path;
  return home + path.substr(1);
}

std::string CurrentUserName() {
  std::string name;
  OwnPasswdEntry(&name, nullptr);
  return name;
}

}  // namespace transport_internal
}  // namespace fleet
