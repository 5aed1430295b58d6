#include "manifests/restart_policy.h"

#include <algorithm>
#include <cstddef>
#include <optional>
#include <sstream>
#include <vector>

#include "manifests/duration.h"

namespace fleet {

namespace {

using yaml_schema::Entry;
using yaml_schema::JoinOr;
using yaml_schema::Located;
using yaml_schema::MapReader;
using yaml_schema::Reporter;

// In the order RestartPolicy::on keeps them.
const std::vector<std::string> kCauses = {"exit", "unhealthy", "smoke"};
const std::vector<std::string> kKeys = {"on", "backoff", "max_backoff", "limit"};

// "1h30m", "10m", "45s": a duration as the manifest would write it.
std::string ShowDuration(int seconds) {
  std::string out;
  if (seconds >= 3600) out += std::to_string(seconds / 3600) + "h";
  if (seconds % 3600 >= 60) out += std::to_string(seconds % 3600 / 60) + "m";
  if (seconds % 60 != 0 || out.empty()) out += std::to_string(seconds % 60) + "s";
  return out;
}

// Splits `text` at runs of spaces and tabs.
std::vector<std::string> Words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

class PolicyReader {
 public:
  PolicyReader(Reporter* reporter, const MapReader& map, RestartPolicy* policy)
      : reporter_(reporter), map_(map), policy_(policy) {}

  // False when anything was reported as an error.
  bool Read() {
    map_.CheckKeys(kKeys);
    ReadOn();
    const int old_backoff = policy_->backoff_s;
    const int old_max = policy_->max_backoff_s;
    const auto backoff = ReadDuration("backoff", "30s, 2m or 1h", &policy_->backoff_s);
    const auto max = ReadDuration("max_backoff", "10m, 30m or 1h", &policy_->max_backoff_s);
    if ((backoff || max) && policy_->backoff_s > policy_->max_backoff_s) {
      // Said where this level set one; the other may be inherited.
      const std::string backoff_text = ShowDuration(policy_->backoff_s);
      const std::string max_text = ShowDuration(policy_->max_backoff_s);
      const std::string why =
          "; backoff is the first wait before healing again, max_backoff the longest";
      if (backoff && max)
        Error(*backoff, "'backoff' " + backoff_text + " in " + map_.what() +
                            " is longer than 'max_backoff' " + max_text + why);
      else if (backoff)
        Error(*backoff, "'backoff' " + backoff_text + " in " + map_.what() +
                            " is longer than the inherited max_backoff " + max_text + why);
      else
        Error(*max, "'max_backoff' " + max_text + " in " + map_.what() +
                        " is shorter than the inherited backoff " + backoff_text + why);
      policy_->backoff_s = old_backoff;
      policy_->max_backoff_s = old_max;
    }
    ReadLimit();
    return ok_;
  }

 private:
  void Error(const SourceLoc& loc, std::string message) {
    reporter_->Error(loc, std::move(message));
    ok_ = false;
  }

  std::string Field(const std::string& key) const { return "'" + key + "' in " + map_.what(); }

  void ReadOn() {
    const Entry* entry = map_.Find("on");
    if (entry == nullptr) return;
    auto list = map_.StringList("on");
    if (!list) {
      ok_ = false;  // reported by StringList
      return;
    }
    if (list->empty()) {
      Error(entry->value_loc, Field("on") + " is empty; write restart: never to heal nothing, or " +
                                  "list some of " + JoinOr(kCauses));
      return;
    }
    std::vector<std::string> seen;
    bool good = true;
    for (const Located<std::string>& cause : *list) {
      if (std::find(kCauses.begin(), kCauses.end(), cause.value) == kCauses.end()) {
        std::string message =
            Field("on") + " must list " + JoinOr(kCauses) + ", got '" + cause.value + "'";
        const std::string near = NearestName(cause.value, kCauses);
        if (!near.empty()) message += "; did you mean '" + near + "'?";
        Error(cause.loc, std::move(message));
        good = false;
      } else if (std::find(seen.begin(), seen.end(), cause.value) != seen.end()) {
        Error(cause.loc, Field("on") + " lists '" + cause.value + "' twice");
        good = false;
      } else {
        seen.push_back(cause.value);
      }
    }
    if (!good) return;
    policy_->on.clear();
    for (const std::string& cause : kCauses) {
      if (std::find(seen.begin(), seen.end(), cause) != seen.end()) policy_->on.push_back(cause);
    }
  }

