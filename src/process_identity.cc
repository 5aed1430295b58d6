#include "src/process_identity.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <fstream>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>

namespace fleet {

namespace {

std::string NodeName() {
  struct utsname u;
  std::string name = ::uname(&u) == 0 ? u.nodename : "";
  if (name.empty()) return "unknown-host";
  for (char& c : name) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    if (!word) c = '_';
  }
  return name;
}

// Where a pid means this process: the kernel's boot (a random id per boot,
// so per machine) and the pid namespace. "" when either cannot be read: then
// no id is ever judged gone. (A hostname alone is not an identity: two CI
// runners may both be called "runner"; containers share a kernel's boot.)
// Read once it could be read: neither changes in a process's life (setns
// and unshare of a pid namespace move only the children), and a probe judges
// every lock. A failed read (say EMFILE in a long apply) is tried again.
std::string ReadPidScope() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot) || boot.empty()) return "";
  struct stat st;
  if (::stat("/proc/self/ns/pid", &st) != 0) return "";
  return boot + "." + std::to_string(static_cast<unsigned long long>(st.st_ino));
}
std::string PidScope() {
  static std::mutex mu;
  static std::string scope;
  std::lock_guard<std::mutex> lock(mu);
  if (scope.empty()) scope = ReadPidScope();
  return scope;
}

// What this process can tell of a pid. kGone only on the kernel's word
// (kill: ESRCH); a /proc entry this user may not read (hidepid) is
// kUnknown, never gone.
enum class ProcState { kGone, kZombie, kUnknown, kRunning };
struct ProcInfo {
  ProcState state = ProcState::kUnknown;
  unsigned long long start = 0;  // field 22 of /proc/PID/stat, when kRunning
};

// The fields of /proc/PID/stat are counted after the last ')': the command
// name may hold spaces and parentheses. A zombie is a killed controller its
// parent has not reaped: its connections are closed.
ProcInfo ReadProc(long pid) {
  ProcInfo info;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
    info.state = ProcState::kGone;
    return info;
  }
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return info;
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return info;
  std::istringstream fields(stat.substr(close + 1));
  std::string state, f;
  if (!(fields >> state)) return info;
  if (state == "Z" || state == "X") {
    info.state = ProcState::kZombie;
    return info;
  }
  for (int i = 4; i <= 22; ++i)
    if (!(fields >> f)) return info;
  auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), info.start);
  if (ec == std::errc() && p == f.data() + f.size()) info.state = ProcState::kRunning;
  return info;
}

// "N" as a whole positive number, or nullopt.
template <typename T>
std::optional<T> Number(std::string_view s) {
  T v{};
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string ThisControllerId() {
  const long pid = static_cast<long>(::getpid());
  const ProcInfo self = ReadProc(pid);
  const std::string scope = PidScope();
  return NodeName() + "/" + std::to_string(pid) + "/" +
         (self.state == ProcState::kRunning ? std::to_string(self.start) : "0") + "/" +
         (scope.empty() ? "-" : scope);
}

std::optional<ControllerId> ParseControllerId(std::string_view id) {
  std::string_view f[4];
  for (int i = 0; i < 4; ++i) {
    const size_t slash = i < 3 ? id.find('/') : id.size();
    if (slash == std::string_view::npos) return std::nullopt;
    f[i] = id.substr(0, slash);
    id.remove_prefix(std::min(id.size(), slash + 1));
  }
  const std::optional<long> pid = Number<long>(f[1]);
  const std::optional<unsigned long long> start = Number<unsigned long long>(f[2]);
  // A pid beyond pid_t would reach kill() as another (or -1).
  if (f[0].empty() || !pid || *pid <= 0 || *pid > std::numeric_limits<pid_t>::max() || !start ||
      f[3].empty() || f[3].find('/') != std::string_view::npos)
    return std::nullopt;
  return ControllerId{std::string(f[0]), *pid, *start, std::string(f[3])};
}

bool ControllerIsGone(std::string_view id) {
  const std::optional<ControllerId> c = ParseControllerId(id);
  const std::string scope = PidScope();
  if (!c || scope.empty() || c->scope != scope || c->host != NodeName() || c->start == 0 ||
      c->pid == static_cast<long>(::getpid()))
    return false;
  const ProcInfo now = ReadProc(c->pid);
  return now.state == ProcState::kGone || now.state == ProcState::kZombie ||
         (now.state == ProcState::kRunning && now.start != c->start);
}

}  // namespace fleet
