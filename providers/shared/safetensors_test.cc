#include "providers/shared/safetensors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

namespace fleet {
namespace {

std::string LengthPrefix(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A whole safetensors file: header JSON as given, data of `data_len` bytes.
std::string File(const std::string& header, uint64_t data_len) {
  return LengthPrefix(header.size()) + header + std::string(data_len, '\x5a');
}

// Two tensors: a F16 [2,3] (12 bytes) then a BF16 [4] (8 bytes).
const char* kHeader = R"({"__metadata__":{"format":"pt"},)"
                      R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[12,20]},)"
                      R"("a":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]}})";

TEST(Safetensors, ParsesAValidFile) {
  std::string f = File(kHeader, 20);
  Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, f.size());
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->tensors.size(), 2u);
  EXPECT_EQ(h->tensors[0].name, "a");  // sorted by offset
  EXPECT_EQ(h->tensors[0].shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(h->tensors[1].dtype, "BF16");
  EXPECT_EQ(h->data_length, 20u);
  EXPECT_EQ(h->header_length, std::string(kHeader).size());
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

TEST(Safetensors, HeaderPaddedWithSpacesIsValid) {
  std::string header = std::string(kHeader) + "        ";
  std::string f = File(header, 20);
  EXPECT_TRUE(ParseSafetensorsPrefix(f, f.size()).ok());
}

TEST(Safetensors, TruncatedFileSaysTruncated) {
  std::string f = File(kHeader, 20);
  Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, f.size() - 3);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("truncated"), std::string::npos) << h.status().message();
}

TEST(Safetensors, ExtraBytesAreAnError) {
  std::string f = File(kHeader, 24);
  Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, f.size());
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("extra bytes"), std::string::npos) << h.status().message();
}

TEST(Safetensors, ZeroTensorsNeedZeroData) {
  std::string f = File(R"({"__metadata__":{}})", 0);
  EXPECT_TRUE(ParseSafetensorsPrefix(f, f.size()).ok());
  f = File(R"({})", 4);
  EXPECT_FALSE(ParseSafetensorsPrefix(f, f.size()).ok());
}

struct BadCase {
  const char* header;
  uint64_t data;
  const char* expect;  // a piece of the message
};

TEST(Safetensors, RejectsBadHeaders) {
  const BadCase cases[] = {
      {R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[2,6]}})",
       6, "overlaps"},
      {R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
       R"("b":{"dtype":"F16","shape":[2],"data_offsets":[6,10]}})",
       10, "gap"},
      {R"({"a":{"dtype":"F17","shape":[2],"data_offsets":[0,4]}})", 4, "unknown dtype"},
      {R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4, "span"},
      {R"({"a":{"dtype":"F16","shape":[2]}})", 4, "data_offsets"},
      {R"({"a":{"shape":[2],"data_offsets":[0,4]}})", 4, "dtype"},
      {R"({"a":{"dtype":"F16","data_offsets":[0,4]}})", 4, "shape"},
      {R"({"a":{"dtype":"F16","shape":[-2],"data_offsets":[0,4]}})", 4, "shape"},
      {R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[4,0]}})", 4, "before it begins"},
      {R"({"a":{"dtype":"F16","shape":[2],"data_offsets":[0,4.5]}})", 4, "data_offsets"},
      {R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2, "whole number of bytes"},
      {R"({"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,4]}})", 4,
       "overflows"},
      {R"({"__metadata__":{"x":1}})", 0, "not a string"},
      {R"({"a":[1,2]})", 0, "not an object"},
      {R"([1,2])", 0, "header"},
      {R"({"a":)", 0, "not a JSON object"},
  };
  for (const BadCase& c : cases) {
    std::string f = File(c.header, c.data);
    Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, f.size());
    ASSERT_FALSE(h.ok()) << c.header;
    EXPECT_NE(h.status().message().find(c.expect), std::string::npos)
        << c.header << " -> " << h.status().message();
  }
}

