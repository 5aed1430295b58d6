// Feeds random mutations of the valid fixture (byte flips, insertions,
// deletions, truncations, duplicated lines) through the loaders: whatever
// the input, they must return, never crash or let an exception escape, and
// a failed load must say why.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "manifests/manifest.h"
#include "manifests/recipe.h"

namespace fleet {
namespace {

namespace fs = std::filesystem;

constexpr char kTestdata[] = FLEET_MANIFESTS_TESTDATA;
constexpr int kMutations = 2000;

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

// Characters that matter to YAML and TOML syntax, so mutations hit the
// parsers' interesting paths more often than random bytes would.
constexpr char kSyntax[] = "{}[]:,-#\"'\t\n =.&*!|>%@`\\~?";

std::string Mutate(const std::string& original, std::mt19937* rng) {
  std::string s = original;
  auto pick = [rng](size_t n) {
    return std::uniform_int_distribution<size_t>(0, n - 1)(*rng);
  };
  const int edits = 1 + static_cast<int>(pick(4));
  for (int i = 0; i < edits && !s.empty(); ++i) {
    const size_t at = pick(s.size());
    switch (pick(6)) {
      case 0:  // flip one bit
        s[at] = static_cast<char>(s[at] ^ (1 << pick(8)));
        break;
      case 1:  // a syntax character
        s[at] = kSyntax[pick(sizeof(kSyntax) - 1)];
        break;
      case 2:  // insert a random byte
        s.insert(at, 1, static_cast<char>(pick(256)));
        break;
      case 3:  // delete a run
        s.erase(at, 1 + pick(16));
        break;
      case 4:  // truncate
        s.resize(at);
        break;
      case 5: {  // duplicate a line (duplicate keys, [[tables]])
        const size_t begin = s.rfind('\n', at);
        const size_t start = begin == std::string::npos ? 0 : begin + 1;
        const size_t end = s.find('\n', at);
        const std::string line =
            s.substr(start, end == std::string::npos ? end : end - start + 1);
        s.insert(start, line);
        break;
      }
    }
  }
  return s;
}

class FuzzRepo : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/fleet-manifest-fuzz-XXXXXX";
    dir_ = mkdtemp(pattern);
    fs::copy(fs::path(kTestdata) / "valid", dir_, fs::copy_options::recursive);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads the repo; checks the loader's promises for this input.
  void LoadAndCheck(int iteration) {
    Manifest manifest;
    Diagnostics diags;
    bool ok = false;
    try {
      ok = LoadManifest(dir_, &manifest, &diags);
    } catch (...) {
      FAIL() << "exception escaped LoadManifest at iteration " << iteration;
    }
    EXPECT_EQ(ok, !HasErrors(diags)) << "iteration " << iteration;
    for (const Diagnostic& d : diags) {
      EXPECT_FALSE(d.loc.file.empty()) << d.ToString();
      EXPECT_FALSE(d.message.empty());
    }
  }

  std::string dir_;
};

TEST_F(FuzzRepo, MutatedFleetYaml) {
  const fs::path file = fs::path(dir_) / "fleet.yaml";
  const std::string original = ReadFile(file);
  std::mt19937 rng(20260926);
  int failed = 0;
  for (int i = 0; i < kMutations; ++i) {
    WriteFile(file, Mutate(original, &rng));
    LoadAndCheck(i);
    if (HasFailure()) {
      if (++failed > 5) break;
    }
  }
}

TEST_F(FuzzRepo, MutatedRecipeThroughTheLoader) {
  const fs::path file = fs::path(dir_) / "recipes" / "dsv41-flash-exl3-2x.toml";
  const std::string original = ReadFile(file);
  std::mt19937 rng(42);
  for (int i = 0; i < kMutations; ++i) {
    const std::string mutated = Mutate(original, &rng);
    WriteFile(file, mutated);
    LoadAndCheck(i);
    Recipe recipe;
    Diagnostics diags;
    EXPECT_NO_THROW(ParseRecipe(mutated, "r.toml", &recipe, &diags))
        << "iteration " << i;
    if (HasFailure()) break;
  }
}

}  // namespace
}  // namespace fleet
