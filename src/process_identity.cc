#include "src/process_identity.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <fstream>
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
std::string PidScope() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string boot;
  if (!std::getline(in, boot) || boot.empty()) return "";
  struct stat st;
  if (::stat("/proc/self/ns/pid", &st) != 0) return "";
  return boot + "." + std::to_string(static_cast<unsigned long long>(st.st_ino));
}

// Field 22 of /proc/PID/stat (starttime); nullopt when the process is gone,
// a zombie (a killed controller its parent has not reaped: its connections
// are closed) or its stat cannot be read. The fields are counted after the
// last ')': the command name may hold spaces and parentheses.
std::optional<unsigned long long> StartTicks(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  std::string state, f;
  if (!(fields >> state) || state == "Z" || state == "X") return std::nullopt;
  for (int i = 4; i <= 22; ++i)
    if (!(fields >> f)) return std::nullopt;
  unsigned long long ticks = 0;
  auto [p, ec] = std::from_chars(f.data(), f.data() + f.size(), ticks);
  if (ec != std::errc() || p != f.data() + f.size()) return std::nullopt;
  return ticks;
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
  std::optional<unsigned long long> start = StartTicks(pid);
  const std::string scope = PidScope();
  return NodeName() + "/" + std::to_string(pid) + "/" + (start ? std::to_string(*start) : "0") +
         "/" + (scope.empty() ? "-" : scope);
}

bool ControllerIsGone(std::string_view id) {
  // HOST/PID/START/SCOPE
  std::string_view f[4];
  for (int i = 0; i < 4; ++i) {
    const size_t slash = i < 3 ? id.find('/') : id.size();
    if (slash == std::string_view::npos) return false;
    f[i] = id.substr(0, slash);
    id.remove_prefix(std::min(id.size(), slash + 1));
  }
  const std::string scope = PidScope();
  if (scope.empty() || f[3] != scope || f[0] != NodeName() || f[3].find('/') != f[3].npos)
    return false;
  std::optional<long> pid = Number<long>(f[1]);
  std::optional<unsigned long long> start = Number<unsigned long long>(f[2]);
  if (!pid || !start || *pid <= 0 || *start == 0 || *pid == static_cast<long>(::getpid()))
    return false;
  std::optional<unsigned long long> now = StartTicks(*pid);
  return !now || *now != *start;
}

}  // namespace fleet
