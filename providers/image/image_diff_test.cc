// The image diff's named decisions, each on its own.
#include <gtest/gtest.h>

#include "providers/image/image_json.h"
#include "providers/image/image_provider.h"
#include "providers/shared/image_listing.h"

namespace fleet {
namespace image_internal {
namespace {

const std::string kDigest = "sha256:" + std::string(64, 'd');
const std::string kConfig = "sha256:" + std::string(64, 'c');

ImageProbe Has() {
  ImageProbe p;
  p.by_ref.tried = p.by_ref.found = true;
  p.by_ref.id = kConfig;
  p.by_ref.repo_digests = {"r/i@" + kDigest};
  return p;
}

class ImageDiffTest : public ::testing::Test {
 protected:
  ImageDiffTest() {
    want_.ref = "r/i@" + kDigest;
    want_.digest = kDigest;
    want_.source = "peers";
    desired_.address = "image.i@dgx5";
    desired_.type = "image";
    desired_.name = "i";
    desired_.node = "dgx5";
    actual_.probed = true;
  }

  ImageDiffInput In() {
    return {desired_, want_, ref_, actual_, ctx_, probes_, here_, judged_, "image i"};
  }

  ImageWant want_;
  ImageRef ref_ = ParseImageRef("r/i@" + kDigest);
  DesiredResource desired_;
  ActualResource actual_;
  NodeFacts facts_;
  DiffContext ctx_{facts_, nullptr, nullptr, nullptr, false, nullptr};
  std::map<std::string, ImageProbe> probes_;
  ImageProbe here_;
  Judged judged_;
};

TEST_F(ImageDiffTest, ConfigDigestIsReadWhereTheRegistryDigestIs) {
  EXPECT_TRUE(FindConfigDigest(ref_, probes_, nullptr).id.empty());
  probes_.insert_or_assign("dgx4", Has());
  const ConfigDigest c = FindConfigDigest(ref_, probes_, nullptr);
  EXPECT_EQ(c.id, kConfig);
  EXPECT_EQ(c.from, "dgx4");
}

TEST_F(ImageDiffTest, NotPinnedUnlessFloatingIsAllowed) {
  EXPECT_FALSE(NotPinned(In(), PlanChange()).has_value());
  ref_ = ParseImageRef("r/i:latest");
  ASSERT_TRUE(NotPinned(In(), PlanChange()).has_value());
  want_.allow_floating = true;
  EXPECT_FALSE(NotPinned(In(), PlanChange()).has_value());
}

TEST_F(ImageDiffTest, PeersCopyFromAHolderOrSayNoneHasIt) {
  probes_.insert_or_assign("dgx5", ImageProbe());
  CopySource none = FromPeers(In(), "");
  EXPECT_NE(none.error.find("no node has it to copy from"), std::string::npos);
  probes_.insert_or_assign("dgx4", Has());
  CopySource s = FromPeers(In(), "");
  EXPECT_TRUE(s.error.empty());
  EXPECT_EQ(s.from, "dgx4");
  EXPECT_EQ(s.config, kConfig);  // read on the holder
}

TEST_F(ImageDiffTest, NamedSourceMustNotBeTheNodeItself) {
  want_.source = "node:dgx5";
  EXPECT_NE(FromNamedNode(In(), "").error.find("its own source"), std::string::npos);
  want_.source = "node:dgx4";
  CopySource s = FromNamedNode(In(), "");
  EXPECT_TRUE(s.error.empty());
  EXPECT_NE(s.reason.find("not probed for this image"), std::string::npos);
}

TEST_F(ImageDiffTest, PresentKeepsWhatIsThere) {
  EXPECT_FALSE(Present(In(), ConfigDigest(), PlanChange()).has_value());
  judged_.present = true;
  judged_.id = kConfig;
  Decision d = Present(In(), ConfigDigest(), PlanChange());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->action, Action::kNoop);
  EXPECT_EQ(d->after, d->before);
}

TEST_F(ImageDiffTest, LoadedButNotNamedIsNamedNotCopiedAgain) {
  const ConfigDigest config{kConfig, "dgx4"};
  EXPECT_FALSE(LoadedNotNamed(In(), config, PlanChange()).has_value());  // not listed
  ImageListing listing;
  listing.listed = true;
  listing.images.push_back({kConfig, {}, {}});  // loaded, no name
  facts_.images = listing.ToJson();
  EXPECT_FALSE(LoadedNotNamed(In(), ConfigDigest(), PlanChange()).has_value());  // unknown config
  Decision d = LoadedNotNamed(In(), config, PlanChange());
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->action, Action::kUpdate);
  EXPECT_EQ(d->detail.get<ImageStep>().op, kOpName);
  EXPECT_NE(d->summary.find("name image"), std::string::npos);
  judged_.other_id = "sha256:" + std::string(64, 'e');  // fleet's tag names another image
  EXPECT_FALSE(LoadedNotNamed(In(), config, PlanChange()).has_value());
}

}  // namespace
}  // namespace image_internal
}  // namespace fleet
