// Tests of the state document: JSON shape, validation, record order.
#include "state/state.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

namespace fleet {
namespace {

using nlohmann::json;

ResourceRecord Rec(const std::string& type, const std::string& name, json attrs = json::object()) {
  ResourceRecord r;
  r.address = type + "." + name;
  r.type = type;
  r.node = name;
  r.attributes = std::move(attrs);
  r.updated_at = "2026-11-29T17:35:24Z";
  return r;
}

State Sample() {
  State s;
  s.lineage = NewLineage();
  s.serial = 7;
  s.Upsert(Rec("node", "dgx1", {{"hostname", "spark-1"}}));
  s.Upsert(Rec("display_ram", "dgx1", {{"original", {{"modeset", "N"}, {"fbdev", "Y"}}}}));
  s.Upsert(Rec("deployment", "qwen38@dgx5"));
  return s;
}

std::vector<std::string> Addresses(const State& s) {
  std::vector<std::string> out;
  for (const auto& r : s.resources) out.push_back(r.address);
  return out;
}

TEST(StateTest, JsonRoundTrip) {
  State s = Sample();
  json j = s.ToJson();
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["lineage"], s.lineage);
  EXPECT_EQ(j["serial"], 7);
  ASSERT_TRUE(j["resources"].is_array());
  ASSERT_EQ(j["resources"].size(), 3u);
  for (const char* key : {"address", "type", "node", "attributes", "updated_at"}) {
    EXPECT_TRUE(j["resources"][0].contains(key)) << key;
  }

  // Through text, as the store does.
  auto back = State::FromJson(json::parse(j.dump(2)));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), j);
  EXPECT_EQ(back->lineage, s.lineage);
  EXPECT_EQ(back->serial, 7u);
  EXPECT_EQ(Addresses(*back), Addresses(s));
  EXPECT_EQ(back->Find("display_ram.dgx1")->attributes["original"]["fbdev"], "Y");
}

TEST(StateTest, DefaultRecordRoundTrips) {
  State s;
  s.lineage = NewLineage();
  ResourceRecord r;
  r.address = "node.a";
  r.type = "node";
  s.Upsert(r);  // null attributes, empty node and time
  auto back = State::FromJson(s.ToJson());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->ToJson(), s.ToJson());
}

TEST(StateTest, FromJsonSortsResources) {
  json j = {{"version", 1},
            {"lineage", "x"},
            {"serial", 1},
            {"resources",
             {{{"address", "node.b"}, {"type", "node"}},
              {{"address", "image.z@a"}, {"type", "image"}},
              {{"address", "node.a"}, {"type", "node"}}}}};
  auto s = State::FromJson(j);
  ASSERT_TRUE(s.ok()) << s.status().message();
  EXPECT_EQ(Addresses(*s), (std::vector<std::string>{"image.z@a", "node.a", "node.b"}));
}

void ExpectRejected(const json& j, const std::string& needle) {
  auto s = State::FromJson(j);
  ASSERT_FALSE(s.ok()) << j.dump();
  EXPECT_NE(s.status().message().find(needle), std::string::npos)
      << "message: " << s.status().message();
}

TEST(StateTest, FromJsonRejectsGarbage) {
  ExpectRejected(json("hello"), "expected an object");
  ExpectRejected(json::array(), "expected an object");
  ExpectRejected(json(nullptr), "expected an object");
  ExpectRejected(json::object(), "missing \"version\"");
  ExpectRejected({{"version", 1}, {"serial", 1}}, "lineage");
  ExpectRejected({{"version", 1}, {"lineage", "x"}}, "missing \"serial\"");
}

