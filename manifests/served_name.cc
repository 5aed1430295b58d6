#include "manifests/served_name.h"

#include <cctype>
#include <cstdio>

namespace fleet {
namespace {

bool NameChar(char c) {
  if (std::isalnum(static_cast<unsigned char>(c))) return true;
  for (char ok : std::string_view("._:/@+-"))
    if (c == ok) return true;
  return false;
}

// How a byte is shown in a message: a space or a control byte would be
// invisible or garble the diagnostic line.
std::string Shown(char c) {
  const auto u = static_cast<unsigned char>(c);
  if (c == '\'') return "\"'\"";
  if (u > 0x20 && u < 0x7f) return std::string("'") + c + "'";
  if (c == ' ') return "a space";
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", u);
  return std::string("byte ") + buf;
}

}  // namespace

std::string ServedNameProblem(std::string_view name) {
  constexpr const char* kRule =
      "must be letters, digits and . _ : / @ + -, starting with a letter, a digit or '/'";
  if (name.empty()) return std::string(kRule) + ", got an empty name";
  if (name.size() > kMaxServedNameLength)
    return "must be at most " + std::to_string(kMaxServedNameLength) + " bytes, got " +
           std::to_string(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    const bool ok = NameChar(name[i]) &&
                    (i > 0 || std::isalnum(static_cast<unsigned char>(name[0])) || name[0] == '/');
    if (!ok)
      return std::string(kRule) + ", got " + Shown(name[i]) + " at byte " + std::to_string(i);
  }
  return "";
}

std::optional<ServedNameArg> FindServedNameArg(const std::vector<std::string>& args) {
  for (const std::string flag : {"--served-model-name", "--model"})
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == flag && i + 1 < args.size()) return ServedNameArg{i + 1, args[i + 1]};
      if (args[i].rfind(flag + "=", 0) == 0)
        return ServedNameArg{i, args[i].substr(flag.size() + 1)};
    }
  return std::nullopt;
}

}  // namespace fleet
