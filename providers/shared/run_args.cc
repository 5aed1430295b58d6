#include "providers/shared/run_args.h"

namespace fleet {

std::vector<std::string> RunArgsNoPull(const std::string& cli,
                                       const std::vector<std::string>& options,
                                       const std::string& image,
                                       const std::vector<std::string>& command) {
  std::vector<std::string> argv = {cli, "run", "--pull=never"};
  for (size_t i = 0; i < options.size(); ++i) {
    const std::string& o = options[i];
    if (o == "--pull") {
      ++i;  // and its value
      continue;
    }
    if (o.rfind("--pull=", 0) == 0) continue;
    argv.push_back(o);
  }
  argv.push_back(image);
  argv.insert(argv.end(), command.begin(), command.end());
  return argv;
}

}  // namespace fleet