TEST(StateTest, FromJsonRejectsWrongTypes) {
  json base = Sample().ToJson();
  auto with = [&](const json::json_pointer& p, json v) {
    json j = base;
    j[p] = std::move(v);
    return j;
  };
  ExpectRejected(with("/version"_json_pointer, "1"), "state.version");
  ExpectRejected(with("/version"_json_pointer, 1.5), "state.version");
  ExpectRejected(with("/version"_json_pointer, 0), "unsupported version 0");
  ExpectRejected(with("/lineage"_json_pointer, 42), "state.lineage");
  ExpectRejected(with("/lineage"_json_pointer, ""), "state.lineage");
  ExpectRejected(with("/serial"_json_pointer, -1), "state.serial");
  ExpectRejected(with("/serial"_json_pointer, "7"), "state.serial");
  ExpectRejected(with("/resources"_json_pointer, json::object()), "state.resources");
  ExpectRejected(with("/resources/0"_json_pointer, "node.a"), "state.resources[0]");
  ExpectRejected(with("/resources/1/address"_json_pointer, 3), "state.resources[1].address");
  ExpectRejected(with("/resources/1/type"_json_pointer, nullptr), "state.resources[1].type");
  ExpectRejected(with("/resources/2/node"_json_pointer, 1), "state.resources[2].node");
  ExpectRejected(with("/resources/0/attributes"_json_pointer, "x"),
                 "state.resources[0].attributes");
  ExpectRejected(with("/resources/0/updated_at"_json_pointer, 5), "state.resources[0].updated_at");
  json no_addr = base;
  no_addr["resources"][0].erase("address");
  ExpectRejected(no_addr, "missing \"address\"");
  json dup = base;
  dup["resources"][1]["address"] = dup["resources"][0]["address"];
  ExpectRejected(dup, "duplicate address");
}

TEST(StateTest, FromJsonRejectsNewerVersion) {
  // A newer fleet may have changed everything else too: the version wins.
  json j = {{"version", 2}, {"format", "something new"}};
  ExpectRejected(j, "state written by a newer fleet (version 2)");
}

TEST(StateTest, UpsertRemoveFindKeepOrder) {
  State s;
  s.Upsert(Rec("node", "c"));
  s.Upsert(Rec("node", "a"));
  s.Upsert(Rec("image", "x@a"));
  s.Upsert(Rec("node", "b"));
  EXPECT_EQ(Addresses(s), (std::vector<std::string>{"image.x@a", "node.a", "node.b", "node.c"}));

  s.Upsert(Rec("node", "b", {{"v", 2}}));  // replace, not insert
  EXPECT_EQ(s.resources.size(), 4u);
  ASSERT_NE(s.Find("node.b"), nullptr);
  EXPECT_EQ(s.Find("node.b")->attributes["v"], 2);
  EXPECT_EQ(s.Find("node.zz"), nullptr);
  EXPECT_EQ(s.Find(""), nullptr);

  EXPECT_TRUE(s.Remove("node.a"));
  EXPECT_FALSE(s.Remove("node.a"));
  EXPECT_FALSE(s.Remove("node.nope"));
  EXPECT_EQ(Addresses(s), (std::vector<std::string>{"image.x@a", "node.b", "node.c"}));
  EXPECT_TRUE(s.Remove("node.c"));
  EXPECT_TRUE(s.Remove("image.x@a"));
  EXPECT_EQ(Addresses(s), (std::vector<std::string>{"node.b"}));
}

TEST(StateTest, ToJsonSortsEvenWhenAppendedDirectly) {
  State s;
  s.lineage = "x";
  s.resources.push_back(Rec("node", "b"));
  s.resources.push_back(Rec("node", "a"));
  json j = s.ToJson();
  EXPECT_EQ(j["resources"][0]["address"], "node.a");
  EXPECT_EQ(j["resources"][1]["address"], "node.b");
}

TEST(StateTest, NewLineageIsAUuid) {
  std::regex uuid(
      "^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-"
      "[0-9a-f]{12}$");
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    std::string l = NewLineage();
    EXPECT_TRUE(std::regex_match(l, uuid)) << l;
    seen.insert(l);
  }
  EXPECT_EQ(seen.size(), 100u);
}

TEST(StateTest, NowIsRfc3339Utc) {
  std::regex rfc("^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}Z$");
  EXPECT_TRUE(std::regex_match(NowRfc3339(), rfc)) << NowRfc3339();
}

}  // namespace
}  // namespace fleet
