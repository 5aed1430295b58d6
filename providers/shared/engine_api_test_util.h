// A container engine's API for tests: an HTTP/1.0 server on a unix socket
// that answers GETs from a table, one connection per request, as docker's
// and podman's answer fleet's installed `fleet-probe --api`.
#ifndef FLEET_PROVIDERS_SHARED_ENGINE_API_TEST_UTIL_H_
#define FLEET_PROVIDERS_SHARED_ENGINE_API_TEST_UTIL_H_

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "src/probe/probe_install.h"

namespace fleet::testing_engine {

class FakeEngineApi {
 public:
  // Answers each request whose target starts with a key of `answers` with
  // that (status line, body), 404 otherwise; with `mute`, closes every
  // connection without an answer. REQUIRES: `path` fits a sockaddr_un.
  FakeEngineApi(const std::string& path,
                std::map<std::string, std::pair<std::string, std::string>> answers,
                bool mute = false)
      : answers_(std::move(answers)), mute_(mute) {
    unlink(path.c_str());
    sock_ = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ok_ =
        bind(sock_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && listen(sock_, 4) == 0;
    if (ok_) thread_ = std::thread([this] { Serve(); });
  }
  ~FakeEngineApi() {
    shutdown(sock_, SHUT_RDWR);  // ends accept()
    if (thread_.joinable()) thread_.join();
    close(sock_);
  }
  FakeEngineApi(const FakeEngineApi&) = delete;
  FakeEngineApi& operator=(const FakeEngineApi&) = delete;

  bool ok() const { return ok_; }
  int requests() const { return requests_; }  // connections so far

 private:
  void Serve() {
    for (int c; (c = accept(sock_, nullptr, nullptr)) >= 0; close(c)) {
      ++requests_;
      if (mute_) continue;
      std::string request;
      char buf[4096];
      for (ssize_t n;
           request.find("\r\n\r\n") == std::string::npos && (n = read(c, buf, sizeof buf)) > 0;)
        request.append(buf, static_cast<size_t>(n));
      const std::string target = request.substr(4, request.find(' ', 4) - 4);  // "GET <target> "
      std::pair<std::string, std::string> answer = {"404 Not Found", "{\"message\":\"no such\"}"};
      for (const auto& [prefix, a] : answers_)
        if (target.rfind(prefix, 0) == 0) answer = a;
      const std::string out = "HTTP/1.0 " + answer.first +
                              "\r\nContent-Type: application/json\r\nContent-Length: " +
                              std::to_string(answer.second.size()) + "\r\n\r\n" + answer.second;
      if (write(c, out.data(), out.size()) < 0) continue;
    }
  }

  std::map<std::string, std::pair<std::string, std::string>> answers_;
  bool mute_;
  int sock_ = -1;
  bool ok_ = false;
  std::atomic<int> requests_{0};
  std::thread thread_;
};

// Installs this build's fleet-probe (FLEET_PROBE, which meson sets) as the
// probe of a node whose home is `home` (no quote in it), and makes the
// folder of a podman service's socket, home/xdg/podman. False without
// FLEET_PROBE or when the copy fails.
inline bool InstallBuiltProbe(const std::string& home) {
  const char* probe = std::getenv("FLEET_PROBE");
  return probe != nullptr &&
         std::system(("mkdir -p '" + home + "/" + kProbeInstallDir + "' '" + home +
                      "/xdg/podman' && cp '" + probe + "' '" + home + "/" + kProbeInstallPath + "'")
                         .c_str()) == 0;
}

}  // namespace fleet::testing_engine

#endif  // FLEET_PROVIDERS_SHARED_ENGINE_API_TEST_UTIL_H_