  // Sets `*out` from `key` when it holds a duration > 0. Returns where the
  // key's value is when the key was given with a good value.
  std::optional<SourceLoc> ReadDuration(const std::string& key, const std::string& examples,
                                        int* out) {
    auto text = map_.String(key);
    if (!text) {
      if (map_.Find(key) != nullptr) ok_ = false;  // reported by String
      return std::nullopt;
    }
    const auto seconds = ParseDurationSeconds(text->value, 0);
    if (!seconds) {
      Error(text->loc, Field(key) + " must be a duration such as " + examples +
                           " (a plain number is seconds), got '" + text->value + "'");
      return std::nullopt;
    }
    if (*seconds == 0) {
      Error(text->loc, Field(key) + " must be longer than 0, got '" + text->value + "'");
      return std::nullopt;
    }
    *out = *seconds;
    return text->loc;
  }

  // limit: "<N> in <duration>".
  void ReadLimit() {
    auto text = map_.String("limit");
    if (!text) {
      if (map_.Find("limit") != nullptr) ok_ = false;  // reported by String
      return;
    }
    const std::vector<std::string> words = Words(text->value);
    const std::string expected =
        " must be '<count> in <duration>' such as '5 in 1h' (at most <count> heals in any "
        "<duration>), got '" +
        text->value + "'";
    if (words.size() != 3 || words[1] != "in") {
      Error(text->loc, Field("limit") + expected);
      return;
    }
    const std::string& count = words[0];
    if (count.empty() ||
        !std::all_of(count.begin(), count.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      Error(text->loc, Field("limit") + expected);
      return;
    }
    // Long digit strings are out of range, not malformed.
    const int n = count.size() > 4 ? 1001 : std::stoi(count);
    if (n < 1 || n > 1000) {
      Error(text->loc, Field("limit") + ": the count " + count + " is out of range 1-1000");
      return;
    }
    const auto window = ParseDurationSeconds(words[2]);
    if (!window) {
      Error(text->loc, Field("limit") + ": '" + words[2] +
                           "' is not a duration longer than 0; expected such as 30m, 1h or "
                           "90s (a plain number is seconds)");
      return;
    }
    policy_->limit = n;
    policy_->window_s = *window;
  }

  Reporter* reporter_;
  const MapReader& map_;
  RestartPolicy* policy_;
  bool ok_ = true;
};

}  // namespace

bool ReadRestartPolicy(Reporter* reporter, const Entry& entry, const std::string& what,
                       RestartPolicy* policy) {
  policy->loc = entry.key_loc;
  const std::string field = "'restart' in " + what;
  const std::string expected =
      " must be never or a map such as {on: [exit, smoke], backoff: 30s, " +
      std::string("max_backoff: 10m, limit: 5 in 1h}");
  if (entry.value.IsScalar()) {
    const std::string& value = entry.value.Scalar();
    if (value == "never") {
      policy->never = true;
      return true;
    }
    std::string message = field + expected + ", got '" + value + "'";
    if (!NearestName(value, {"never"}).empty()) message += "; did you mean 'never'?";
    reporter->Error(entry.value_loc, std::move(message));
    return false;
  }
  if (!entry.value.IsMap()) {
    reporter->Error(entry.value_loc,
                    field + expected + ", got " + yaml_schema::Describe(entry.value));
    return false;
  }
  if (policy->never) {
    reporter->Warning(entry.key_loc, field +
                                         " has no effect: restart: never in defaults wins over "
                                         "it (remove that to heal this deployment)");
  }
  const MapReader map(reporter, entry.value, what + " restart", entry.key_loc);
  if (!map.ok()) return false;
  return PolicyReader(reporter, map, policy).Read();
}

bool RestartPolicyHeals(const RestartPolicy& policy, std::string_view cause) {
  return !policy.never && std::find(policy.on.begin(), policy.on.end(), cause) != policy.on.end();
}

}  // namespace fleet