TEST(Safetensors, SubByteDtypes) {
  std::string f = File(R"({"a":{"dtype":"F4","shape":[4],"data_offsets":[0,2]}})", 2);
  EXPECT_TRUE(ParseSafetensorsPrefix(f, f.size()).ok());
  f = File(R"({"a":{"dtype":"F6_E2M3","shape":[4],"data_offsets":[0,3]}})", 3);
  EXPECT_TRUE(ParseSafetensorsPrefix(f, f.size()).ok());
}

TEST(Safetensors, LengthOutOfBounds) {
  std::string f = LengthPrefix(1000) + "{}";
  Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, f.size());
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("truncated"), std::string::npos);
  f = LengthPrefix(uint64_t{1} << 40) + "{}";
  h = ParseSafetensorsPrefix(f, uint64_t{1} << 42);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("100 MB"), std::string::npos);
  EXPECT_FALSE(ParseSafetensorsPrefix("abc", 3).ok());
  EXPECT_FALSE(ParseSafetensorsPrefix(LengthPrefix(0), 8).ok());
}

// Random mutations of a valid file never crash; what parses satisfies the
// invariants (offsets tile the data, which fills the file).
TEST(Safetensors, FuzzMutationsNeverCrash) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t off = 0;
  for (int i = 0; i < 12; ++i) {
    uint64_t n = 1 + i * 3;
    header["layer." + std::to_string(i) + ".weight"] = {
        {"dtype", i % 2 ? "BF16" : "F32"},
        {"shape", {n}},
        {"data_offsets", {off, off + n * (i % 2 ? 2 : 4)}}};
    off += n * (i % 2 ? 2 : 4);
  }
  header["__metadata__"] = {{"format", "pt"}};
  const std::string base = File(header.dump(), off);
  ASSERT_TRUE(ParseSafetensorsPrefix(base, base.size()).ok());

  std::mt19937_64 rng(20260926);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string f = base;
    int mutations = 1 + rng() % 4;
    for (int m = 0; m < mutations; ++m) {
      switch (rng() % 7) {
        case 0:  // flip a byte anywhere
          f[rng() % f.size()] = static_cast<char>(rng());
          break;
        case 1:  // flip a byte of the header (digits, braces, quotes)
          if (f.size() > 8)
            f[8 + rng() % std::min<size_t>(f.size() - 8, 200)] =
                "0123456789{}[]\",:ae -"[rng() % 21];
          break;
        case 2:  // truncate
          f.resize(rng() % (f.size() + 1));
          break;
        case 3:  // extend
          f.append(rng() % 64, static_cast<char>(rng()));
          break;
        case 4:  // new length prefix
          if (f.size() >= 8) {
            uint64_t n = rng() % 3 == 0 ? rng() : rng() % (f.size() + 16);
            f.replace(0, 8, LengthPrefix(n));
          }
          break;
        case 5: {  // delete a range
          if (f.empty()) break;
          size_t at = rng() % f.size();
          f.erase(at, rng() % 16);
          break;
        }
        case 6: {  // duplicate a range
          if (f.empty()) break;
          size_t at = rng() % f.size();
          f.insert(at, f.substr(at, rng() % 32));
          break;
        }
      }
    }
    uint64_t size = rng() % 8 == 0 ? rng() % (f.size() + 100) : f.size();
    Result<SafetensorsHeader> h = ParseSafetensorsPrefix(f, size);
    if (!h.ok()) {
      EXPECT_FALSE(h.status().message().empty());
      ++rejected;
      continue;
    }
    ++parsed;
    EXPECT_EQ(h->data_length, size - 8 - h->header_length);
    uint64_t expected = 0;
    for (const SafetensorsTensor& t : h->tensors) {
      EXPECT_EQ(t.begin, expected);
      expected = t.end;
    }
    EXPECT_EQ(expected, h->data_length);
  }
  EXPECT_GT(rejected, 10000);
  EXPECT_GT(parsed, 0);  // some mutations (data bytes) leave it valid
}

}  // namespace
}  // namespace fleet
