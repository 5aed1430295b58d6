// The headers most unit tests parse, precompiled once for all of them
// (tests/pch/meson.build): GoogleTest, nlohmann::json and the standard
// headers the tests and the project's own headers include. Parsing these took
// 3 to 4 s of CPU in each of the ~90 test programs' translation units, most
// of a small test's compile. Only third-party and standard headers: a
// project header here would recompile every test on each edit of it.
#ifndef FLEET_TESTS_PCH_UNIT_TEST_PCH_H_
#define FLEET_TESTS_PCH_UNIT_TEST_PCH_H_

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#endif  // FLEET_TESTS_PCH_UNIT_TEST_PCH_H_
