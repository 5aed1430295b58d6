// The controller's own failures, told apart from what it was looking at: a
// read or a connection that failed because this process ran out of file
// descriptors (EMFILE), the machine did (ENFILE), memory or buffers ran out,
// or the controller's own network is down, says nothing about the file or
// the serve on the other end. `fleet watch` must not heal, quarantine or
// report drift on such evidence (issue 44: a flood of its metrics port made
// it restart healthy serves).
//
// Header-only and free of fleet's libraries on purpose: the manifest readers
// (which depend on nothing else of fleet) and src/ (which includes only
// manifests headers) both use it.
#ifndef FLEET_MANIFESTS_OWN_FAULT_H_
#define FLEET_MANIFESTS_OWN_FAULT_H_

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>

namespace fleet {

// Whether a failed open, socket or connect with `err` is the controller's
// own problem: no evidence about the file's or the peer's side.
inline bool IsOwnErrno(int err) {
  switch (err) {
    case EMFILE:         // this process's descriptors are all in use
    case ENFILE:         // the machine's are
    case ENOMEM:         // no memory for the descriptor or the socket
    case ENOBUFS:        // no socket buffers
    case EADDRNOTAVAIL:  // no local port or address left to connect from
    case ENETDOWN:       // the controller's own interface is down
    case ENETUNREACH:    // the controller has no route at all
      return true;
    default:
      return false;
  }
}

// "Too many open files (EMFILE)": the text and the name, so that an
// operator can grep for the errno.
inline std::string ErrnoText(int err) {
  const char* name = strerrordesc_np(err) != nullptr ? strerrorname_np(err) : nullptr;
  std::string text = std::strerror(err);
  if (name != nullptr) text += std::string(" (") + name + ")";
  return text;
}

// How many own failures this process has met so far: a `fleet watch` round
// compares the count before and after, so that a failure deep in a reader
// that only reports text still marks the round as the controller's.
inline std::atomic<uint64_t>& OwnFaultCounter() {
  static std::atomic<uint64_t> count{0};
  return count;
}
inline void NoteOwnFault() { OwnFaultCounter().fetch_add(1, std::memory_order_relaxed); }
inline uint64_t OwnFaultCount() { return OwnFaultCounter().load(std::memory_order_relaxed); }

}  // namespace fleet

#endif  // FLEET_MANIFESTS_OWN_FAULT_H_
