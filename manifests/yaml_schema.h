// A small typed reader over yaml-cpp nodes for fleet.yaml.
//
// Contract: nothing here throws. Every problem (wrong type, unknown key,
// duplicate key, missing required field, bad enum value, integer out of range)
// becomes a located Diagnostic through the Reporter, and reading goes on so
// that one run reports every problem in the file. Locations are 1-based
// (yaml-cpp's marks are 0-based). A value that is present but null (`key:`
// with nothing after it) reads as absent.
#ifndef FLEET_MANIFESTS_YAML_SCHEMA_H_
#define FLEET_MANIFESTS_YAML_SCHEMA_H_

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "manifests/diagnostic.h"

namespace fleet::yaml_schema {

template <typename T>
struct Located {
  T value;
  SourceLoc loc;
};

// Records diagnostics for one file.
class Reporter {
 public:
  Reporter(std::string file, Diagnostics* diags)
      : file_(std::move(file)), diags_(diags) {}

  const std::string& file() const { return file_; }
  // Where `node` starts; line/column 0 when yaml-cpp has no mark for it.
  SourceLoc Loc(const YAML::Node& node) const;
  SourceLoc At(int line0, int column0) const;  // from a 0-based yaml-cpp mark

  void Error(const SourceLoc& loc, std::string message);
  void Warning(const SourceLoc& loc, std::string message);

 private:
  std::string file_;
  Diagnostics* diags_;
};

// "a map", "a list", "the string 'x'", "nothing": for "expected X, got Y".
std::string Describe(const YAML::Node& node);

// "a, b or c": the expected values in a message.
std::string JoinOr(const std::vector<std::string>& words);

// One key of a mapping, in file order.
struct Entry {
  std::string key;
  SourceLoc key_loc;
  YAML::Node value;
  SourceLoc value_loc;  // the key's location when the value is null
};

// One mapping of the file. Construction reports a non-map value, empty or
// non-scalar keys and duplicate keys (yaml-cpp keeps both pairs of a
// duplicate; lookups here see the first one).
class MapReader {
 public:
  // `node` may be undefined or null: an absent block reads as an empty map.
  // `what` names the map in messages ("node 'dgx1'", "the top level");
  // `where` is where to report problems with the map as a whole.
  MapReader(Reporter* reporter, const YAML::Node& node, std::string what,
            SourceLoc where);

  // False when the node was neither a map nor absent (already reported).
  bool ok() const { return ok_; }
  const std::string& what() const { return what_; }
  const SourceLoc& where() const { return where_; }
  const std::vector<Entry>& entries() const { return entries_; }

  // Reports every key not in `allowed`, with "did you mean" when one is
  // close, or the list of allowed keys. Keys that would hold a secret
  // (token, password, ...) get a message saying to use an environment
  // variable instead; `secret_hint` says which key names one.
  void CheckKeys(const std::vector<std::string>& allowed,
                 const std::string& secret_hint = "") const;

  // The first entry for `key` whose value is not null, or nullptr.
  const Entry* Find(const std::string& key) const;

  // Typed getters. Absent (or null): nullopt, no diagnostic. Present with
  // the wrong type: a diagnostic, then nullopt. The Required* variants also
  // report an absent key, at where().
  std::optional<Located<std::string>> String(const std::string& key) const;
  std::optional<Located<std::string>> RequiredString(
      const std::string& key, const std::string& expected) const;
  // A string that must be one of `values`.
  std::optional<Located<std::string>> Enum(
      const std::string& key, const std::vector<std::string>& values) const;
  std::optional<Located<bool>> Bool(const std::string& key) const;
  // A decimal integer in [min, max] (no signs, hex, fractions).
  std::optional<Located<int>> Int(const std::string& key, int min,
                                  int max) const;
  // A list of strings (a single string is not accepted: `nodes: dgx1` is
  // almost always a forgotten `[...]`).
  std::optional<std::vector<Located<std::string>>> StringList(
      const std::string& key) const;
  // A nested mapping; an absent key gives an empty, ok() reader.
  MapReader Map(const std::string& key, const std::string& what) const;

 private:
  // "'key' in <what>" for messages.
  std::string Field(const std::string& key) const;

  Reporter* reporter_;
  std::string what_;
  SourceLoc where_;
  bool ok_ = true;
  std::vector<Entry> entries_;
};

}  // namespace fleet::yaml_schema

#endif  // FLEET_MANIFESTS_YAML_SCHEMA_H_
