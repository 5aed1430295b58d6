#include "src/openai_client.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <thread>
#include <vector>

#include "tests/support/loopback_port.h"

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
int ClosedPort() { return testing_support::UnusedLoopbackPort(); }

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

// A one-shot SSE server on loopback: reads the request, stays silent for
// `silent_ms` (a prefill: no byte, not even the headers), sends the headers
// and `tokens` chunks, then ends the stream, or hangs for `hang_ms` when
// `hang` (an engine that stops mid-reply).
class SseServer {
 public:
  SseServer(int silent_ms, int tokens, bool hang, int hang_ms = 4000) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
    listen(listen_fd_, 1);
    socklen_t len = sizeof a;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([=, this] {
      const int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      char buf[65536];
      recv(fd, buf, sizeof buf, 0);  // the request: small, one read
      std::this_thread::sleep_for(std::chrono::milliseconds(silent_ms));
      std::string out =
          "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
      for (int i = 0; i < tokens; ++i)
        out +=
            "data: {\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t\"}}]}\n\n";
      send(fd, out.data(), out.size(), MSG_NOSIGNAL);
      if (hang) {
        std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
      } else {
        const std::string end =
            "data: "
            "{\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}"
            "\n\ndata: [DONE]\n\n";
        send(fd, end.data(), end.size(), MSG_NOSIGNAL);
      }
      close(fd);
    });
  }
  ~SseServer() {
    thread_.join();
    close(listen_fd_);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int listen_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// The lab's needle at a tenth of its time: ~70 s of prefill silence against
// a 30 s stall limit and a 10 min timeout is 7 s against 3 s and 60 s here;
// kept at 2.5 s against 1 s so the test stays short (the same order: the
// silence outlasts the stall limit, the allowance outlasts the silence).
TEST(Chat, APrefillLongerThanTheStallLimitIsNoStall) {
  SseServer server(2500, 3, false);
  ChatRequest req;
  req.timeout_s = 20;
  req.stall_s = 1;
  req.first_token_s = 10;
  const ChatReply reply = Chat(server.url(), req);
  EXPECT_EQ(reply.error, "");
  EXPECT_EQ(reply.content, "ttt");
  EXPECT_GE(reply.ttft_s, 2.4);
  EXPECT_FALSE(reply.stalled);
}

TEST(Chat, NoTokenWithinThePrefillAllowanceFailsSayingSo) {
  SseServer server(4000, 0, true, 0);
  ChatRequest req;
  req.timeout_s = 20;
  req.stall_s = 1;
  req.first_token_s = 2;
  const auto start = std::chrono::steady_clock::now();
  const ChatReply reply = Chat(server.url(), req);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(3800));
  EXPECT_TRUE(reply.no_first_token);
  EXPECT_FALSE(reply.stalled);
  EXPECT_NE(reply.error.find("no token within the prefill allowance of 2 s"), std::string::npos)
      << reply.error;
}

TEST(Chat, AStreamThatStopsMidReplyIsAStall) {
  SseServer server(0, 2, true);
  ChatRequest req;
  req.timeout_s = 20;
  req.stall_s = 1;
  req.first_token_s = 10;
  const ChatReply reply = Chat(server.url(), req);
  EXPECT_TRUE(reply.stalled);
  EXPECT_FALSE(reply.no_first_token);
  EXPECT_NE(reply.error.find("stalled mid-reply after 2 tokens (no byte for 1 s)"),
            std::string::npos)
      << reply.error;
  EXPECT_LT(reply.wall_s, 3.5);
}

}  // namespace
}  // namespace fleet
