// model_hash_bench THREADS FILE...: hashes hub blobs with fleet's EVP hasher
// (HashLocalFiles, what a deep verify runs for a node whose address is
// `local`) and checks each against its file name. Prints one line:
// "<bytes> <seconds> <MB/s> <mismatches>". For bench/model_bench.sh.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "providers/shared/blob_hash.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s THREADS FILE...\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  std::vector<fleet::LocalHashJob> jobs;
  for (int i = 2; i < argc; ++i) {
    std::string path = argv[i];
    size_t slash = path.rfind('/');
    jobs.push_back({path, slash == std::string::npos ? path : path.substr(slash + 1)});
  }
  std::atomic<uint64_t> bytes{0};
  auto start = std::chrono::steady_clock::now();
  std::vector<fleet::LocalHashResult> results = fleet::HashLocalFiles(jobs, threads, &bytes);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int bad = 0;
  for (const fleet::LocalHashResult& r : results)
    if (!r.ok()) {
      ++bad;
      std::fprintf(stderr, "%s: %s\n", r.path.c_str(),
                   r.error.empty() ? "mismatch" : r.error.c_str());
    }
  std::printf("%llu %.3f %.1f %d\n", static_cast<unsigned long long>(bytes.load()), s,
              bytes.load() / s / 1e6, bad);
  return bad == 0 ? 0 : 1;
}
