// FabricStream on this machine (LocalTransport for both ends, the listener
// on 127.0.0.1): the real openssl s_server/s_client, the real scripts.
#include "providers/node/fabric_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include "src/local_transport.h"

namespace fleet {
namespace {

bool HaveOpenssl() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

SshEndpoint Local(const char* name) {
  SshEndpoint e;
  e.node = name;
  e.address = "local";
  return e;
}

TEST(FabricStream, CarriesTheBytes) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport src(Local("a")), dst(Local("b"));
  FabricStreamSpec s;
  s.source = &src;
  s.source_cmd = "head -c 3000000 /dev/zero";
  s.target = &dst;
  s.target_cmd = "wc -c";
  s.target_address = "127.0.0.1";
  FabricStreamResult r = FabricStream(s);
  ASSERT_TRUE(r.ok()) << r.Problem();
  EXPECT_TRUE(r.listening);
  EXPECT_EQ(r.target->out.substr(r.target->out.find_first_not_of(' ')), "3000000\n");
}

TEST(FabricStream, WrongKeyIsRefused) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport src(Local("a")), dst(Local("b"));
  FabricStreamSpec s;
  s.source = &src;
  s.source_cmd = "head -c 100000 /dev/zero";
  s.target = &dst;
  s.target_cmd = "n=$(wc -c); echo \"got $n\"; [ \"$n\" -gt 0 ]";
  s.target_address = "127.0.0.1";
  s.source_key_override = std::string(64, 'f');
  FabricStreamResult r = FabricStream(s);
  EXPECT_FALSE(r.ok());
  ASSERT_TRUE(r.target.ok());
  EXPECT_NE(r.target->exit_code, 0);
  EXPECT_NE(r.target->out.find("got 0"), std::string::npos) << r.target->out;
  EXPECT_NE(r.Problem().find("did not end cleanly"), std::string::npos) << r.Problem();
  EXPECT_EQ(r.Problem().find(std::string(64, 'f')), std::string::npos);
}

TEST(FabricStream, SourceFailureIsReported) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport src(Local("a")), dst(Local("b"));
  FabricStreamSpec s;
  s.source = &src;
  s.source_cmd = "echo 'no such image' >&2; exit 125";
  s.target = &dst;
  s.target_cmd = "cat >/dev/null";
  s.target_address = "127.0.0.1";
  FabricStreamResult r = FabricStream(s);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.Problem().find("no such image"), std::string::npos) << r.Problem();
}

TEST(FabricStream, ListenerNobodyConnectsToIsStopped) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport dst(Local("b"));
  const auto t0 = std::chrono::steady_clock::now();
  Result<CommandResult> r = dst.Run(
      FabricListenScript("127.0.0.1", std::string(64, 'a'), "fleet-test", "cat", 1, 30));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("nobody connected"), std::string::npos) << r->err;
  EXPECT_NE(r->out.find("FLEET-FABRIC-READY "), std::string::npos);
  EXPECT_LT(s, 10.0);
}

TEST(FabricStream, NoListenerOnAForeignAddress) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport src(Local("a")), dst(Local("b"));
  FabricStreamSpec s;
  s.source = &src;
  s.source_cmd = "echo hi";
  s.target = &dst;
  s.target_cmd = "cat >/dev/null";
  s.target_address = "198.51.100.254";  // TEST-NET-2, not on this machine: bind fails
  FabricStreamResult r = FabricStream(s);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.listening);
  EXPECT_NE(r.Problem().find("no listener came up"), std::string::npos) << r.Problem();
}

}  // namespace
}  // namespace fleet
