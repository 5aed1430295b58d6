#include "providers/gateway/gateway_keys.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include "manifests/served_name.h"
#include "providers/shared/blob_hash.h"

namespace fleet {
namespace {

bool IsKeyName(const std::string& s) {
  return !s.empty() && std::isalnum(static_cast<unsigned char>(s[0])) &&
         std::all_of(s.begin(), s.end(), [](char c) {
           return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
         });
}

// Printable ASCII without space: what a bearer token is (RFC 6750's
// b64token and what OpenAI-style keys use).
bool IsKeyText(const std::string& s) {
  return s.size() >= 16 &&
         std::all_of(s.begin(), s.end(), [](char c) { return c > ' ' && c < 127; });
}

std::vector<std::string> SplitModels(const std::string& list) {
  std::vector<std::string> out;
  std::string word;
  std::istringstream in(list);
  while (std::getline(in, word, ','))
    if (!word.empty()) out.push_back(word);
  return out;
}

}  // namespace

Result<std::vector<GatewayKey>> ParseGatewayKeys(std::string_view text, const std::string& source) {
  std::vector<GatewayKey> out;
  std::map<std::string, int> names, keys;  // first line of each
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const std::string where = source + " line " + std::to_string(n);
    std::istringstream words(line);
    GatewayKey k;
    std::string models, extra;
    if (!(words >> k.name) || k.name[0] == '#') continue;
    if (!(words >> k.key >> models) || (words >> extra))
      return Result<std::vector<GatewayKey>>::Error(
          where + ": expected NAME KEY MODEL[,MODEL...] (three words)");
    if (!IsKeyName(k.name))
      return Result<std::vector<GatewayKey>>::Error(where +
                                                    ": the name must be letters, digits, - and _");
    if (!IsKeyText(k.key))
      return Result<std::vector<GatewayKey>>::Error(
          where + ": the key must be at least 16 printable characters");
    k.models = SplitModels(models);
    for (const std::string& m : k.models)
      if (m != "*" && !IsSafeServedName(m))
        return Result<std::vector<GatewayKey>>::Error(
            where + ": a model must be a served name or *: " + ServedNameProblem(m));
    if (k.models.empty())
      return Result<std::vector<GatewayKey>>::Error(where + ": no model listed");
    if (auto [it, fresh] = names.emplace(k.name, n); !fresh)
      return Result<std::vector<GatewayKey>>::Error(
          where + ": the name " + k.name + " is already on line " + std::to_string(it->second));
    if (auto [it, fresh] = keys.emplace(k.key, n); !fresh)
      return Result<std::vector<GatewayKey>>::Error(where + ": the key is already on line " +
                                                    std::to_string(it->second));
    out.push_back(std::move(k));
  }
  if (out.empty())
    return Result<std::vector<GatewayKey>>::Error(
        source + " holds no key (a gateway with keys and none in them would refuse everyone)");
  return out;
}

Result<std::vector<GatewayKey>> LoadGatewayKeys(const GatewaySpec& g) {
  if (!g.keys_env.empty()) {
    const char* value = std::getenv(g.keys_env.c_str());
    if (value == nullptr)
      return Result<std::vector<GatewayKey>>::Error("its keys_env " + g.keys_env +
                                                    " is not set in the environment");
    return ParseGatewayKeys(value, "$" + g.keys_env);
  }
  if (g.keys_path.empty()) return std::vector<GatewayKey>{};
  struct stat st {};
  if (stat(g.keys_path.c_str(), &st) != 0)
    return Result<std::vector<GatewayKey>>::Error("its keys file " + g.keys_path +
                                                  " cannot be read");
  if ((st.st_mode & 077) != 0)
    return Result<std::vector<GatewayKey>>::Error(
        "its keys file " + g.keys_path +
        " is readable by group or others; chmod 600 it (it holds secrets)");
  std::ifstream in(g.keys_path, std::ios::binary);
  if (!in)
    return Result<std::vector<GatewayKey>>::Error("its keys file " + g.keys_path +
                                                  " cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  return ParseGatewayKeys(text.str(), g.keys_path);
}

std::vector<GatewayKeyGrant> KeyGrants(const std::vector<GatewayKey>& keys) {
  std::vector<GatewayKeyGrant> out;
  for (const GatewayKey& k : keys)
    out.push_back({k.name, HashBlobData(BlobHashKind::kSha256, k.key), k.models});
  std::sort(out.begin(), out.end());
  return out;
}

bool Grants(const GatewayKeyGrant& grant, const std::string& model) {
  return std::any_of(grant.models.begin(), grant.models.end(),
                     [&](const std::string& m) { return m == "*" || m == model; });
}

std::string KeyFor(const std::vector<GatewayKey>& keys, const std::string& model) {
  for (const GatewayKey& k : keys)
    if (Grants({k.name, "", k.models}, model)) return k.key;
  return "";
}

void to_json(nlohmann::json& j, const GatewayKeyGrant& v) {
  j = {{"name", v.name}, {"sha256", v.digest}, {"models", v.models}};
}

void from_json(const nlohmann::json& j, GatewayKeyGrant& v) {
  v.name = j.value("name", "");
  v.digest = j.value("sha256", "");
  v.models = j.value("models", std::vector<std::string>{});
}

}  // namespace fleet
