// FabricStream on this machine (LocalTransport for both ends, the listener
// on 127.0.0.1): the real openssl s_server/s_client, the real scripts.
#include "providers/shared/fabric_stream.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <string_view>

#include "providers/shared/fabric_send_sh.h"
#include "providers/shared/silenced_port_test_util.h"
#include "src/local_transport.h"
#include "src/shell_quote.h"

namespace fleet {
namespace {

bool HaveOpenssl() { return std::system("command -v openssl >/dev/null 2>&1") == 0; }

SshEndpoint Local(const char* name) {
  SshEndpoint e;
  e.node = name;
  e.address = "local";
  return e;
}

// A stream between two local "nodes" over 127.0.0.1.
struct Stream {
  LocalTransport src{Local("a")}, dst{Local("b")};
  FabricStreamSpec spec;
  Stream(const std::string& source_cmd, const std::string& target_cmd) {
    spec.source = &src;
    spec.source_cmd = source_cmd;
    spec.target = &dst;
    spec.target_cmd = target_cmd;
    spec.target_address = "127.0.0.1";
  }
};

TEST(FabricStream, CarriesTheBytes) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("head -c 3000000 /dev/zero", "wc -c");
  FabricStreamResult r = FabricStream(t.spec);
  ASSERT_TRUE(r.ok()) << r.Problem();
  EXPECT_TRUE(r.listening);
  EXPECT_EQ(r.target->out.substr(r.target->out.find_first_not_of(' ')), "3000000\n");
}

TEST(FabricStream, WrongKeyIsRefused) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("head -c 100000 /dev/zero", "n=$(wc -c); echo \"got $n\"; [ \"$n\" -gt 0 ]");
  t.spec.source_key_override = std::string(64, 'f');
  FabricStreamResult r = FabricStream(t.spec);
  EXPECT_FALSE(r.ok());
  ASSERT_TRUE(r.target.ok());
  EXPECT_NE(r.target->exit_code, 0);
  EXPECT_NE(r.target->out.find("got 0"), std::string::npos) << r.target->out;
  EXPECT_NE(r.Problem().find("did not end cleanly"), std::string::npos) << r.Problem();
  EXPECT_EQ(r.Problem().find(std::string(64, 'f')), std::string::npos);
}

TEST(FabricStream, SourceFailureIsReported) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("echo 'no such image' >&2; exit 125", "cat >/dev/null");
  FabricStreamResult r = FabricStream(t.spec);
  EXPECT_FALSE(r.ok());
  EXPECT_NE(r.Problem().find("no such image"), std::string::npos) << r.Problem();
}

// A source that fails mid-stream cuts it without close_notify: the target
// fails, even though what it read so far was well-formed.
TEST(FabricStream, ASourceFailingMidStreamFailsTheTarget) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("head -c 1000000 /dev/zero; echo 'read error' >&2; exit 1", "wc -c");
  FabricStreamResult r = FabricStream(t.spec);
  EXPECT_FALSE(r.unconnected);
  ASSERT_TRUE(r.target.ok());
  EXPECT_NE(r.target->exit_code, 0);
  EXPECT_NE(r.Problem().find("read error"), std::string::npos) << r.Problem();
  EXPECT_NE(r.Problem().find("did not end cleanly"), std::string::npos) << r.Problem();
}

TEST(FabricStream, AReceiverThatOnlyStopsReadingIsWaitedFor) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  // The target reads nothing for 4 s while 20 MB wait: its window closes,
  // the sender's probes are answered, and a stall limit of 2 s must not
  // cut the stream.
  Stream t("head -c 20000000 /dev/zero", "sleep 4; wc -c");
  t.spec.limits.stall_s = 2;
  FabricStreamResult r = FabricStream(t.spec);
  ASSERT_TRUE(r.ok()) << r.Problem();
  EXPECT_EQ(r.target->out.substr(r.target->out.find_first_not_of(' ')), "20000000\n");
}

