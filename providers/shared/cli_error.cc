#include "providers/shared/cli_error.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <vector>

namespace fleet {

std::string AsciiLower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

bool ContainsNoSpace(const std::string& text) {
  static const std::string kNoSpace = "no space left on device";
  auto it =
      std::search(text.begin(), text.end(), kNoSpace.begin(), kNoSpace.end(),
                  [](char a, char b) { return std::tolower(static_cast<unsigned char>(a)) == b; });
  return it != text.end();
}

std::string NoSpaceFix(const std::string& text, const std::string& cli, const std::string& node) {
  if (!ContainsNoSpace(text)) return "";
  return "; the image storage of " + cli + " on " + node +
         " is full: free space there and apply again";
}

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
  // A full disk is the cause wherever the engine says it: podman's load
  // buries it in the third of its format guesses ("payload does not match
  // any of the supported image formats: * oci: ... * docker-archive: ...").
  for (const std::string& l : lines)
    if (ContainsNoSpace(l)) {
      std::string text = "no space left on device: " + l.substr(l.rfind("* ", 0) == 0 ? 2 : 0);
      return text.size() > max ? text.substr(0, max) + "..." : text;
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
