#include "src/engine/bench_quality.h"

#include <gtest/gtest.h>

#include <regex>

namespace fleet {
namespace {

TEST(BenchQualityTest, JsonlItemsExpectedIsLiteralAndCaseless) {
  Result<std::vector<SmokeCheck>> items = ParseQualityJsonl(
      "q.jsonl",
      "# a comment\n"
      "{\"name\": \"price\", \"prompt\": \"Cost?\", \"expected\": \"$1.50 (USD)\"}\n"
      "\n"
      "{\"prompt\": \"Sum?\", \"expected\": 333}\n"
      "{\"prompt\": \"Re?\", \"expect\": \"^ok$\"}\n");
  ASSERT_TRUE(items.ok()) << items.status().message();
  ASSERT_EQ(items->size(), 3u);
  EXPECT_EQ((*items)[0].name, "price");
  EXPECT_EQ((*items)[1].name, "line4");
  EXPECT_EQ((*items)[2].expect, "^ok$");
  // "$1.50 (USD)" matches itself, in any case, and not "$1x50 (USD)".
  const std::string p = (*items)[0].expect.substr(4);  // after "(?i)"
  EXPECT_TRUE(std::regex_search("It is $1.50 (usd).", std::regex(p, std::regex::icase)));
  EXPECT_FALSE(std::regex_search("$1x50 (USD)", std::regex(p, std::regex::icase)));
  EXPECT_EQ((*items)[1].expect, "(?i)333");
}

TEST(BenchQualityTest, JsonlErrorsNameTheLine) {
  EXPECT_EQ(ParseQualityJsonl("q.jsonl", "{\"prompt\": \"a\", \"expected\": \"b\"}\nnot json\n")
                .status()
                .message(),
            "q.jsonl:2: not a JSON object (one {\"prompt\": ..., \"expected\": ...} a line)");
  EXPECT_EQ(ParseQualityJsonl("q.jsonl", "{\"prompt\": \"a\"}").status().message(),
            "q.jsonl:1: no \"expected\" (the text the reply must contain) or \"expect\" (a "
            "regular expression)");
  EXPECT_FALSE(ParseQualityJsonl("q.jsonl", "{\"prompt\": \"a\", \"expect\": \"(\"}").ok());
}

TEST(BenchQualityTest, BuiltinSetHasTheSmokeChecksKinds) {
  bool math = false, tools = false, needle = false, chat = false;
  for (const SmokeCheck& c : BuiltinQualitySet()) {
    math = math || c.name.rfind("math", 0) == 0;
    tools = tools || c.tools;
    needle = needle || c.needle_tokens > 0;
    chat = chat || c.name == "capital";
  }
  EXPECT_TRUE(math && tools && needle && chat);
}

}  // namespace
}  // namespace fleet
