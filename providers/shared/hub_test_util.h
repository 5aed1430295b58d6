// Test helpers: real hub cache layouts in a temporary folder, with real
// safetensors files, written the way huggingface_hub writes them.
#ifndef FLEET_PROVIDERS_SHARED_HUB_TEST_UTIL_H_
#define FLEET_PROVIDERS_SHARED_HUB_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "providers/shared/blob_hash.h"
#include "providers/shared/hub_cache.h"
#include "src/transport.h"
#include "tests/support/temp_dir.h"

namespace fleet::testing_hub {

namespace fs = std::filesystem;

inline const std::string kRev = "0123456789abcdef0123456789abcdef01234567";
inline const std::string kRepo = "org/tiny-model";

// A connected transport to this machine (`address: local`).
inline std::unique_ptr<Transport> Local() {
  SshEndpoint e;
  e.node = "local";
  e.address = "local";
  auto t = MakeTransport(e);
  EXPECT_TRUE(t->Connect().ok());
  return t;
}

// The model tests' scratch folders, named so a leftover one says whose it is.
class TempDir : public testing_support::TempDir {
 public:
  TempDir() : testing_support::TempDir("fleet-model-test") {}
};

inline void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A safetensors file with `n` F32 tensors of `elements` each.
inline std::string Safetensors(const std::string& prefix, int n, int elements) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t off = 0;
  for (int i = 0; i < n; ++i) {
    uint64_t len = static_cast<uint64_t>(elements) * 4;
    h[prefix + std::to_string(i)] = {
        {"dtype", "F32"}, {"shape", {elements}}, {"data_offsets", {off, off + len}}};
    off += len;
  }
  h["__metadata__"] = {{"format", "pt"}};
  std::string header = h.dump();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  out += header;
  for (uint64_t i = 0; i < off; ++i) out += static_cast<char>(i * 7 + 3);
  return out;
}

// The files of a 3-shard model: shards, index, config.
inline std::map<std::string, std::string> ThreeShardModel() {
  std::map<std::string, std::string> files;
  nlohmann::json wm = nlohmann::json::object();
  for (int s = 1; s <= 3; ++s) {
    std::string name = "model-0000" + std::to_string(s) + "-of-00003.safetensors";
    std::string prefix = "layers." + std::to_string(s) + ".w";
    files[name] = Safetensors(prefix, 4, 64 * s);
    for (int i = 0; i < 4; ++i) wm[prefix + std::to_string(i)] = name;
  }
  files["model.safetensors.index.json"] =
      nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", wm}}.dump(2);
  files["config.json"] = R"({"architectures": ["TinyForCausalLM"], "hidden_size": 64})";
  return files;
}

// Writes `files` as <cache>/models--org--name (or `repo_dir` when given)
// at `revision`: blobs named by content hash (sha256 for .safetensors, git
// sha1 otherwise), relative snapshot links, refs/main.
inline void WriteHubModel(const std::string& cache, const std::string& repo,
                          const std::string& revision,
                          const std::map<std::string, std::string>& files,
                          const std::string& repo_dir = "") {
  const std::string m = repo_dir.empty() ? cache + "/" + HubRepoDirName(repo) : repo_dir;
  fs::create_directories(m + "/blobs");
  fs::create_directories(m + "/refs");
  WriteFile(m + "/refs/main", revision);
  for (const auto& [path, data] : files) {
    const bool lfs = path.size() > 12 && path.substr(path.size() - 12) == ".safetensors";
    const std::string blob =
        HashBlobData(lfs ? BlobHashKind::kSha256 : BlobHashKind::kGitSha1, data);
    WriteFile(m + "/blobs/" + blob, data);
    const std::string link = m + "/snapshots/" + revision + "/" + path;
    fs::create_directories(fs::path(link).parent_path());
    std::string up = "../../";
    for (char c : path)
      if (c == '/') up += "../";
    fs::create_symlink(up + "blobs/" + blob, link);
  }
}

}  // namespace fleet::testing_hub

#endif  // FLEET_PROVIDERS_SHARED_HUB_TEST_UTIL_H_
