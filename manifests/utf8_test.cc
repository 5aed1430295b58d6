#include "manifests/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace fleet {
namespace {

constexpr size_t kAll = std::string_view::npos;

TEST(Utf8Test, WellFormedText) {
  EXPECT_EQ(FirstNonPrintable(""), kAll);
  EXPECT_EQ(FirstNonPrintable("switch.dgx1\n"), kAll);
  EXPECT_EQ(FirstNonPrintable("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"), kAll);  // é € 😀
  EXPECT_EQ(FirstNonPrintable("\xEF\xBB\xBFversion: 1"), kAll);                     // a BOM
  EXPECT_EQ(FirstNonPrintable("\xF4\x8F\xBF\xBF"), kAll);                           // U+10FFFF
}

TEST(Utf8Test, FirstByteThatIsNot) {
  EXPECT_EQ(FirstNonPrintable("switch.d\xCBx3"), 8u);    // a lead byte without its follower
  EXPECT_EQ(FirstNonPrintable("ab\x80"), 2u);            // a lone continuation byte
  EXPECT_EQ(FirstNonPrintable("\xC0\xAF"), 0u);          // overlong '/'
  EXPECT_EQ(FirstNonPrintable("x\xE0\x80\xAF"), 1u);     // overlong, 3 bytes
  EXPECT_EQ(FirstNonPrintable("\xED\xA0\x80"), 0u);      // a surrogate
  EXPECT_EQ(FirstNonPrintable("\xF4\x90\x80\x80"), 0u);  // past U+10FFFF
  EXPECT_EQ(FirstNonPrintable("\xF5\x80\x80\x80"), 0u);  // no such lead byte
  EXPECT_EQ(FirstNonPrintable("ok \xE2\x82"), 3u);       // cut short at the end
  // NUL is UTF-8 (a one-byte sequence); FirstNonPrintable stops at it as
  // a control character, so the bytes are checked one by one.
  const std::string nul("a\0\xFF", 3);
  EXPECT_EQ(Utf8SequenceLength(nul, 1), 1u);
  EXPECT_EQ(Utf8SequenceLength(nul, 2), 0u);
}

TEST(Utf8Test, PrintableText) {
  EXPECT_EQ(FirstNonPrintable("a: b\n\tc\r\n"), kAll);
  EXPECT_EQ(FirstNonPrintable("caf\xC3\xA9 \xC2\x85 \xC2\xA0 \xEF\xBF\xBD \xF0\x9F\x98\x80"), kAll);
  EXPECT_EQ(FirstNonPrintable("\xEF\xBB\xBFversion: 1"), kAll);  // a BOM
  EXPECT_EQ(FirstNonPrintable(std::string("a\0", 2)), 1u);
  EXPECT_EQ(FirstNonPrintable("ab\x1F"), 2u);
  EXPECT_EQ(FirstNonPrintable("ab\x7F"), 2u);    // DEL
  EXPECT_EQ(FirstNonPrintable("\xC2\x80"), 0u);  // C1
  EXPECT_EQ(FirstNonPrintable("x\xC2\x9F"), 1u);
  EXPECT_EQ(FirstNonPrintable("x\xEF\xBF\xBE"), 1u);  // U+FFFE
  EXPECT_EQ(FirstNonPrintable("x\x85"), 1u);          // not UTF-8
}

TEST(Utf8Test, DescribeNonPrintable) {
  EXPECT_EQ(DescribeNonPrintable("a\x85", 1), "byte 0x85 is not UTF-8");
  EXPECT_EQ(DescribeNonPrintable("a\x16", 1), "U+0016 is a control character");
  EXPECT_EQ(DescribeNonPrintable("\xC2\x9B", 0), "U+009B is a control character");
  EXPECT_EQ(DescribeNonPrintable("\xEF\xBF\xBF", 0), "U+FFFF is not a character");
}

}  // namespace
}  // namespace fleet
