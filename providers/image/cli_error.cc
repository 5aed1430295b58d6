#include "providers/image/cli_error.h"

#include <sstream>
#include <vector>

namespace fleet {

std::string CliErrorText(const std::string& output, size_t max) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    size_t b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    size_t e = line.find_last_not_of(" \t\r");
    lines.push_back(line.substr(b, e - b + 1));
  }
  size_t from = lines.size() > 3 ? lines.size() - 3 : 0;
  for (size_t i = lines.size(); i-- > 0;)
    if (lines[i].rfind("Error", 0) == 0) {
      from = i;
      break;
    }
  std::string text;
  for (size_t i = from; i < lines.size(); ++i) text += (text.empty() ? "" : " / ") + lines[i];
  if (text.size() > max) text = text.substr(0, max) + "...";
  return text;
}

}  // namespace fleet
