// The image provider's typed attributes keep the JSON keys the plan and the
// state have always had, and read back what they wrote.
#include "providers/image/image_json.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(ImageJsonTest, RecordKeysFollowHowTheImageCame) {
  ImageRecord r;
  r.ref = "r/i:1";
  r.image_id = "sha256:" + std::string(64, 'a');
  r.via = kViaPresent;
  r.found = "by tag";
  EXPECT_EQ(nlohmann::json(r).size(), 5u);
  EXPECT_EQ(nlohmann::json(r).at("found"), "by tag");
  r.via = kViaPull;
  EXPECT_FALSE(nlohmann::json(r).contains("found"));
  r.via = kViaCopy;
  r.from = "dgx4";
  r.names = {"fleet/r-i:1"};
  nlohmann::json j = r;
  EXPECT_EQ(j.at("from"), "dgx4");
  EXPECT_EQ(nlohmann::json(j.get<ImageRecord>()), j);
}

TEST(ImageJsonTest, StepKeysFollowItsOp) {
  EXPECT_EQ(nlohmann::json(ImageStep{kOpRemove, "", "", "", "sha256:x"}),
            (nlohmann::json{{"op", "remove"}, {"image_id", "sha256:x"}}));
  EXPECT_EQ(nlohmann::json(ImageStep{"", "r/i:1", "", "", ""}),
            (nlohmann::json{{"ref", "r/i:1"}, {"config", ""}}));
  EXPECT_EQ(nlohmann::json(ImageStep{kOpCopy, "r/i:1", "c", "dgx4", ""}),
            (nlohmann::json{{"op", "copy"}, {"ref", "r/i:1"}, {"config", "c"}, {"from", "dgx4"}}));
}

TEST(ImageJsonTest, WantAndProbeRoundTrip) {
  ImageWant w{"r/i@sha256:" + std::string(64, 'b'),
              "sha256:" + std::string(64, 'b'),
              "peers",
              false,
              "docker",
              {"deployment qwen"}};
  nlohmann::json j = w;
  EXPECT_EQ(nlohmann::json(j.get<ImageWant>()), j);
  ImageProbe p;
  p.by_ref.tried = true;
  p.by_ref.found = true;
  p.by_ref.id = "sha256:" + std::string(64, 'c');
  EXPECT_EQ(nlohmann::json(nlohmann::json(p).get<ImageProbe>()), nlohmann::json(p));
}

}  // namespace
}  // namespace fleet
