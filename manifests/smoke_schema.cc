#include "manifests/smoke_schema.h"

#include <set>

#include "manifests/duration.h"

namespace fleet {

using yaml_schema::Entry;
using yaml_schema::MapReader;
using yaml_schema::Reporter;

bool CompileExpect(const std::string& pattern, std::regex* out, std::string* error) {
  std::string p = pattern;
  auto flags = std::regex::ECMAScript;
  if (p.rfind("(?i)", 0) == 0) {
    p = p.substr(4);
    flags |= std::regex::icase;
  }
  try {
    *out = std::regex(p, flags);
    return true;
  } catch (const std::regex_error& e) {
    *error = e.what();
    return false;
  }
}

namespace {

// One entry of the list; false when it has errors (already reported).
bool ReadOne(Reporter* reporter, const YAML::Node& node, const std::string& what,
             SmokeCheck* check) {
  check->loc = reporter->Loc(node);
  const MapReader m(reporter, node, what, check->loc);
  if (!m.ok()) return false;
  bool ok = true;
  auto error = [&](const SourceLoc& loc, const std::string& message) {
    reporter->Error(loc, message);
    ok = false;
  };
  m.CheckKeys({"name", "chat", "expect", "tools", "needle_tokens", "timeout", "max_tokens"});
  if (auto name = m.RequiredString("name", "a short name for the check (math, tools, needle)"))
    check->name = name->value;
  else
    ok = false;
  if (auto chat = m.String("chat")) check->chat = chat->value;
  if (auto expect = m.String("expect")) {
    std::regex re;
    std::string why;
    if (!CompileExpect(expect->value, &re, &why))
      error(expect->loc, "'expect' in " + what + " is not a regular expression (" + why + "): '" +
                             expect->value + "'");
    check->expect = expect->value;
  }
  if (auto tools = m.Bool("tools")) check->tools = tools->value;
  if (auto needle = m.Int("needle_tokens", 1000, 1000000)) check->needle_tokens = needle->value;
  if (auto max = m.Int("max_tokens", 1, 1000000)) check->max_tokens = max->value;
  if (auto timeout = m.String("timeout")) {
    if (auto seconds = ParseDurationSeconds(timeout->value))
      check->timeout_s = *seconds;
    else
      error(timeout->loc, "'timeout' in " + what +
                              " must be a duration such as 2m, 90s or 10m, got '" + timeout->value +
                              "'");
  }
  const int kinds = (!check->chat.empty() && !check->tools ? 1 : 0) + (check->tools ? 1 : 0) +
                    (m.Find("needle_tokens") != nullptr ? 1 : 0);
  if (kinds == 0)
    error(check->loc, what +
                          " asks nothing: give 'chat' (with 'expect'), 'tools: true' or "
                          "'needle_tokens'");
  else if (kinds > 1)
    error(check->loc, what +
                          " mixes kinds: one of 'chat' (with 'expect'), 'tools: true' or "
                          "'needle_tokens' per check");
  else if (!check->chat.empty() && !check->tools && check->expect.empty())
    error(m.Find("chat")->key_loc, what +
                                       " has 'chat' but no 'expect' (a regular expression "
                                       "the reply must match, e.g. \"11303\" or \"(?i)paris\")");
  return ok;
}

}  // namespace

std::vector<SmokeCheck> ReadSmokeChecks(Reporter* reporter, const Entry& entry,
                                        const std::string& what) {
  std::vector<SmokeCheck> out;
  if (!entry.value.IsSequence()) {
    reporter->Error(entry.value_loc, "'smoke' in " + what + " must be a list of checks, got " +
                                         yaml_schema::Describe(entry.value));
    return out;
  }
  std::set<std::string> names;
  for (size_t i = 0; i < entry.value.size(); ++i) {
    SmokeCheck check;
    const std::string item = "smoke check " + std::to_string(i + 1) + " of " + what;
    if (!ReadOne(reporter, entry.value[i], item, &check)) continue;
    if (!names.insert(check.name).second) {
      reporter->Error(check.loc, item + ": another check is already named '" + check.name + "'");
      continue;
    }
    out.push_back(std::move(check));
  }
  return out;
}

}  // namespace fleet
