// For tests: a listener's port gone silent mid-stream, as when the node at
// the other end loses power or its cable: every TCP packet to or from the
// port dropped (an nftables table of its own), no FIN, no RST, no answer.
// Needs root and nft; SilencingWorks() says whether they are here.
#ifndef FLEET_PROVIDERS_SHARED_SILENCED_PORT_TEST_UTIL_H_
#define FLEET_PROVIDERS_SHARED_SILENCED_PORT_TEST_UTIL_H_

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

namespace fleet::testing_net {

inline bool SilencingWorks() {
  return geteuid() == 0 && std::system("command -v nft >/dev/null 2>&1") == 0;
}

// Use: a listener runs TargetCommand(); Run(stream) runs the stream in a
// thread and, once that command has its first byte (a connection made) and
// named its port, drops every packet of that port until the stream ends.
class SilenceOnCue {
 public:
  SilenceOnCue() {
    char dir[] = "/tmp/fleet-silent.XXXXXX";
    if (mkdtemp(dir) != nullptr) dir_ = dir;
  }
  ~SilenceOnCue() {
    Lift();
    if (!dir_.empty()) std::system(("rm -rf " + dir_).c_str());
  }
  SilenceOnCue(const SilenceOnCue&) = delete;
  SilenceOnCue& operator=(const SilenceOnCue&) = delete;

  // sh, run by a listener script ($port is its port): takes the first byte,
  // names the port, and reads the rest 2 s later (data in flight meanwhile).
  std::string TargetCommand() const {
    return "head -c 1 >/dev/null; echo $port >" + dir_ + "/port; sleep 2; cat >/dev/null";
  }

  // The port silenced; -1 when none was named within 20 s (or the table
  // could not be made).
  int Run(const std::function<void()>& stream) {
    std::thread run(stream);
    int port = -1;
    for (int i = 0; i < 400 && port < 0 && !dir_.empty(); ++i) {
      std::ifstream in(dir_ + "/port");
      if (!(in >> port) || port <= 0) {
        port = -1;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    if (port > 0 && !Drop(port)) port = -1;
    run.join();
    Lift();
    return port;
  }

 private:
  bool Drop(int port) {
    table_ = "fleet_test_silent_" + std::to_string(port);
    const std::string p = std::to_string(port);
    const std::string rules = "tcp dport " + p + " drop; tcp sport " + p + " drop; ";
    return std::system(("nft -f - <<'EOT'\ntable inet " + table_ +
                        " {\n chain out { type filter hook output priority -10; " + rules +
                        "}\n chain in { type filter hook input priority -10; " + rules +
                        "}\n}\nEOT")
                           .c_str()) == 0;
  }
  void Lift() {
    if (!table_.empty()) std::system(("nft delete table inet " + table_ + " 2>/dev/null").c_str());
    table_.clear();
  }

  std::string dir_;
  std::string table_;
};

}  // namespace fleet::testing_net

#endif  // FLEET_PROVIDERS_SHARED_SILENCED_PORT_TEST_UTIL_H_
