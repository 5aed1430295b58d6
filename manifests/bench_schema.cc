#include "manifests/bench_schema.h"

#include <filesystem>
#include <fstream>
#include <sstream>

namespace fleet {

using yaml_schema::Entry;
using yaml_schema::MapReader;
using yaml_schema::Reporter;

namespace {

// A list of integers in [min, max], each written as a plain decimal (the
// same rule as MapReader::Int); an empty list is an error too: a sweep
// with no depth measures nothing.
std::vector<int> IntList(Reporter* reporter, const MapReader& m, const std::string& key, int min,
                         int max, const std::string& example) {
  std::vector<int> out;
  const Entry* e = m.Find(key);
  if (e == nullptr) return out;
  const std::string field = "'" + key + "' in " + m.what();
  if (!e->value.IsSequence() || e->value.size() == 0) {
    reporter->Error(e->value_loc, field + " must be a list of integers such as " + example +
                                      ", got " + yaml_schema::Describe(e->value));
    return out;
  }
  for (const YAML::Node& item : e->value) {
    const std::string text = item.IsScalar() ? item.Scalar() : "";
    bool digits = !text.empty() && text.size() <= 9;
    for (char c : text) digits = digits && c >= '0' && c <= '9';
    const int v = digits ? std::stoi(text) : -1;
    if (!digits || v < min || v > max) {
      reporter->Error(reporter->Loc(item), field + " holds " + yaml_schema::Describe(item) +
                                               "; each must be an integer from " +
                                               std::to_string(min) + " to " + std::to_string(max));
      continue;
    }
    out.push_back(v);
  }
  return out;
}

// One profile; false when it has errors (already reported).
bool ReadProfile(Reporter* reporter, const Entry& entry, BenchProfile* profile) {
  const std::string what = "bench profile '" + entry.key + "'";
  const MapReader p(reporter, entry.value, what, entry.value_loc);
  if (!p.ok()) return false;
  p.CheckKeys({"depths", "concurrency", "contexts", "requests", "max_tokens"});
  bool ok = true;
  profile->name = entry.key;
  if (p.Find("depths") == nullptr) {
    p.RequiredString("depths", "the prompt depths in tokens, e.g. depths: [0, 4096, 32768]");
    ok = false;
  } else {
    profile->depths = IntList(reporter, p, "depths", 0, 1000000, "[0, 4096, 32768]");
    ok = ok && !profile->depths.empty();
  }
  if (p.Find("concurrency") != nullptr) {
    profile->concurrency = IntList(reporter, p, "concurrency", 1, 256, "[1, 2, 4]");
    ok = ok && !profile->concurrency.empty();
  } else {
    profile->concurrency = {1};
  }
  if (auto contexts = p.StringList("contexts")) {
    profile->fresh = profile->cached = false;
    for (const auto& c : *contexts) {
      if (c.value == "fresh") {
        profile->fresh = true;
      } else if (c.value == "cached") {
        profile->cached = true;
      } else {
        reporter->Error(c.loc, "'contexts' in " + what + " holds '" + c.value +
                                   "'; each must be fresh or cached");
        ok = false;
      }
    }
    if (contexts->empty()) {
      reporter->Error(p.Find("contexts")->value_loc,
                      "'contexts' in " + what + " is empty: give fresh, cached or both");
      ok = false;
    }
  }
  if (auto r = p.Int("requests", 1, 1000)) profile->requests = r->value;
  if (auto t = p.Int("max_tokens", 2, 100000)) profile->max_tokens = t->value;
  return ok;
}

}  // namespace

std::map<std::string, BenchProfile> BuiltinBenchProfiles() {
  std::map<std::string, BenchProfile> out;
  // quick: a serve's shape in seconds (two depths, c1/c2, both contexts).
  out["quick"] = {"quick", {0, 2048}, {1, 2}, true, true, 2, 32};
  // full: the operator's llama-benchy sweep (0/4K/32K/128K x c1/c2/c4).
  out["full"] = {"full", {0, 4096, 32768, 131072}, {1, 2, 4}, true, true, 3, 128};
  return out;
}

void ReadBenchSettings(Reporter* reporter, const Entry& entry, BenchSettings* out) {
  const MapReader bench(reporter, entry.value, "'bench'", entry.value_loc);
  if (!bench.ok()) return;
  bench.CheckKeys({"profiles", "quality", "harness"});
  if (const Entry* profiles = bench.Find("profiles")) {
    const MapReader named(reporter, profiles->value, "'bench.profiles'", profiles->value_loc);
    for (const Entry& e : named.entries()) {
      BenchProfile p;
      if (ReadProfile(reporter, e, &p)) out->profiles[e.key] = p;
    }
  }
  if (auto q = bench.String("quality")) out->quality_file = q->value;
  if (auto h = bench.String("harness")) out->harness = h->value;
}

bool LoadBenchSettings(const std::string& dir, BenchSettings* out, Diagnostics* diags) {
  out->profiles = BuiltinBenchProfiles();
  const std::string file = (std::filesystem::path(dir) / "fleet.yaml").string();
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  Reporter reporter("fleet.yaml", diags);
  YAML::Node root;
  try {
    root = YAML::Load(text.str());
  } catch (const YAML::Exception& e) {
    reporter.Error(reporter.At(e.mark.line, e.mark.column), "YAML error: " + e.msg);
    return false;
  }
  if (!root.IsMap()) return !HasErrors(*diags);
  // Read from the top-level map without CheckKeys: the manifest loader
  // reports every other key.
  Diagnostics ignored;
  Reporter quiet("fleet.yaml", &ignored);
  const MapReader top(&quiet, root, "the top level", reporter.Loc(root));
  if (const Entry* bench = top.Find("bench")) ReadBenchSettings(&reporter, *bench, out);
  return !HasErrors(*diags);
}

}  // namespace fleet