TEST(FabricStream, ASilentReceiverStopsTheSenderAndItsListener) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  if (!testing_net::SilencingWorks()) GTEST_SKIP() << "needs root and nft to drop packets";
  // Once the stream runs, every packet of the listener's port is dropped
  // (its node lost power): the sender stops after stall_s without an
  // answer, and fleet stops the listener, which waits for bytes that
  // cannot come.
  testing_net::SilenceOnCue cue;
  Stream t("head -c 50000000 /dev/zero", cue.TargetCommand());
  t.spec.limits.stall_s = 2;
  const auto t0 = std::chrono::steady_clock::now();
  FabricStreamResult r;
  const int port = cue.Run([&] { r = FabricStream(t.spec); });
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_GT(port, 0);
  ASSERT_TRUE(r.source.ok());
  EXPECT_EQ(r.source->exit_code, kFabricStalledExit) << r.source->err;
  EXPECT_NE(r.source->err.find("answered nothing for 2 s"), std::string::npos) << r.source->err;
  ASSERT_TRUE(r.target.ok()) << r.target.status().message();
  EXPECT_EQ(r.target->exit_code, 1);
  EXPECT_NE(r.target->err.find("fabric: stopped: its sender got no answer"), std::string::npos)
      << r.target->err;
  EXPECT_LT(took, 20.0);
}

TEST(FabricStream, ListenerNobodyConnectsToIsStopped) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport dst(Local("b"));
  const auto t0 = std::chrono::steady_clock::now();
  Result<CommandResult> r =
      dst.Run(FabricListenScript("127.0.0.1", "fleet-test", "cat",
                                 {.accept_timeout_s = 1, .timeout_s = 30}),
              FabricSessionPem(std::string(64, 'a'), RealClock()->UnixSeconds()));
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 1);
  EXPECT_NE(r->err.find("nobody connected"), std::string::npos) << r->err;
  EXPECT_NE(r->out.find("FLEET-FABRIC-READY "), std::string::npos);
  EXPECT_LT(s, 10.0);
}

TEST(FabricStream, NoListenerOnAForeignAddress) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("echo hi", "cat >/dev/null");
  t.spec.target_address = "198.51.100.254";  // TEST-NET-2, not on this machine: bind fails
  FabricStreamResult r = FabricStream(t.spec);
  EXPECT_FALSE(r.ok());
  EXPECT_FALSE(r.listening);
  EXPECT_NE(r.Problem().find("no listener came up"), std::string::npos) << r.Problem();
}

TEST(FabricStream, TheKeyIsOnNoCommandLine) {
  const std::string key(64, 'c');
  const std::string pem = FabricSessionPem(key, RealClock()->UnixSeconds());
  ASSERT_NE(pem.find("-----BEGIN SSL SESSION PARAMETERS-----"), std::string::npos) << pem;
  EXPECT_EQ(FabricSessionPem(std::string(63, 'c'), 0), "");
  EXPECT_EQ(FabricSessionPem(std::string(64, 'x'), 0), "");
  // The scripts take no key: it comes on their stdin.
  for (const std::string& script :
       {FabricListenScript("10.77.0.2", "fleet-id", "cat", {}),
        FabricSendScript("10.77.0.2", 40000, "fleet-id", "cat f", {})}) {
    EXPECT_EQ(script.find("-psk "), std::string::npos) << script;
    EXPECT_NE(script.find("-psk_session \"$d/psk\""), std::string::npos) << script;
    EXPECT_NE(script.find("umask 077"), std::string::npos) << script;
  }
  // openssl reads the file: the PSK in it is the key.
  LocalTransport t(Local("a"));
  Result<CommandResult> r = t.Run("openssl sess_id -noout -text", pem);
  ASSERT_TRUE(r.ok());
  EXPECT_NE(r->out.find(std::string("Resumption PSK: ") + std::string(64, 'C')), std::string::npos)
      << r->out << r->err;
  // Not expired by a node clock a few days off (OpenSSL's default: 304 s).
  EXPECT_NE(r->out.find("Timeout   : 1209600 (sec)"), std::string::npos) << r->out;
}

