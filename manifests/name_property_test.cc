// Property test for the names that become part of resource addresses and of
// remote commands (node, store, image, model and deployment names): random
// byte strings (quotes, newlines, $(), backticks, globs, leading dashes,
// non-UTF-8) are accepted exactly when they are letters, digits, '-' and '_'
// starting with a letter or digit, and every other one is refused by the
// loader at the key's file:line:column, before anything reaches a node.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "manifests/manifest.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kTestdata[] = FLEET_MANIFESTS_TESTDATA;
constexpr int kTrials = 400;

// Pieces shells and YAML care about, drawn more often than random bytes.
const char* const kHostile[] = {"'",  "\"", "\n", "\t", "$(id)", "`id`", "*",  "?",    "[a]",
                                "-",  "--", ";",  "|",  "&",     "\\",   "..", "/",    " ",
                                "\r", "#",  ":",  "{",  "}",     "~",    "%",  "\x80", "\xff"};
const char kSafe[] = "abcXYZ019-_";

std::string RandomName(std::mt19937* rng) {
  auto pick = [rng](size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(*rng); };
  std::string s;
  const size_t parts = 1 + pick(5);
  for (size_t i = 0; i < parts; ++i) {
    switch (pick(3)) {
      case 0:
        s += kHostile[pick(std::size(kHostile))];
        break;
      case 1:
        s += static_cast<char>(pick(256));
        break;
      default:
        for (size_t n = 1 + pick(6); n > 0; --n) s += kSafe[pick(sizeof(kSafe) - 1)];
    }
  }
  return s;
}

bool ShouldBeValid(const std::string& name) {
  if (name.empty() || !std::isalnum(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') return false;
  return true;
}

// A YAML double-quoted scalar that reads back as exactly these bytes where
// YAML can say them (a byte >= 0x80 reads back as U+0080..U+00FF: still
// not a valid name, which is what matters here).
std::string YamlQuoted(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct Section {
  const char* key;   // top-level key in fleet.yaml
  const char* kind;  // as the error names it
  const char* body;  // a minimal flow mapping for the entry
};
const Section kSections[] = {
    {"nodes", "node", "{address: 127.0.0.1}"},
    {"stores", "store", "{path: /srv/x, nodes: [dgx1]}"},
    {"images", "image", "{ref: \"r/i:1\", source: registry}"},
    {"models", "model", "{repo: o/m, revision: 0123456789012345678901234567890123456789}"},
    {"deployments", "deployment", "{recipe: recipes/x.toml, nodes: [dgx1]}"},
};

class NameProperty : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/fleet-name-property-XXXXXX";
    dir_ = mkdtemp(pattern);
    fs::copy(fs::path(kTestdata) / "valid", dir_, fs::copy_options::recursive);
    std::ifstream in(fs::path(dir_) / "fleet.yaml");
    std::string line;
    while (std::getline(in, line)) lines_.push_back(line);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes fleet.yaml with `  NAME: BODY` as the first entry of the
  // section; returns its 1-based line.
  int WriteWithEntry(const Section& section, const std::string& name) {
    std::ofstream out(fs::path(dir_) / "fleet.yaml", std::ios::trunc);
    int at = 0;
    for (size_t i = 0; i < lines_.size(); ++i) {
      out << lines_[i] << "\n";
      if (lines_[i] == std::string(section.key) + ":") {
        at = static_cast<int>(i) + 2;
        out << "  " << YamlQuoted(name) << ": " << section.body << "\n";
      }
    }
    return at;
  }

  std::string dir_;
  std::vector<std::string> lines_;
};

TEST_F(NameProperty, ANameIsAcceptedExactlyWhenValidAndRefusedWhereItStands) {
  std::mt19937 rng(20261201);
  int valid = 0, refused = 0;
  for (int i = 0; i < kTrials && !HasFailure(); ++i) {
    const Section& section = kSections[i % std::size(kSections)];
    const std::string name = RandomName(&rng);
    const int line = WriteWithEntry(section, name);
    ASSERT_GT(line, 0) << "no '" << section.key << ":' line in the fixture";
    Manifest manifest;
    Diagnostics diags;
    LoadManifest(dir_, &manifest, &diags);
    const std::string what = std::string(section.kind) + " name '";
    const Diagnostic* refusal = nullptr;
    // A name whose escapes decode to a control character is refused before
    // the names are read, at the same place.
    const std::string escape = "an escape in this string decodes to text fleet cannot use";
    for (const Diagnostic& d : diags)
      if (d.message.rfind(what, 0) == 0 || (d.message.rfind(escape, 0) == 0 && d.loc.line == line))
        refusal = &d;
    if (ShouldBeValid(name)) {
      ++valid;
      EXPECT_EQ(refusal, nullptr) << "valid " << section.kind << " name " << YamlQuoted(name)
                                  << " refused: " << refusal->ToString();
      continue;
    }
    ++refused;
    ASSERT_NE(refusal, nullptr) << section.kind << " name " << YamlQuoted(name)
                                << " was not refused";
    EXPECT_EQ(refusal->severity, Diagnostic::Severity::kError);
    EXPECT_EQ(refusal->loc.file, "fleet.yaml");
    EXPECT_EQ(refusal->loc.line, line) << refusal->ToString();
    EXPECT_EQ(refusal->loc.column, 3) << refusal->ToString();
    EXPECT_TRUE(HasErrors(diags));
  }
  // The generator must exercise both sides, or the test proves nothing.
  EXPECT_GT(valid, kTrials / 20);
  EXPECT_GT(refused, kTrials / 2);
}

}  // namespace
}  // namespace fleet
