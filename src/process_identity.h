// Names this controller process in records other processes read (the
// staging lock's owner line), so that a later fleet on the same host can tell
// a dead controller's record from a live one at once, without waiting for the
// node to notice the dropped connection.
#ifndef FLEET_SRC_PROCESS_IDENTITY_H_
#define FLEET_SRC_PROCESS_IDENTITY_H_

#include <optional>
#include <string>
#include <string_view>

namespace fleet {

// "HOST/PID/START/SCOPE": this machine's node name (characters outside
// [A-Za-z0-9._-] as '_'), this process's pid, its start time in clock ticks
// since boot (a reused pid has another start time), and where that pid
// means this process: the kernel's boot id and the pid namespace
// ("BOOT_ID.NS_INODE"; "-" when unreadable). One word: no whitespace.
std::string ThisControllerId();

// The fields of a ThisControllerId() string.
struct ControllerId {
  std::string host;
  long pid = 0;
  unsigned long long start = 0;  // 0: the process's start time was unreadable
  std::string scope;             // "BOOT_ID.NS_INODE", or "-"
};

// nullopt unless `id` is "HOST/PID/START/SCOPE" with a non-empty HOST, PID a
// whole positive number that fits a pid_t, START a whole number and a
// non-empty SCOPE holding no '/'. The one reader of the id: the lock's takeover and its messages.
std::optional<ControllerId> ParseControllerId(std::string_view id);

// True only when `id` (a ThisControllerId() of some process) names a
// process of this pid scope (same boot, same pid namespace: the hostname is
// only for people) that is no longer running: the kernel says its pid is
// gone, it is a zombie, or the pid now belongs to a process started at
// another time. A pid whose /proc entry this user may not read (hidepid) is
// not gone. False for another
// machine's or namespace's id, for this process, and for anything
// unreadable (never a guess that frees a lock).
bool ControllerIsGone(std::string_view id);

}  // namespace fleet

#endif  // FLEET_SRC_PROCESS_IDENTITY_H_
