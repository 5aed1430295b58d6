#include "providers/model/model_attrs.h"

#include "src/json_number.h"

namespace fleet {

namespace {

using Json = nlohmann::json;

std::vector<std::string> Strings(const Json& j, const char* key) {
  std::vector<std::string> out;
  if (auto it = j.find(key); it != j.end() && it->is_array())
    for (const Json& s : *it)
      if (s.is_string()) out.push_back(s.get<std::string>());
  return out;
}

}  // namespace

void to_json(Json& j, const ModelWant& w) {
  Json mounted = Json::array();
  for (const auto& [store, path] : w.mounted_stores) mounted.push_back({store, path});
  j = {{"repo", w.repo},
       {"revision", w.revision},
       {"store", w.store},
       {"source", w.source},
       {"location", w.location},
       {"location_kind", w.location_kind},
       {"cache", w.cache},
       {"source_kind", w.source_kind},
       {"source_name", w.source_name},
       {"source_address", w.source_address},
       {"source_node", w.source_node},
       {"source_cache", w.source_cache},
       {"self_source", w.self_source},
       {"verify", w.verify},
       {"verify_forced", w.verify_forced},
       {"wanted_by", w.wanted_by},
       {"mounted_stores", mounted}};
  if (!w.branch.empty()) j["branch"] = w.branch;
  if (w.InStore()) {
    j["store_nodes"] = w.store_nodes;
    j["store_nodes_off"] = w.store_nodes_off;
  }
}

void from_json(const Json& j, ModelWant& w) {
  w = ModelWant();
  if (!j.is_object()) return;
  w.repo = j.value("repo", "");
  w.revision = j.value("revision", "");
  w.store = j.value("store", "");
  w.source = j.value("source", "");
  w.location = j.value("location", "");
  w.location_kind = j.value("location_kind", "node");
  w.cache = j.value("cache", "");
  w.source_kind = j.value("source_kind", "hub");
  w.source_name = j.value("source_name", "");
  w.source_address = j.value("source_address", "");
  w.source_node = j.value("source_node", "");
  w.source_cache = j.value("source_cache", "");
  w.self_source = j.value("self_source", false);
  w.verify = j.value("verify", "sizes");
  w.verify_forced = j.value("verify_forced", false);
  w.wanted_by = Strings(j, "wanted_by");
  if (auto it = j.find("mounted_stores"); it != j.end() && it->is_array())
    for (const Json& s : *it)
      if (s.is_array() && s.size() == 2)
        w.mounted_stores.emplace_back(s[0].get<std::string>(), s[1].get<std::string>());
  w.branch = j.value("branch", "");
  w.store_nodes = Strings(j, "store_nodes");
  w.store_nodes_off = Strings(j, "store_nodes_off");
}

void to_json(Json& j, const ModelStep& s) {
  j = s.want;
  for (const char* scope_only : {"wanted_by", "mounted_stores", "store_nodes", "store_nodes_off"})
    j.erase(scope_only);
  if (!s.op.empty()) j["op"] = s.op;
  if (s.write_ref) j["write_ref"] = *s.write_ref;
  if (s.legacy) j["legacy"] = *s.legacy;
  if (s.fix_links) j["fix_links"] = *s.fix_links;
  if (s.expected_bytes) j["expected_bytes"] = *s.expected_bytes;
  if (s.route) j["route"] = s.route->ToJson();
  if (s.clear_stale_lock) j["clear_stale_lock"] = *s.clear_stale_lock;
}

void from_json(const Json& j, ModelStep& s) {
  s = ModelStep();
  if (!j.is_object()) return;
  s.want = j.get<ModelWant>();
  s.op = j.value("op", "");
  if (j.contains("write_ref")) s.write_ref = j["write_ref"].get<bool>();
  if (j.contains("legacy")) s.legacy = j["legacy"].get<bool>();
  if (j.contains("fix_links")) s.fix_links = Strings(j, "fix_links");
  if (j.contains("expected_bytes")) s.expected_bytes = NonNegativeInteger(j["expected_bytes"]);
  if (j.contains("route")) s.route = FabricRoute::FromJson(j["route"]);
  if (j.contains("clear_stale_lock")) s.clear_stale_lock = j["clear_stale_lock"].get<bool>();
}

void to_json(Json& j, const ModelRemoval& r) {
  j = {{"op", "remove"},
       {"repo", r.repo},
       {"revision", r.revision},
       {"cache", r.cache},
       {"location", r.location}};
}

void from_json(const Json& j, ModelRemoval& r) {
  r = ModelRemoval();
  if (!j.is_object()) return;
  r.repo = j.value("repo", "");
  r.revision = j.value("revision", "");
  r.cache = j.value("cache", "");
  r.location = j.value("location", "");
}

std::optional<ModelRemoval> ModelRemovalOf(const Json& detail) {
  if (!detail.is_object() || detail.value("op", "") != "remove") return std::nullopt;
  return detail.get<ModelRemoval>();
}

void to_json(Json& j, const ModelHoldings& h) {
  j = {{"revision", h.revision}, {"files", h.files}, {"bytes", h.bytes}, {"complete", h.complete}};
  if (h.layout) j["layout"] = *h.layout;
  if (!h.verified.empty()) j["verified"] = h.verified;
  if (!h.branch.empty()) j["branch"] = h.branch;
}

void from_json(const Json& j, ModelHoldings& h) {
  h = ModelHoldings();
  if (!j.is_object()) return;
  h.revision = j.value("revision", "");
  h.files = IntegerOr(j, "files", size_t{0});
  h.bytes = IntegerOr(j, "bytes", uint64_t{0});
  h.complete = j.value("complete", false);
  if (j.contains("layout")) h.layout = j["layout"].get<std::string>();
  h.verified = j.value("verified", "");
  h.branch = j.value("branch", "");
}

void to_json(Json& j, const ModelRecord& r) {
  j = {{"repo", r.repo},         {"revision", r.revision},       {"cache", r.cache},
       {"location", r.location}, {"source", r.source},           {"bytes", r.bytes},
       {"verified", r.verified}, {"verified_at", r.verified_at}, {"origin", r.origin}};
  if (r.files) j["files"] = ListingToJson(*r.files);
  if (!r.branch.empty()) j["branch"] = r.branch;
  if (r.verified == "deep") j["deep_verified_at"] = r.deep_verified_at;
}

void from_json(const Json& j, ModelRecord& r) {
  r = ModelRecord();
  if (!j.is_object()) return;
  r.repo = j.value("repo", "");
  r.revision = j.value("revision", "");
  r.cache = j.value("cache", "");
  r.location = j.value("location", "");
  r.source = j.value("source", "");
  if (j.contains("files")) r.files = ListingFromJson(j["files"]);
  r.bytes = IntegerOr(j, "bytes", uint64_t{0});
  r.verified = j.value("verified", "");
  r.verified_at = j.value("verified_at", "");
  r.origin = j.value("origin", "");
  r.branch = j.value("branch", "");
  r.deep_verified_at = j.value("deep_verified_at", "");
}

std::optional<ModelRecord> ModelRecordOf(const Json* attributes) {
  if (!attributes || !attributes->is_object()) return std::nullopt;
  return attributes->get<ModelRecord>();
}

bool IsRecordOf(const std::optional<ModelRecord>& rec, const ModelWant& want) {
  return rec && rec->revision == want.revision && rec->cache == want.cache &&
         rec->repo == want.repo && rec->files.has_value();
}

}  // namespace fleet
