#include "fuzz/fuzz_support.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace fleet::fuzz {

namespace {

std::string* scratch = nullptr;

void RemoveScratch() {
  std::error_code ignored;
  if (scratch) std::filesystem::remove_all(*scratch, ignored);
}

}  // namespace

const std::string& ScratchDir() {
  if (!scratch) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/fleet-fuzz-XXXXXX";
    if (!mkdtemp(pattern.data())) {
      std::perror("mkdtemp");
      std::abort();
    }
    scratch = new std::string(pattern);
    std::atexit(RemoveScratch);
  }
  return *scratch;
}

void WriteFileOrDie(const std::string& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!out.flush()) {
    std::perror(path.c_str());
    std::abort();
  }
}

std::string JsonText(const nlohmann::json& j, bool* exact) {
  *exact = true;
  try {
    return j.dump();
  } catch (const nlohmann::json::type_error&) {
    *exact = false;
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
}

const char* SourceRoot() { return FLEET_SOURCE_ROOT; }

}  // namespace fleet::fuzz
