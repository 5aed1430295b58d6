#include "manifests/served_name.h"

#include <gtest/gtest.h>

namespace fleet {
namespace {

TEST(ServedName, WhatEveryEngineNamesAModelPasses) {
  for (const char* name : {"qwen3.8", "gpt-oss", "Qwen/Qwen3-8B", "org/m@v1", "llama3:8b", "a+b",
                           "under_score", "/model", "/models/qwen3.8", "0"})
    EXPECT_EQ(ServedNameProblem(name), "") << name;
}

// Every character HAProxy's config, its ACLs or the JSON it answers give a
// meaning to, and every space or control byte, is refused.
TEST(ServedName, ConfigCharactersAreRefused) {
  for (const char* name :
       {"0 } || TRUE #", "Qwen 3.8", "a}",  "{a",      "a#b", "a'b", "a\"b", "a\\b",
        "a\nb",          "a\tb",     "a$b", "a%b",     "a,b", "a;b", "a|b",  "a(b",
        "\xc3\xa9",      "-i",       "--",  ".hidden", "@a",  ":a",  ""})
    EXPECT_NE(ServedNameProblem(name), "") << name;
  EXPECT_EQ(ServedNameProblem("Qwen 3.8"),
            "must be letters, digits and . _ : / @ + -, starting with a letter, a digit or '/', "
            "got a space at byte 4");
  EXPECT_EQ(ServedNameProblem(std::string("a\0b", 3)).substr(83), "got byte 0x00 at byte 1");
}

TEST(ServedName, HasAMaximumLength) {
  EXPECT_TRUE(IsSafeServedName(std::string(kMaxServedNameLength, 'a')));
  EXPECT_EQ(ServedNameProblem(std::string(kMaxServedNameLength + 1, 'a')),
            "must be at most 200 bytes, got 201");
}

TEST(ServedName, FoundAsVllmAndSglangReadIt) {
  using V = std::vector<std::string>;
  auto found = [](const V& args) {
    auto a = FindServedNameArg(args);
    return a ? std::to_string(a->index) + ":" + a->value : std::string("none");
  };
  EXPECT_EQ(found({"--model", "m", "--served-model-name", "s"}), "3:s");
  EXPECT_EQ(found({"--served-model-name=s", "--model", "m"}), "0:s");
  EXPECT_EQ(found({"--model=m"}), "0:m");
  EXPECT_EQ(found({"--port", "1", "--model"}), "none");  // a flag without its value
  EXPECT_EQ(found({"--model-path", "p"}), "none");
  EXPECT_EQ(found({}), "none");
}

}  // namespace
}  // namespace fleet
