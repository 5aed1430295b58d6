#include "manifests/byte_size.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(ByteSizeTest, BinaryUnitsAsContainerClisReadThem) {
  EXPECT_EQ(ParseByteSize("24GiB"), 24ull << 30);
  EXPECT_EQ(ParseByteSize("24g"), 24ull << 30);
  EXPECT_EQ(ParseByteSize("24GB"), 24ull << 30);
  EXPECT_EQ(ParseByteSize("24 Gi"), 24ull << 30);
  EXPECT_EQ(ParseByteSize("512m"), 512ull << 20);
  EXPECT_EQ(ParseByteSize("1.5T"), 3ull << 39);
  EXPECT_EQ(ParseByteSize("4096"), 4096u);
  EXPECT_EQ(ParseByteSize("100b"), 100u);
}

TEST(ByteSizeTest, RefusesWhatIsNotASize) {
  for (const char* bad :
       {"", "g", "-1g", "1.2.3g", "12x", "1gg", "0", "0.1", "12 ", "1bb", "99999999999p"})
    EXPECT_EQ(ParseByteSize(bad), std::nullopt) << bad;
}

// Found auditing the parsers for exceptions (fuzz/): a number too large for a
// double made std::stod throw out of LoadManifest.
TEST(ByteSizeTest, HugeNumbersAreRefusedNotThrown) {
  std::optional<uint64_t> v;
  ASSERT_NO_THROW(v = ParseByteSize(std::string(400, '9') + " GB"));
  EXPECT_FALSE(v.has_value());
  ASSERT_NO_THROW(v = ParseByteSize("0." + std::string(400, '0') + "1"));
  EXPECT_FALSE(v.has_value());
}

}  // namespace
}  // namespace fleet
