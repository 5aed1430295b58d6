#include "providers/model/model_attrs.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

using Json = nlohmann::json;

const std::string kRev = "0123456789abcdef0123456789abcdef01234567";

ModelWant StoreWant() {
  ModelWant w;
  w.repo = "org/ds";
  w.revision = "main";
  w.store = "nas";
  w.source = "hub";
  w.location = "nas";
  w.location_kind = "store";
  w.cache = "/mnt/nas/hub";
  w.verify = "deep";
  w.wanted_by = {"model ds store"};
  w.mounted_stores = {{"scratch", "/scratch/hub"}};
  w.branch = "main";
  w.store_nodes = {"dgx1", "dgx2"};
  w.store_nodes_off = {"dgx1"};
  return w;
}

TEST(ModelAttrs, WantKeysAsExpandAlwaysWroteThem) {
  const Json j = StoreWant();
  EXPECT_EQ(j.dump(),
            R"({"branch":"main","cache":"/mnt/nas/hub","location":"nas","location_kind":"store",)"
            R"("mounted_stores":[["scratch","/scratch/hub"]],"repo":"org/ds","revision":"main",)"
            R"("self_source":false,"source":"hub","source_address":"","source_cache":"",)"
            R"("source_kind":"hub","source_name":"","source_node":"","store":"nas",)"
            R"("store_nodes":["dgx1","dgx2"],"store_nodes_off":["dgx1"],"verify":"deep",)"
            R"("verify_forced":false,"wanted_by":["model ds store"]})");
  EXPECT_EQ(Json(j.get<ModelWant>()), j);

  // Pinned, in a node's cache: no branch, no store keys.
  ModelWant local = StoreWant();
  local.location_kind = "node";
  local.branch.clear();
  const Json l = local;
  EXPECT_FALSE(l.contains("branch"));
  EXPECT_FALSE(l.contains("store_nodes"));
  EXPECT_FALSE(l.contains("store_nodes_off"));
  EXPECT_EQ(Json(l.get<ModelWant>()), l);
}

TEST(ModelAttrs, MissingKeysTakeTheirDefaults) {
  const ModelWant w = Json::object().get<ModelWant>();
  EXPECT_EQ(w.location_kind, "node");
  EXPECT_EQ(w.source_kind, "hub");
  EXPECT_EQ(w.verify, "sizes");
  EXPECT_FALSE(w.self_source);
  const ModelRecord r = Json::parse(R"({"repo": "org/q", "bytes": 7})").get<ModelRecord>();
  EXPECT_EQ(r.repo, "org/q");
  EXPECT_EQ(r.bytes, 7u);
  EXPECT_FALSE(r.files.has_value());
  EXPECT_FALSE(ModelRecordOf(nullptr).has_value());
  const Json null;
  EXPECT_FALSE(ModelRecordOf(&null).has_value());
}

TEST(ModelAttrs, StepDropsWhatOnlyTheDiffReads) {
  ModelStep s;
  s.want = StoreWant();
  Json j = s;
  for (const char* k : {"wanted_by", "mounted_stores", "store_nodes", "store_nodes_off", "op",
                        "write_ref", "legacy", "fix_links", "expected_bytes"})
    EXPECT_FALSE(j.contains(k)) << k;
  s.op = "ensure";
  s.write_ref = true;
  s.legacy = false;
  s.fix_links = std::vector<std::string>{"config.json"};
  s.expected_bytes = 636;
  j = s;
  EXPECT_EQ(j["op"], "ensure");
  EXPECT_EQ(j["write_ref"], true);
  EXPECT_EQ(j["legacy"], false);
  EXPECT_EQ(j["fix_links"], Json::parse(R"(["config.json"])"));
  EXPECT_EQ(j["expected_bytes"], 636);
  EXPECT_EQ(Json(j.get<ModelStep>()), j);
  EXPECT_FALSE(ModelRemovalOf(j).has_value());
}

TEST(ModelAttrs, RemovalAndRecord) {
  const Json rm = ModelRemoval{"org/q", kRev, "/srv/hf/hub", "dgx2"};
  EXPECT_EQ(rm.dump(), R"({"cache":"/srv/hf/hub","location":"dgx2","op":"remove","repo":"org/q",)"
                       R"("revision":")" +
                           kRev + R"("})");
  ASSERT_TRUE(ModelRemovalOf(rm).has_value());
  EXPECT_EQ(ModelRemovalOf(rm)->location, "dgx2");

  ModelRecord r;
  r.repo = "org/q";
  r.revision = kRev;
  r.files = Listing{{"config.json", 100, std::string(40, 'c')}};
  r.bytes = 100;
  r.verified = "headers";
  r.origin = "staged";
  Json j = r;
  EXPECT_FALSE(j.contains("branch"));
  EXPECT_FALSE(j.contains("deep_verified_at"));
  EXPECT_EQ(j["files"], ListingToJson(*r.files));
  r.verified = "deep";
  r.branch = "main";
  j = r;
  EXPECT_EQ(j["deep_verified_at"], "");
  EXPECT_EQ(j["branch"], "main");
  EXPECT_EQ(Json(j.get<ModelRecord>()), j);
}

TEST(ModelAttrs, HoldingsAsThePlanShowsThem) {
  ModelHoldings h{kRev, 3, 636, false, std::nullopt, "", ""};
  EXPECT_EQ(Json(h).dump(),
            R"({"bytes":636,"complete":false,"files":3,"revision":")" + kRev + R"("})");
  h.layout = "legacy";
  h.verified = "deep";
  h.branch = "main";
  const Json j = h;
  EXPECT_EQ(j["layout"], "legacy");
  EXPECT_EQ(j["verified"], "deep");
  EXPECT_EQ(j["branch"], "main");
  EXPECT_EQ(Json(j.get<ModelHoldings>()), j);
}

// The last value(key, size_t) of a count read back from JSON: 1e300 into a
// size_t was the undefined cast the plan fuzzer found for the serial.
TEST(ModelAttrs, HoldingsCountsOutOfRangeReadAsZero) {
  const ModelHoldings h = Json::parse(R"({"files": 1e300, "bytes": -1})").get<ModelHoldings>();
  EXPECT_EQ(h.files, 0u);
  EXPECT_EQ(h.bytes, 0u);
}

}  // namespace
}  // namespace fleet
