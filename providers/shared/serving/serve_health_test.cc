// The health wait on a FakeClock: minutes of polling run in microseconds,
// and what the wait decides depends on the polls' answers alone, not on
// how busy the machine is.
#include "providers/shared/serving/serve_health.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "src/fake_clock.h"

namespace fleet {
namespace {

using std::chrono::seconds;

// A node whose polls answer from a script: each Run of the poll takes the
// next answer (the last one repeats); an empty answer is an unreachable
// node. Other commands (the log tail) print nothing.
class ScriptedNode : public Transport {
 public:
  explicit ScriptedNode(std::vector<std::string> answers) : answers_(std::move(answers)) {}
  Status Connect() override { return Status::OK(); }
  Result<CommandResult> Run(const std::string& command, std::string_view) override {
    if (command.find(" logs ") != std::string::npos) return CommandResult{};
    const std::string& a = answers_[std::min(polls_++, answers_.size() - 1)];
    if (a.empty()) return Status::Unreachable("connect: Connection refused");
    CommandResult r;
    r.out = a;
    return r;
  }
  Result<CommandResult> RunStreaming(const std::string& c,
                                     const std::function<bool(std::string_view)>&,
                                     std::string_view in) override {
    return Run(c, in);
  }
  Result<CommandResult> RunWithInput(const std::string& c,
                                     const std::function<bool(std::string*)>&) override {
    return Run(c, "");
  }
  Status WriteFile(const std::string&, std::string_view, int) override { return Status::OK(); }
  std::string Describe() const override { return "node n1"; }
  size_t polls() const { return polls_; }

 private:
  std::vector<std::string> answers_;
  size_t polls_ = 0;
};

ContainerSpec Serve() {
  ContainerSpec spec;
  spec.container = "fleet-llm";
  spec.cli = "docker";
  spec.health_host = "127.0.0.1";
  spec.port = 8000;
  spec.health_path = "/health";
  spec.health_timeout_s = 900;
  return spec;
}

constexpr char kBooting[] = "state=running\nexit_code=0\nhealth=503\n";
constexpr char kServing[] = "state=running\nexit_code=0\nhealth=200\n";

TEST(ServeHealthTest, PollsUntilTheUrlAnswersWithoutWaitingInRealTime) {
  ScriptedNode node({kBooting, kBooting, kServing});
  FakeClock clock;
  StepContext ctx;
  ctx.transport = &node;
  ctx.clock = &clock;
  const auto wall = std::chrono::steady_clock::now();
  Status s = WaitHealthy(ctx, Serve());
  EXPECT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(node.polls(), 3u);
  EXPECT_EQ(clock.Elapsed(), std::chrono::milliseconds(600));  // two polls 300 ms apart
  EXPECT_LT(std::chrono::steady_clock::now() - wall, seconds(5));
}

TEST(ServeHealthTest, ANodeDarkForItsDarkTimeEndsTheWait) {
  ScriptedNode node({kBooting, ""});
  FakeClock clock;
  Settings settings;
  settings.health_dark_after = "30s";
  StepContext ctx;
  ctx.transport = &node;
  ctx.clock = &clock;
  ctx.settings = &settings;
  Status s = WaitHealthy(ctx, Serve());
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(s.unreachable());
  EXPECT_NE(s.message().find("the node stopped answering while http://127.0.0.1:8000/health was "
                             "awaited"),
            std::string::npos)
      << s.message();
  // Not before the dark time, and long before health.timeout.
  EXPECT_GE(clock.Elapsed(), seconds(30));
  EXPECT_LT(clock.Elapsed(), seconds(60));
}

TEST(ServeHealthTest, AServeThatNeverAnswersFailsAtItsTimeout) {
  ScriptedNode node({kBooting});
  FakeClock clock;
  StepContext ctx;
  ctx.transport = &node;
  ctx.clock = &clock;
  ContainerSpec spec = Serve();
  spec.health_timeout_s = 120;
  Status s = WaitHealthy(ctx, spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("did not answer 2xx within 2 min (health.timeout; last answer: 503)"),
            std::string::npos)
      << s.message();
  EXPECT_GE(clock.Elapsed(), seconds(120));
  EXPECT_LT(clock.Elapsed(), seconds(125));
}

}  // namespace
}  // namespace fleet
