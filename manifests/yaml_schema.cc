#include "manifests/yaml_schema.h"

#include <algorithm>
#include <utility>

#include "manifests/secrets.h"

namespace fleet::yaml_schema {

namespace {

// Quotes a value for a message, cut short so that a pasted blob does not
// drown the line.
std::string Quote(const std::string& value) {
  constexpr size_t kMax = 60;
  if (value.size() <= kMax) return "'" + value + "'";
  return "'" + value.substr(0, kMax) + "...'";
}

std::string JoinComma(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& w : words) {
    if (!out.empty()) out += ", ";
    out += w;
  }
  return out;
}

}  // namespace

SourceLoc Reporter::At(int line0, int column0) const {
  SourceLoc loc;
  loc.file = file_;
  if (line0 >= 0) {
    loc.line = line0 + 1;
    loc.column = column0 >= 0 ? column0 + 1 : 0;
  }
  return loc;
}

SourceLoc Reporter::Loc(const YAML::Node& node) const {
  if (!node.IsDefined()) return At(-1, -1);
  const YAML::Mark mark = node.Mark();
  return At(mark.line, mark.column);
}

void Reporter::Error(const SourceLoc& loc, std::string message) {
  diags_->push_back({Diagnostic::Severity::kError, loc, std::move(message)});
}

void Reporter::Warning(const SourceLoc& loc, std::string message) {
  diags_->push_back({Diagnostic::Severity::kWarning, loc, std::move(message)});
}

std::string Describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsMap()) return "a map";
  if (node.IsSequence()) return "a list";
  return "the string " + Quote(node.Scalar());
}

std::string JoinOr(const std::vector<std::string>& words) {
  std::string out;
  for (size_t i = 0; i < words.size(); ++i) {
    if (i > 0) out += i + 1 == words.size() ? " or " : ", ";
    out += words[i];
  }
  return out;
}

MapReader::MapReader(Reporter* reporter, const YAML::Node& node,
                     std::string what, SourceLoc where)
    : reporter_(reporter), what_(std::move(what)), where_(std::move(where)) {
  if (!node.IsDefined() || node.IsNull()) return;
  if (!node.IsMap()) {
    ok_ = false;
    reporter_->Error(
        reporter_->Loc(node),
        what_ + " must be a map (key: value pairs), got " + Describe(node));
    return;
  }
  for (auto it = node.begin(); it != node.end(); ++it) {
    const YAML::Node key = it->first;  // a copy: it-> returns a temporary
    Entry entry;
    entry.key_loc = reporter_->Loc(key);
    if (!key.IsScalar() && !key.IsNull()) {
      reporter_->Error(entry.key_loc, "a key in " + what_ + " is " +
                                          Describe(key) +
                                          "; keys must be plain names");
      continue;
    }
    entry.key = key.IsScalar() ? key.Scalar() : "";
    if (entry.key.empty()) {
      reporter_->Error(entry.key_loc, "empty key in " + what_ +
                                          " (a ':' with nothing before it?)");
      continue;
    }
    const auto first =
        std::find_if(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.key == entry.key; });
    if (first != entries_.end()) {
      reporter_->Error(entry.key_loc,
                       "duplicate key '" + entry.key + "' in " + what_ +
                           " (first at " + first->key_loc.ToString() +
                           "); YAML keeps only one of them: remove one");
      continue;
    }
    entry.value = it->second;
    // yaml-cpp marks a null value at the next token, often the next line:
    // point at the key instead.
    entry.value_loc =
        it->second.IsNull() ? entry.key_loc : reporter_->Loc(it->second);
    entries_.push_back(std::move(entry));
  }
}

std::string MapReader::Field(const std::string& key) const {
  return "'" + key + "' in " + what_;
}

void MapReader::CheckKeys(const std::vector<std::string>& allowed,
                          const std::string& secret_hint) const {
  for (const Entry& e : entries_) {
    if (std::find(allowed.begin(), allowed.end(), e.key) != allowed.end())
      continue;
    if (IsSecretKeyName(e.key)) {
      std::string message =
          "'" + e.key + "' in " + what_ +
          ": the manifest must never hold secrets (it is committed and "
          "shared); " +
          (secret_hint.empty()
               ? "keep the secret in an environment variable or a file "
                 "outside the repo"
               : secret_hint);
      if (e.value.IsScalar() && LooksLikeToken(e.value.Scalar())) {
        message +=
            "; this value looks like a real token: revoke it if it was ever "
            "committed";
      }
      reporter_->Error(e.key_loc, std::move(message));
      continue;
    }
    std::string message = "unknown key '" + e.key + "' in " + what_;
    const std::string near = NearestName(e.key, allowed);
    if (!near.empty()) {
      message += "; did you mean '" + near + "'?";
    } else {
      message += "; expected one of: " + JoinComma(allowed);
    }
    reporter_->Error(e.key_loc, std::move(message));
  }
}

