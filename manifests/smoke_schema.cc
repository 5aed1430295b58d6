#include "manifests/smoke_schema.h"

#include <cstdlib>
#include <functional>
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

bool ParseRate(const std::string& text, double* out) {
  if (text.empty() || text.size() > 16) return false;
  int dots = 0;
  for (char c : text) {
    if (c == '.')
      ++dots;
    else if (c < '0' || c > '9')
      return false;
  }
  if (dots > 1 || text.front() == '.' || text.back() == '.') return false;
  *out = std::strtod(text.c_str(), nullptr);
  return *out > 0 && *out <= 1000000;
}

namespace {

// The speed floors and clocks, on any kind of check: min_decode_tps,
// max_ttft, prefill_tps and stall.
void ReadFloors(const MapReader& m, const std::string& what, SmokeCheck* check,
                const std::function<void(const SourceLoc&, const std::string&)>& error) {
  if (auto tps = m.String("min_decode_tps")) {
    if (!ParseRate(tps->value, &check->min_decode_tps))
      error(tps->loc, "'min_decode_tps' in " + what +
                          " must be a number of decode tokens/s above 0 (at most 1000000) such "
                          "as 40 or 12.5, got '" +
                          tps->value + "'");
  }
  if (auto tps = m.String("prefill_tps")) {
    if (!ParseRate(tps->value, &check->prefill_tps))
      error(tps->loc, "'prefill_tps' in " + what +
                          " must be a number of prompt tokens/s above 0 (at most 1000000) such "
                          "as 1000 or 150, got '" +
                          tps->value + "'");
  }
  if (auto stall = m.String("stall")) {
    if (auto seconds = ParseDurationSeconds(stall->value))
      check->stall_s = *seconds;
    else
      error(stall->loc, "'stall' in " + what +
                            " must be a duration such as 30s or 2m (the longest silence once the "
                            "first token came), got '" +
                            stall->value + "'");
  }
  if (auto ttft = m.String("max_ttft")) {
    if (auto seconds = ParseDurationSeconds(ttft->value))
      check->max_ttft_s = *seconds;
    else
      error(ttft->loc, "'max_ttft' in " + what +
                           " must be a duration such as 3s, 20s or 2m (the longest wait for the "
                           "first token), got '" +
                           ttft->value + "'");
  }
}

// fresh_context: {tokens: N}.
void ReadFreshContext(const MapReader& m, const std::string& what, SmokeCheck* check) {
  if (m.Find("fresh_context") == nullptr) return;
  const MapReader fresh = m.Map("fresh_context", "'fresh_context' in " + what);
  if (!fresh.ok()) return;
  fresh.CheckKeys({"tokens"});
  if (fresh.Find("tokens") == nullptr) {
    fresh.RequiredString("tokens", "how many tokens of fresh text to send, e.g. {tokens: 4000}");
    return;
  }
  if (auto tokens = fresh.Int("tokens", 1000, 1000000)) check->fresh_context_tokens = tokens->value;
}

// One kind per check, and what each kind needs.
void CheckKind(const MapReader& m, const std::string& what, const SmokeCheck& check,
               const std::function<void(const SourceLoc&, const std::string&)>& error) {
  const bool fresh = m.Find("fresh_context") != nullptr;
  const int kinds = (!check.chat.empty() && !check.tools ? 1 : 0) + (check.tools ? 1 : 0) +
                    (m.Find("needle_tokens") != nullptr ? 1 : 0) + (fresh ? 1 : 0);
  const std::string one_of =
      "'chat' (with 'expect'), 'tools: true', 'needle_tokens' or 'fresh_context'";
  if (kinds == 0) {
    error(check.loc, what + " asks nothing: give " + one_of);
  } else if (kinds > 1) {
    error(check.loc, what + " mixes kinds: one of " + one_of + " per check");
  } else if (!check.chat.empty() && !check.tools && check.expect.empty()) {
    error(m.Find("chat")->key_loc, what +
                                       " has 'chat' but no 'expect' (a regular expression "
                                       "the reply must match, e.g. \"11303\" or \"(?i)paris\")");
  } else if (fresh && m.Find("max_ttft") == nullptr) {
    // Required: a fresh-context check judges nothing but the fresh prompt's
    // time to the first token (its reply is not read), so without a floor
    // it could never fail, and a check that cannot fail tells no one
    // anything. The chat checks' TTFT is in the results already.
    error(m.Find("fresh_context")->key_loc,
          what +
              " has 'fresh_context' but no 'max_ttft' (the longest the first token of a prompt "
              "no cache holds may take, e.g. max_ttft: 3s)");
  }
}

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
  m.CheckKeys({"name", "chat", "expect", "tools", "needle_tokens", "fresh_context", "timeout",
               "max_tokens", "min_decode_tps", "max_ttft", "prefill_tps", "stall"});
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
  ReadFreshContext(m, what, check);
  ReadFloors(m, what, check, error);
  CheckKind(m, what, *check, error);
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
