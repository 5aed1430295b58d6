// A folder of the test's own under /tmp, removed with everything in it when
// the object goes: a failed assertion or an early return leaves nothing behind.
#ifndef FLEET_TESTS_SUPPORT_TEMP_DIR_H_
#define FLEET_TESTS_SUPPORT_TEMP_DIR_H_

#include <string>

namespace fleet::testing_support {

class TempDir {
 public:
  // `prefix` names the folder (/tmp/<prefix>.XXXXXX), so a leftover one
  // says which test made it.
  explicit TempDir(const std::string& prefix = "fleet-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Empty when the folder could not be made.
  const std::string& path() const { return path_; }

  // Writes `text` to `relative` below the folder, making the folders above it.
  void Write(const std::string& relative, const std::string& text) const;
  // What `relative` below the folder holds; "" when it is absent.
  std::string Read(const std::string& relative) const;

 private:
  std::string path_;
};

}  // namespace fleet::testing_support

#endif  // FLEET_TESTS_SUPPORT_TEMP_DIR_H_
