// What `fleet watch` needs of its own machine to judge the fleet: file
// descriptors. The watch raises its soft RLIMIT_NOFILE to the hard limit
// when it starts (a 1,024 soft limit was all a metrics-port flood needed),
// and each round first checks that it can open a socket and a file: a round
// that cannot is the controller's problem, reported as such, and judges
// nothing (issue 44).
#ifndef FLEET_SRC_ENGINE_OWN_RESOURCES_H_
#define FLEET_SRC_ENGINE_OWN_RESOURCES_H_

#include <cstdint>
#include <string>

#include "src/status.h"

namespace fleet {

struct FileLimit {
  uint64_t soft = 0, hard = 0;  // after the raise
  std::string error;            // why it could not be raised; "" when it was (or already was)
};

// Raises the soft RLIMIT_NOFILE to the hard one.
FileLimit RaiseFileLimit();

// OK when this process can open a TCP socket and a file now; else an
// OwnFault naming what and the errno ("cannot open a socket: Too many open
// files (EMFILE)").
Status CheckOwnHeadroom();

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_OWN_RESOURCES_H_