const Entry* MapReader::Find(const std::string& key) const {
  for (const Entry& e : entries_) {
    if (e.key == key) return e.value.IsNull() ? nullptr : &e;
  }
  return nullptr;
}

std::optional<Located<std::string>> MapReader::String(
    const std::string& key) const {
  const Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  if (!e->value.IsScalar()) {
    reporter_->Error(e->value_loc, Field(key) + " must be a string, got " +
                                       Describe(e->value));
    return std::nullopt;
  }
  return Located<std::string>{e->value.Scalar(), e->value_loc};
}

std::optional<Located<std::string>> MapReader::RequiredString(
    const std::string& key, const std::string& expected) const {
  if (Find(key) == nullptr) {
    const auto empty =
        std::find_if(entries_.begin(), entries_.end(),
                     [&](const Entry& e) { return e.key == key; });
    if (empty != entries_.end()) {
      reporter_->Error(empty->key_loc,
                       Field(key) + " is empty (required: " + expected + ")");
    } else {
      reporter_->Error(
          where_, what_ + " has no '" + key + "' (required: " + expected + ")");
    }
    return std::nullopt;
  }
  return String(key);
}

std::optional<Located<std::string>> MapReader::Enum(
    const std::string& key, const std::vector<std::string>& values) const {
  auto value = String(key);
  if (!value) return std::nullopt;
  if (std::find(values.begin(), values.end(), value->value) != values.end())
    return value;
  std::string message = Field(key) + " must be " + JoinOr(values) + ", got " +
                        Quote(value->value);
  const std::string near = NearestName(value->value, values);
  if (!near.empty()) message += "; did you mean '" + near + "'?";
  reporter_->Error(value->loc, std::move(message));
  return std::nullopt;
}

std::optional<Located<bool>> MapReader::Bool(const std::string& key) const {
  const Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  if (e->value.IsScalar()) {
    const std::string& s = e->value.Scalar();
    for (const char* t : {"true", "True", "TRUE", "yes", "Yes", "on", "On"}) {
      if (s == t) return Located<bool>{true, e->value_loc};
    }
    for (const char* f :
         {"false", "False", "FALSE", "no", "No", "off", "Off"}) {
      if (s == f) return Located<bool>{false, e->value_loc};
    }
  }
  reporter_->Error(e->value_loc, Field(key) + " must be true or false, got " +
                                     Describe(e->value));
  return std::nullopt;
}

std::optional<Located<int>> MapReader::Int(const std::string& key, int min,
                                           int max) const {
  const Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  const std::string range = std::to_string(min) + "-" + std::to_string(max);
  const std::string s = e->value.IsScalar() ? e->value.Scalar() : "";
  const bool digits = !s.empty() && s.size() <= 9 &&
                      std::all_of(s.begin(), s.end(),
                                  [](char c) { return c >= '0' && c <= '9'; });
  if (!digits) {
    // Long digit strings are out of range, not "not an integer".
    const bool long_number =
        s.size() > 9 && std::all_of(s.begin(), s.end(), [](char c) {
          return c >= '0' && c <= '9';
        });
    reporter_->Error(e->value_loc,
                     long_number
                         ? Field(key) + " " + s + " is out of range " + range
                         : Field(key) + " must be an integer " + range +
                               ", got " + Describe(e->value));
    return std::nullopt;
  }
  const int value = std::stoi(s);
  if (value < min || value > max) {
    reporter_->Error(e->value_loc,
                     Field(key) + " " + s + " is out of range " + range);
    return std::nullopt;
  }
  return Located<int>{value, e->value_loc};
}

std::optional<std::vector<Located<std::string>>> MapReader::StringList(
    const std::string& key) const {
  const Entry* e = Find(key);
  if (e == nullptr) return std::nullopt;
  if (!e->value.IsSequence()) {
    std::string message =
        Field(key) + " must be a list, got " + Describe(e->value);
    if (e->value.IsScalar()) message += "; write [" + e->value.Scalar() + "]";
    reporter_->Error(e->value_loc, std::move(message));
    return std::nullopt;
  }
  std::vector<Located<std::string>> out;
  for (const YAML::Node& item : e->value) {
    if (!item.IsScalar()) {
      reporter_->Error(
          reporter_->Loc(item),
          "items of " + Field(key) + " must be strings, got " + Describe(item));
      continue;
    }
    out.push_back({item.Scalar(), reporter_->Loc(item)});
  }
  return out;
}

MapReader MapReader::Map(const std::string& key,
                         const std::string& what) const {
  const Entry* e = Find(key);
  if (e == nullptr) return MapReader(reporter_, YAML::Node(), what, where_);
  return MapReader(reporter_, e->value, what, e->key_loc);
}

}  // namespace fleet::yaml_schema
