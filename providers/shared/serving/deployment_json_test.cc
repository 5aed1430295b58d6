// The deployment provider's typed attributes keep the JSON keys the plan
// and the state have always had, and read back what they wrote.
#include "providers/shared/serving/deployment_json.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

DeploymentWant SampleWant() {
  DeploymentWant w;
  w.shown.container = "fleet-qwen";
  w.shown.image = "r/i@sha256:" + std::string(64, 'a');
  w.shown.model = "org/m@" + std::string(40, 'b');
  w.shown.port = 30000;
  w.shown.health = "http://127.0.0.1:30000/v1/models";
  w.shown.options = {"--network=host"};
  w.shown.command = {"serve", "--api-key", "(sensitive)"};
  w.shown.env = {{"A", "1"}};
  w.shown.env_from = {{"HF_TOKEN", "HF_TOKEN"}};
  w.shown.spec = std::string(64, 'c');
  w.cli = "podman";
  w.health_timeout_s = 60;
  return w;
}

TEST(DeploymentJsonTest, WantHasThePlanKeys) {
  nlohmann::json j = SampleWant();
  std::vector<std::string> keys;
  for (auto it = j.begin(); it != j.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"cli", "command", "container", "env", "env_from",
                                            "health", "health_timeout_s", "image", "model",
                                            "options", "port", "rank", "spec"}));
  EXPECT_TRUE(j.at("rank").is_null());  // one node: no rank shown
  DeploymentWant with_need = SampleWant();
  with_need.gpu_memory_bytes = 1 << 30;
  EXPECT_EQ(nlohmann::json(with_need).at("gpu_memory_bytes"), 1 << 30);
}

TEST(DeploymentJsonTest, RecordRoundTrips) {
  DeploymentRecord r{SampleWant(), "cid", "sha256:" + std::string(64, 'd')};
  nlohmann::json j = r;
  EXPECT_EQ(j.at("container_id"), "cid");
  EXPECT_EQ(nlohmann::json(j.get<DeploymentRecord>()), j);
  EXPECT_FALSE(DeploymentRecordFrom(nlohmann::json()).has_value());
}

TEST(DeploymentJsonTest, DetailKeepsOnlyWhatIsSet) {
  EXPECT_EQ(nlohmann::json(DeploymentDetail{"qwen", "", ""}), (nlohmann::json{{"name", "qwen"}}));
  EXPECT_EQ(nlohmann::json(DeploymentDetail{"", "fleet-old", ""}),
            (nlohmann::json{{"container", "fleet-old"}, {"cli", ""}}));
}

TEST(DeploymentJsonTest, ProbeRoundTrips) {
  ContainerProbe p;
  p.exists = true;
  p.state = "running";
  p.health = 200;
  p.serving = {"fleet-a"};
  nlohmann::json j = p;
  EXPECT_EQ(nlohmann::json(j.get<ContainerProbe>()), j);
  EXPECT_EQ(nlohmann::json::object().get<ContainerProbe>().health, -1);
}

// A saved plan carries probes; a number out of an int's range read with
// value() was undefined behaviour (UBSan: "outside the range of
// representable values"); now it reads as not set.
TEST(DeploymentJsonTest, ProbeNumbersOutOfRangeReadAsNotSet) {
  const ContainerProbe p =
      nlohmann::json::parse(
          R"({"exit_code": 1e300, "age_s": 4.7e62, "health": 99999999999, "exists": true})")
          .get<ContainerProbe>();
  EXPECT_EQ(p.exit_code, 0);
  EXPECT_EQ(p.age_s, -1);
  EXPECT_EQ(p.health, -1);
  EXPECT_TRUE(p.exists);
  EXPECT_EQ(nlohmann::json::parse(R"({"age_s": 12})").get<ContainerProbe>().age_s, 12);
}

}  // namespace
}  // namespace fleet
