// Backend-independent helpers of StateStore (see state/state_store.h).
#include "state/state_store.h"

#include <openssl/rand.h>
#include <pwd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <thread>

#include "state/state.h"

namespace fleet {

Result<std::unique_ptr<StateLock>> LockWithTimeout(StateStore* store, const std::string& operation,
                                                   int64_t timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto pause = std::chrono::milliseconds(100);
  for (;;) {
    Result<std::unique_ptr<StateLock>> lock = store->Lock(operation);
    if (lock.ok() || std::chrono::steady_clock::now() >= deadline) return lock;
    // Only a held lock is worth waiting for; a broken store is not.
    if (lock.status().message().find("locked by") == std::string::npos) return lock;
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(pause, deadline - std::chrono::steady_clock::now()));
    pause = std::min(pause * 2, std::chrono::milliseconds(2000));
  }
}

namespace {

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1) {
    // Only uniqueness matters for a lock id; fall back to the OS generator.
    std::random_device rd;
    for (auto& c : raw) c = static_cast<char>(rd());
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes * 2);
  for (unsigned char c : raw) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

}  // namespace

std::string ProcessHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "unknown-host";
  return buf;
}

std::string ProcessUserName() {
  uid_t uid = ::geteuid();
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) return found->pw_name;
  if (const char* u = std::getenv("USER"); u && *u) return u;
  return "uid" + std::to_string(uid);
}

std::string ProcessHolder() {
  return ProcessUserName() + "@" + ProcessHostName() + " pid " + std::to_string(::getpid());
}

LockInfo ThisProcessLock(const std::string& operation) {
  LockInfo info;
  info.id = RandomHex(16);
  info.pid = static_cast<int>(::getpid());
  info.hostname = ProcessHostName();
  info.holder = ProcessHolder();
  info.operation = operation;
  info.created = NowRfc3339();
  return info;
}

}  // namespace fleet