// The source's transport, but its scripts connect to port 1 of the
// listener's address (nothing listens there): as a fabric link that is
// down, the connection cannot be made.
class ToAClosedPort : public Transport {
 public:
  explicit ToAClosedPort(Transport* t) : t_(t) {}
  Status Connect() override { return t_->Connect(); }
  Result<CommandResult> Run(const std::string& command, std::string_view in) override {
    // The send script's arguments, after its text (whose header names them
    // too): ... fleet-fabric-send ADDRESS PORT ...
    std::string c = command;
    const std::string mark = " fleet-fabric-send ";
    size_t at = c.rfind(mark);
    if (at != std::string::npos) {
      const size_t port = c.find(' ', at + mark.size()) + 1;
      c.replace(port, c.find(' ', port) - port, "1");
    }
    return t_->Run(c, in);
  }
  Result<CommandResult> RunStreaming(const std::string& c,
                                     const std::function<bool(std::string_view)>& out,
                                     std::string_view in) override {
    return t_->RunStreaming(c, out, in);
  }
  Result<CommandResult> RunWithInput(const std::string& c,
                                     const std::function<bool(std::string*)>& in) override {
    return t_->RunWithInput(c, in);
  }
  Status WriteFile(const std::string& p, std::string_view d, int m) override {
    return t_->WriteFile(p, d, m);
  }
  std::string Describe() const override { return t_->Describe(); }

 private:
  Transport* t_;
};

TEST(FabricStream, NoConnectionStopsTheListenerAtOnce) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  Stream t("head -c 100000 /dev/zero", "wc -c");
  ToAClosedPort src(&t.src);
  t.spec.source = &src;
  t.spec.limits.connect_timeout_s = 3;
  // The scripts' temp dirs go here (they honour TMPDIR): nothing may stay.
  char tmp[] = "/tmp/fleet-fabric-test.XXXXXX";
  ASSERT_NE(mkdtemp(tmp), nullptr);
  const std::string old_tmpdir = std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "";
  setenv("TMPDIR", tmp, 1);
  const auto t0 = std::chrono::steady_clock::now();
  FabricStreamResult r = FabricStream(t.spec);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (old_tmpdir.empty())
    unsetenv("TMPDIR");
  else
    setenv("TMPDIR", old_tmpdir.c_str(), 1);
  EXPECT_FALSE(r.ok());
  EXPECT_TRUE(r.listening);
  EXPECT_TRUE(r.unconnected);
  EXPECT_NE(r.Problem().find("could not connect to 127.0.0.1:1"), std::string::npos) << r.Problem();
  EXPECT_NE(r.Problem().find("no byte was sent"), std::string::npos) << r.Problem();
  // Not the listener's 60 s accept timeout: it was stopped.
  EXPECT_LT(secs, 30.0);
  // Its s_server (the PSK file named under tmp) and temp dir are gone.
  const std::string quoted_tmp = ShellQuote(tmp);
  // "/tmp/[f]leet-...": the pattern does not match the shell running pgrep.
  const std::string no_listener =
      "! pgrep -f " + ShellQuote("/tmp/[f]" + std::string(tmp).substr(6));
  const std::string empty = "[ -z \"$(ls -A " + quoted_tmp + ")\" ]";
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = std::system(no_listener.c_str()) == 0 && std::system(empty.c_str()) == 0;
    if (!gone) std::system("sleep 0.1");
  }
  EXPECT_TRUE(gone) << "a listener or a temp dir is left";
  std::system(("rm -rf " + quoted_tmp).c_str());
}

TEST(FabricStream, SendScriptExitsWithTheStatusesTheHeaderNames) {
  // fabric_send.sh spells its exit statuses out; they must stay the ones
  // FabricStream and FabricChain branch on.
  const std::string script(kFabricSendScript, kFabricSendScriptSize);
  for (int code : {kFabricStalledExit, kFabricUnconnectedExit, kFabricSourceFailedUnconnectedExit})
    EXPECT_NE(script.find("exit " + std::to_string(code) + "\n"), std::string::npos) << code;
}

TEST(FabricStream, SendScriptGivesUpConnectingInTime) {
  if (!HaveOpenssl()) GTEST_SKIP() << "no openssl";
  LocalTransport src(Local("a"));
  // Nothing listens on 127.0.0.1:1: refused at once, exit kFabricUnconnectedExit.
  Result<CommandResult> r =
      src.Run(FabricSendScript("127.0.0.1", 1, "fleet-id", "echo hi",
                               {.connect_timeout_s = 2, .timeout_s = 30}),
              FabricSessionPem(std::string(64, 'a'), RealClock()->UnixSeconds()));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, kFabricUnconnectedExit) << r->err;
  EXPECT_NE(r->err.find("no byte was sent"), std::string::npos) << r->err;
}

}  // namespace
}  // namespace fleet
