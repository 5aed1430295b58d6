#include "providers/shared/completeness.h"

#include <gtest/gtest.h>

#include "providers/shared/hub_test_util.h"

namespace fleet {
namespace {

using testing_hub::kRev;

SnapshotEntry Link(const std::string& path, uint64_t size, const std::string& blob) {
  SnapshotEntry e;
  e.path = path;
  e.link = LinkKind::kRelative;
  e.target = "../../blobs/" + blob;
  e.blob = blob;
  e.resolved = true;
  e.size = size;
  return e;
}

Listing Reference() {
  return {{"config.json", 100, "c1"},
          {"model-00001-of-00002.safetensors", 5000, "s1"},
          {"model-00002-of-00002.safetensors", 7000, "s2"},
          {"model.safetensors.index.json", 300, "i1"}};
}

HubProbe Complete() {
  HubProbe p;
  p.layout = "hub";
  p.snapshot = true;
  p.snapshots = {kRev};
  p.refs["main"] = kRev;
  for (const ListedFile& f : Reference()) p.entries.push_back(Link(f.path, f.size, f.blob));
  return p;
}

std::string All(const Completeness& c) { return JoinProblems(c.problems, 100); }

TEST(Completeness, CompleteAgainstReference) {
  Listing ref = Reference();
  Completeness c = CheckCompleteness(Complete(), &ref, kRev);
  EXPECT_TRUE(c.complete) << All(c);
  EXPECT_EQ(c.files_ok, 4u);
  EXPECT_EQ(c.present_bytes, 12400u);
  EXPECT_EQ(c.missing_bytes, 0u);
  EXPECT_TRUE(c.notes.empty());
}

TEST(Completeness, TruncatedShardIsNamed) {
  Listing ref = Reference();
  HubProbe p = Complete();
  p.entries[2].size = 6000;
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(All(c), "model-00002-of-00002.safetensors: 6000 bytes, expected 7000 (truncated)");
  EXPECT_EQ(c.missing_bytes, 7000u);
}

TEST(Completeness, MissingShardIsNamed) {
  Listing ref = Reference();
  HubProbe p = Complete();
  p.entries.erase(p.entries.begin() + 1);
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(All(c), "model-00001-of-00002.safetensors: missing");
}

TEST(Completeness, BrokenSymlinkIsNamed) {
  Listing ref = Reference();
  HubProbe p = Complete();
  p.entries[1].link = LinkKind::kBroken;
  p.entries[1].resolved = false;
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(All(c), "model-00001-of-00002.safetensors: broken symlink -> ../../blobs/s1");
  // Without a reference too.
  c = CheckCompleteness(p, nullptr, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_NE(All(c).find("model-00001-of-00002.safetensors: broken symlink"), std::string::npos);
}

TEST(Completeness, ZeroByteDownloadWithMarkerIsNotProof) {
  // What the log's failed wrapper left: refs, an empty snapshot, a .done.
  HubProbe p;
  p.layout = "hub";
  p.snapshot = true;
  p.snapshots = {kRev};
  p.refs["main"] = kRev;
  p.top_files = {".done"};
  Listing ref = Reference();
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_NE(All(c).find("config.json: missing"), std::string::npos);
  EXPECT_NE(All(c).find("model-00002-of-00002.safetensors: missing"), std::string::npos);
  EXPECT_EQ(c.missing_bytes, 12400u);
  bool marker_noted = false;
  for (const std::string& n : c.notes) marker_noted |= n.find("marker .done") != std::string::npos;
  EXPECT_TRUE(marker_noted);
  // No reference: an empty snapshot is still not complete.
  c = CheckCompleteness(p, nullptr, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(All(c), "snapshot " + kRev + " is empty");
  // And zero-byte files are not a download.
  p.entries = {Link("model.safetensors", 0, "z")};
  c = CheckCompleteness(p, nullptr, kRev);
  EXPECT_EQ(All(c), "model.safetensors: 0 bytes");
}

TEST(Completeness, PartialBlobsCountAsDoneForTheTransfer) {
  Listing ref = Reference();
  HubProbe p = Complete();
  p.entries.erase(p.entries.begin() + 2);
  p.incomplete.push_back({"s2.incomplete", 2500, 0});
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(c.missing_bytes, 4500u);
}

TEST(Completeness, NoSnapshot) {
  HubProbe p;
  Listing ref = Reference();
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_FALSE(c.complete);
  EXPECT_EQ(All(c), "no snapshot of revision " + kRev + " (the repo is not in the cache)");
  EXPECT_EQ(c.missing_bytes, 12400u);
}

TEST(Completeness, RefsToMissingSnapshotsAndAbsoluteLinksAreNoted) {
  HubProbe p = Complete();
  p.refs["main"] = "ffffffffffffffffffffffffffffffffffffffff";
  p.entries[0].link = LinkKind::kAbsolute;
  p.entries[0].target = "/srv/hf/hub/models--a--b/blobs/c1";
  Listing ref = Reference();
  Completeness c = CheckCompleteness(p, &ref, kRev);
  EXPECT_TRUE(c.complete);  // nothing missing, but say it
  EXPECT_EQ(c.absolute_links, std::vector<std::string>{"config.json"});
  ASSERT_EQ(c.notes.size(), 2u);
  EXPECT_NE(c.notes[0].find("refs/main points at ffff"), std::string::npos);
  EXPECT_NE(c.notes[1].find("absolute symlink"), std::string::npos);
}

TEST(Completeness, ListingJsonRoundTrip) {
  Listing l = Reference();
  EXPECT_EQ(ListingToJson(ListingFromJson(ListingToJson(l))), ListingToJson(l));
  EXPECT_EQ(ListingBytes(l), 12400u);
  EXPECT_TRUE(ListingFromJson("nonsense").empty());
}

TEST(Completeness, IndexCoverage) {
  auto files = testing_hub::ThreeShardModel();
  std::vector<HeaderSample> headers;
  Listing present;
  for (const auto& [path, data] : files) {
    present.push_back({path, data.size(), ""});
    if (path.find(".safetensors") == std::string::npos || path.find(".json") != std::string::npos)
      continue;
    HeaderSample h;
    h.path = path;
    h.size = data.size();
    h.header_length = SafetensorsHeaderLength(data);
    h.header = data.substr(8, h.header_length);
    headers.push_back(h);
  }
  std::map<std::string, std::string> index = {
      {"model.safetensors.index.json", files["model.safetensors.index.json"]}};
  EXPECT_TRUE(CheckSafetensors(headers, index, present).empty());

  // A shard missing from the snapshot.
  Listing without = present;
  std::erase_if(without,
                [](const ListedFile& f) { return f.path == "model-00002-of-00003.safetensors"; });
  std::vector<HeaderSample> fewer = headers;
  std::erase_if(fewer,
                [](const HeaderSample& h) { return h.path == "model-00002-of-00003.safetensors"; });
  std::vector<std::string> p = CheckSafetensors(fewer, index, without);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_EQ(p[0],
            "model-00002-of-00003.safetensors: missing (model.safetensors.index.json maps 4 "
            "tensors to it)");

  // A tensor the index maps to a shard whose header lacks it.
  nlohmann::json j = nlohmann::json::parse(files["model.safetensors.index.json"]);
  j["weight_map"]["layers.9.extra"] = "model-00001-of-00003.safetensors";
  index["model.safetensors.index.json"] = j.dump();
  p = CheckSafetensors(headers, index, present);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("1 tensor(s) of model.safetensors.index.json not in its header (first: "
                      "layers.9.extra)"),
            std::string::npos)
      << p[0];

  // A header not read, an index that is not JSON.
  index["model.safetensors.index.json"] = "{";
  p = CheckSafetensors(fewer, index, present);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0], "model-00002-of-00003.safetensors: header not read");
  EXPECT_EQ(p[1], "model.safetensors.index.json: not JSON");
}

}  // namespace
}  // namespace fleet
