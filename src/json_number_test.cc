#include "src/json_number.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace fleet {
namespace {

using nlohmann::json;

TEST(JsonNumberTest, TooLargeFor64BitsIsADoubleAndRefused) {
  const json big = json::parse("47000000000000000000000000000000000000000000000000000000000000");
  ASSERT_TRUE(big.is_number_float());
  EXPECT_FALSE(JsonInteger<uint64_t>(big));
  EXPECT_FALSE(JsonInteger<int64_t>(big));
  EXPECT_FALSE(JsonInteger<int>(json::parse("1e300")));
}

TEST(JsonNumberTest, RangeIsTheTargetType) {
  EXPECT_EQ(JsonInteger<int64_t>(json(4294967296LL)), 4294967296LL);
  EXPECT_FALSE(JsonInteger<int>(json(4294967296LL)));
  EXPECT_EQ(JsonInteger<uint64_t>(json(UINT64_MAX)), UINT64_MAX);
  EXPECT_FALSE(JsonInteger<int64_t>(json(UINT64_MAX)));
  EXPECT_EQ(JsonInteger<int>(json(-1)), -1);
  EXPECT_FALSE(JsonInteger<uint64_t>(json(-1)));
  EXPECT_FALSE(NonNegativeInteger(json(-1)));
  EXPECT_EQ(NonNegativeInteger(json(0)), 0u);
}

TEST(JsonNumberTest, OnlyIntegersCount) {
  EXPECT_FALSE(JsonInteger<int>(json(7.0)));
  EXPECT_FALSE(JsonInteger<int>(json(7.5)));
  EXPECT_FALSE(JsonInteger<int>(json("7")));
  EXPECT_FALSE(JsonInteger<int>(json(true)));
  EXPECT_FALSE(JsonInteger<int>(json()));
}

TEST(JsonNumberTest, IntegerOrFallsBackAndNeverThrows) {
  const json j = json::parse(R"({"port": 8000, "big": 1e300, "text": "x", "none": null})");
  EXPECT_EQ(IntegerOr(j, "port", 0), 8000);
  EXPECT_EQ(IntegerOr(j, "big", -1), -1);
  EXPECT_EQ(IntegerOr(j, "text", -1), -1);  // value() would throw type_error 302
  EXPECT_EQ(IntegerOr(j, "none", 5), 5);
  EXPECT_EQ(IntegerOr(j, "missing", 5), 5);
  EXPECT_EQ(IntegerOr(json::array(), "port", 5), 5);
}

TEST(JsonNumberTest, OptionalIntegerTellsNotSetFromZero) {
  const json j = json::parse(R"({"free": 0, "big": 18446744073709551616, "neg": -1, "none": null})");
  EXPECT_EQ(OptionalInteger<uint64_t>(j, "free"), std::optional<uint64_t>(0));
  EXPECT_FALSE(OptionalInteger<uint64_t>(j, "big"));  // 2^64: parsed as a double
  EXPECT_FALSE(OptionalInteger<uint64_t>(j, "neg"));
  EXPECT_FALSE(OptionalInteger<uint64_t>(j, "none"));
  EXPECT_FALSE(OptionalInteger<uint64_t>(j, "missing"));
  EXPECT_FALSE(OptionalInteger<uint64_t>(json("free"), "free"));
}

}  // namespace
}  // namespace fleet
