#include "providers/gateway/gateway_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace fleet {
namespace {

constexpr const char* kAlice = "sk-alice-0123456789abcdef";
constexpr const char* kBob = "sk-bob-0123456789abcdef";

TEST(GatewayKeys, ReadsNameKeyAndModels) {
  const std::string text = std::string("# the lab's clients\n\nalice ") + kAlice +
                           " qwen3.8,gpt-oss\n  bob " + kBob + " *\n";
  Result<std::vector<GatewayKey>> keys = ParseGatewayKeys(text, "keys");
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  ASSERT_EQ(keys->size(), 2u);
  EXPECT_EQ((*keys)[0].name, "alice");
  EXPECT_EQ((*keys)[0].models, (std::vector<std::string>{"qwen3.8", "gpt-oss"}));
  EXPECT_EQ(KeyFor(*keys, "gpt-oss"), kAlice);
  EXPECT_EQ(KeyFor(*keys, "other"), kBob);  // bob's key may use every model
}

TEST(GatewayKeys, GrantsHoldTheDigestNeverTheKey) {
  Result<std::vector<GatewayKey>> keys =
      ParseGatewayKeys(std::string("alice ") + kAlice + " qwen3.8\n", "keys");
  ASSERT_TRUE(keys.ok());
  const std::vector<GatewayKeyGrant> grants = KeyGrants(*keys);
  ASSERT_EQ(grants.size(), 1u);
  // sha256("sk-alice-0123456789abcdef"), as HAProxy's sha2(256),hex,lower.
  EXPECT_EQ(grants[0].digest.size(), 64u);
  EXPECT_EQ(grants[0].digest.find_first_not_of("0123456789abcdef"), std::string::npos);
  const std::string json = nlohmann::json(grants).dump();
  EXPECT_EQ(json.find(kAlice), std::string::npos) << json;
  EXPECT_TRUE(Grants(grants[0], "qwen3.8"));
  EXPECT_FALSE(Grants(grants[0], "gpt-oss"));
}

// A malformed line is named by number; its text (a key) is never quoted.
TEST(GatewayKeys, ErrorsNameTheLineNeverItsKey) {
  const std::string secret = "sk-secret-zzzzzzzzzzzzzz";
  for (const std::string& text : std::vector<std::string>{
           "alice " + secret + "\n", "al ice " + secret + " m\n", "alice " + secret + " m x\n",
           "alice " + secret + " 'bad model'\n", "alice " + secret + " m\nbob " + secret + " m\n",
           "alice short m\n", "alice " + secret + " m\nalice " + std::string(kBob) + " m\n"}) {
    Result<std::vector<GatewayKey>> keys = ParseGatewayKeys(text, "/k");
    ASSERT_FALSE(keys.ok()) << text;
    EXPECT_NE(keys.status().message().find("/k line "), std::string::npos)
        << keys.status().message();
    EXPECT_EQ(keys.status().message().find(secret), std::string::npos) << keys.status().message();
  }
  EXPECT_FALSE(ParseGatewayKeys("# none\n", "/k").ok());
}

TEST(GatewayKeys, AKeysFileReadableByOthersIsRefused) {
  char path[] = "/tmp/fleet-gw-keys-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  std::ofstream(path) << "alice " << kAlice << " qwen3.8\n";
  GatewaySpec g;
  g.name = "lab";
  g.keys_path = path;
  chmod(path, 0644);
  Result<std::vector<GatewayKey>> keys = LoadGatewayKeys(g);
  EXPECT_FALSE(keys.ok());
  EXPECT_NE(keys.status().message().find("chmod 600"), std::string::npos);
  chmod(path, 0600);
  keys = LoadGatewayKeys(g);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(keys->size(), 1u);
  unlink(path);
}

TEST(GatewayKeys, KeysFromAnEnvironmentVariable) {
  GatewaySpec g;
  g.name = "lab";
  g.keys_env = "FLEET_TEST_GATEWAY_KEYS";
  unsetenv("FLEET_TEST_GATEWAY_KEYS");
  EXPECT_FALSE(LoadGatewayKeys(g).ok());
  setenv("FLEET_TEST_GATEWAY_KEYS", (std::string("bob ") + kBob + " *").c_str(), 1);
  Result<std::vector<GatewayKey>> keys = LoadGatewayKeys(g);
  ASSERT_TRUE(keys.ok()) << keys.status().message();
  EXPECT_EQ(KeyFor(*keys, "any"), kBob);
  unsetenv("FLEET_TEST_GATEWAY_KEYS");
  EXPECT_TRUE(LoadGatewayKeys(GatewaySpec{}).ok());  // no keys declared: open
}

}  // namespace
}  // namespace fleet
