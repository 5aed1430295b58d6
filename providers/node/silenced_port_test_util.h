// SilencedPort: for tests, every TCP packet to or from a port on this
// machine dropped (an nftables table of its own), as when the node at the
// other end loses power or its cable: no FIN, no RST, no answer. The
// kernel's sockets on that port see silence, which is what fleet's stall
// watches must notice. Needs root and nft; SilencingWorks() says whether
// they are here.
#ifndef FLEET_PROVIDERS_NODE_SILENCED_PORT_TEST_UTIL_H_
#define FLEET_PROVIDERS_NODE_SILENCED_PORT_TEST_UTIL_H_

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

namespace fleet::testing_net {

inline bool SilencingWorks() {
  return geteuid() == 0 && std::system("command -v nft >/dev/null 2>&1") == 0;
}

class SilencedPort {
 public:
  explicit SilencedPort(int port) : table_("fleet_test_silent_" + std::to_string(port)) {
    const std::string p = std::to_string(port);
    const std::string rules = "tcp dport " + p + " drop; tcp sport " + p + " drop; ";
    ok_ = std::system(("nft -f - <<'EOT'\ntable inet " + table_ +
                       " {\n chain out { type filter hook output priority -10; " + rules +
                       "}\n chain in { type filter hook input priority -10; " + rules + "}\n}\nEOT")
                          .c_str()) == 0;
  }
  ~SilencedPort() { std::system(("nft delete table inet " + table_ + " 2>/dev/null").c_str()); }
  SilencedPort(const SilencedPort&) = delete;
  SilencedPort& operator=(const SilencedPort&) = delete;
  bool ok() const { return ok_; }

 private:
  std::string table_;
  bool ok_ = false;
};

// The port a listener's command wrote to `path` (`echo $port >path`), once
// it is there; -1 after 20 s.
inline int WaitForPortFile(const std::string& path) {
  for (int i = 0; i < 400; ++i) {
    std::ifstream in(path);
    int port = -1;
    if (in >> port && port > 0) return port;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return -1;
}

}  // namespace fleet::testing_net

#endif  // FLEET_PROVIDERS_NODE_SILENCED_PORT_TEST_UTIL_H_
