#include "manifests/secrets.h"

#include <algorithm>
#include <cctype>
#include <string>

namespace fleet {

namespace {

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

bool StartsWith(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace

bool IsSecretKeyName(std::string_view key) {
  const std::string k = Lower(key);
  if (k == "token_env") return false;
  for (const char* word : {"token", "password", "passwd", "secret", "api_key", "apikey"}) {
    if (k.find(word) != std::string::npos) return true;
  }
  return false;
}

bool HasTokenPrefix(std::string_view value) {
  const std::string lower = Lower(value);
  if (StartsWith(lower, "bearer ")) return true;
  for (const char* prefix : {"eyj", "ghp_", "gho_", "github_pat_", "hf_", "sk-", "xox"}) {
    if (StartsWith(lower, prefix) && value.size() >= 12) return true;
  }
  return false;
}

bool IsSecretValue(std::string_view key, std::string_view value) {
  return HasTokenPrefix(value) || (IsSecretKeyName(key) && LooksLikeToken(value));
}

bool LooksLikeToken(std::string_view value) {
  if (HasTokenPrefix(value)) return true;
  if (value.size() < 20) return false;
  bool letters = false;
  bool digits = false;
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isalpha(u)) {
      letters = true;
    } else if (std::isdigit(u)) {
      digits = true;
    } else if (c != '-' && c != '_' && c != '.' && c != '=' && c != '+' && c != '/') {
      return false;  // spaces, colons: prose or a URL, not a token
    }
  }
  return letters && digits;
}

bool IsEnvVarName(std::string_view name) {
  if (name.empty()) return false;
  const auto first = static_cast<unsigned char>(name[0]);
  if (!std::isalpha(first) && name[0] != '_') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

}  // namespace fleet
