// A loopback port nothing listens on (the kernel's pick, its socket closed
// again): for a test's own listener, or a connection that must be refused.
#ifndef FLEET_TESTS_SUPPORT_LOOPBACK_PORT_H_
#define FLEET_TESTS_SUPPORT_LOOPBACK_PORT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fleet::testing_support {

inline int UnusedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

}  // namespace fleet::testing_support

#endif  // FLEET_TESTS_SUPPORT_LOOPBACK_PORT_H_
