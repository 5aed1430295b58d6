#include "src/openai_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

namespace fleet {
namespace {

TEST(CurlFailureIsOwn, RefusedIsTheServesSocketFailureIsOurs) {
  // The serve refused: evidence about the serve.
  EXPECT_FALSE(CurlFailureIsOwn(CURLE_COULDNT_CONNECT, 0, ECONNREFUSED));
  EXPECT_FALSE(CurlFailureIsOwn(CURLE_OPERATION_TIMEDOUT, 0, 0));
  EXPECT_FALSE(CurlFailureIsOwn(CURLE_RECV_ERROR, 0, ECONNRESET));
  EXPECT_FALSE(CurlFailureIsOwn(CURLE_OK, 0, 0));
  // The same code when socket() failed here: the controller's.
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_COULDNT_CONNECT, EMFILE, 0));
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_COULDNT_CONNECT, ENFILE, 0));
  // Its own network.
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_COULDNT_CONNECT, 0, ENETUNREACH));
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_COULDNT_CONNECT, 0, EADDRNOTAVAIL));
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_OUT_OF_MEMORY, 0, 0));
  EXPECT_TRUE(CurlFailureIsOwn(CURLE_COULDNT_RESOLVE_HOST, 0, 0));
}

// A loopback port nothing listens on.
int ClosedPort() {
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

TEST(ListServedModels, ARefusedConnectionIsTheServes) {
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  Result<std::vector<std::string>> r = ListServedModels(url, 5);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(r.status().own_fault()) << r.status().message();
  ChatRequest req;
  req.timeout_s = 5;
  ChatReply reply = Chat(url, req);
  EXPECT_FALSE(reply.error.empty());
  EXPECT_FALSE(reply.own_fault) << reply.error;
}

TEST(ListServedModels, NoDescriptorForASocketIsTheControllers) {
  const std::string url = "http://127.0.0.1:" + std::to_string(ClosedPort());
  curl_global_init(CURL_GLOBAL_DEFAULT);  // before the descriptors go
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  std::vector<int> held;
  for (int fd; (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) held.push_back(fd);
  Result<std::vector<std::string>> r = ListServedModels(url, 5);
  ChatRequest req;
  req.timeout_s = 5;
  ChatReply reply = Chat(url, req);
  for (int fd : held) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.status().own_fault()) << r.status().message();
  EXPECT_NE(r.status().message().find("EMFILE"), std::string::npos) << r.status().message();
  EXPECT_TRUE(reply.own_fault) << reply.error;
}

}  // namespace
}  // namespace fleet
