#include "providers/image/image_json.h"

namespace fleet {
namespace {

ImageLookup LookupFromJson(const nlohmann::json& j) {
  ImageLookup l;
  if (!j.is_object()) return l;
  l.tried = j.value("tried", false);
  l.found = j.value("found", false);
  l.id = j.value("id", "");
  l.error = j.value("error", "");
  auto digests = j.find("repo_digests");
  if (digests != j.end() && digests->is_array())
    for (const auto& d : *digests)
      if (d.is_string()) l.repo_digests.push_back(d.get<std::string>());
  return l;
}

nlohmann::json LookupToJson(const ImageLookup& l) {
  nlohmann::json j = {{"tried", l.tried}, {"found", l.found}};
  if (l.found) {
    j["id"] = l.id;
    j["repo_digests"] = l.repo_digests;
  }
  if (!l.error.empty()) j["error"] = l.error;
  return j;
}

}  // namespace

void to_json(nlohmann::json& j, const ImageWant& v) {
  j = {{"ref", v.ref},       {"digest", v.digest},
       {"source", v.source}, {"allow_floating", v.allow_floating},
       {"cli", v.cli},       {"wanted_by", v.wanted_by}};
}

void from_json(const nlohmann::json& j, ImageWant& v) {
  v.ref = j.value("ref", "");
  v.digest = j.value("digest", "");
  v.source = j.value("source", "registry");
  v.allow_floating = j.value("allow_floating", false);
  v.cli = j.value("cli", "");
  v.wanted_by = j.value("wanted_by", std::vector<std::string>());
}

void to_json(nlohmann::json& j, const ImageRecord& v) {
  j = {{"ref", v.ref}, {"digest", v.digest}, {"image_id", v.image_id}, {"via", v.via}};
  if (v.via == kViaPresent) j["found"] = v.found;
  if (v.via == kViaCopy) {
    j["from"] = v.from;
    j["names"] = v.names;
  }
}

void from_json(const nlohmann::json& j, ImageRecord& v) {
  if (!j.is_object()) return;
  v.ref = j.value("ref", "");
  v.digest = j.value("digest", "");
  v.image_id = j.value("image_id", "");
  v.via = j.value("via", "");
  v.found = j.value("found", "");
  v.from = j.value("from", "");
  v.names = j.value("names", std::vector<std::string>());
}

void to_json(nlohmann::json& j, const ImageStep& v) {
  if (v.op == kOpRemove) {
    j = {{"op", v.op}, {"image_id", v.image_id}};
    return;
  }
  j = {{"ref", v.ref}, {"config", v.config}};
  if (!v.op.empty()) j["op"] = v.op;
  if (v.op == kOpCopy) {
    j["from"] = v.from;
    j["route"] = v.route.ToJson();
  }
}

void from_json(const nlohmann::json& j, ImageStep& v) {
  v.op = j.value("op", "");
  v.ref = j.value("ref", "");
  v.config = j.value("config", "");
  v.from = j.value("from", "");
  v.image_id = j.value("image_id", "");
  v.route = FabricRoute::FromJson(j.value("route", nlohmann::json()));
}

void to_json(nlohmann::json& j, const ImageProbe& v) {
  j = {{"cli_found", v.cli_found},
       {"by_ref", LookupToJson(v.by_ref)},
       {"by_name", LookupToJson(v.by_name)}};
  for (const FleetTagged& t : v.fleet_tagged)
    j["fleet_tagged"].push_back({{"name", t.name}, {"id", t.id}, {"staged", t.staged}});
}

void from_json(const nlohmann::json& j, ImageProbe& v) {
  v = ImageProbe();
  if (!j.is_object()) return;
  v.cli_found = j.value("cli_found", true);
  if (auto it = j.find("by_ref"); it != j.end()) v.by_ref = LookupFromJson(*it);
  if (auto it = j.find("by_name"); it != j.end()) v.by_name = LookupFromJson(*it);
  if (auto it = j.find("fleet_tagged"); it != j.end() && it->is_array())
    for (const auto& t : *it)
      if (t.is_object())
        v.fleet_tagged.push_back(
            {t.value("name", ""), t.value("id", ""), t.value("staged", false)});
}

nlohmann::json ImageProbe::ToJson() const { return *this; }

ImageProbe ImageProbe::FromJson(const nlohmann::json& j) { return j.get<ImageProbe>(); }

nlohmann::json ImageVersionJson(const ImageRef& ref, const std::string& image_id) {
  return {{"digest", ref.pinned() ? nlohmann::json(ref.digest) : nlohmann::json()},
          {"image_id", image_id}};
}

nlohmann::json OtherImageJson(const std::string& image_id) { return {{"image_id", image_id}}; }

}  // namespace fleet
