// State document: JSON conversion, validation, record bookkeeping.
#include "state/state.h"

#include <openssl/rand.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <utility>

#include "src/clock.h"
#include "src/json_number.h"

namespace fleet {

namespace {

using nlohmann::json;

// Sort key for resources: the address. Every lookup below relies on the
// vector being sorted, which FromJson and Upsert maintain.
bool AddressLess(const ResourceRecord& a, const ResourceRecord& b) { return a.address < b.address; }

const char* TypeName(const json& j) { return j.type_name(); }

// Reads an optional string member; absent means "".
Status OptionalString(const json& obj, const char* key, const std::string& where,
                      std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) {
    out->clear();
    return Status::OK();
  }
  if (!it->is_string()) {
    return Status::Error(where + "." + key + ": expected a string, got " + TypeName(*it));
  }
  *out = it->get<std::string>();
  return Status::OK();
}

Status RequiredString(const json& obj, const char* key, const std::string& where,
                      std::string* out) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::Error(where + ": missing \"" + key + "\"");
  if (!it->is_string()) {
    return Status::Error(where + "." + key + ": expected a string, got " + TypeName(*it));
  }
  *out = it->get<std::string>();
  if (out->empty()) return Status::Error(where + "." + key + ": is empty");
  return Status::OK();
}

Result<ResourceRecord> RecordFromJson(const json& j, const std::string& where) {
  if (!j.is_object()) {
    return Result<ResourceRecord>::Error(where + ": expected an object, got " + TypeName(j));
  }
  ResourceRecord r;
  Status s = RequiredString(j, "address", where, &r.address);
  if (s.ok()) s = RequiredString(j, "type", where, &r.type);
  if (s.ok()) s = OptionalString(j, "node", where, &r.node);
  if (s.ok()) s = OptionalString(j, "updated_at", where, &r.updated_at);
  if (!s.ok()) return s;
  auto it = j.find("attributes");
  if (it != j.end()) {
    // null is accepted so that a default-constructed record round-trips.
    if (!it->is_object() && !it->is_null()) {
      return Result<ResourceRecord>::Error(where + ".attributes: expected an object, got " +
                                           TypeName(*it));
    }
    r.attributes = *it;
  }
  return r;
}

Result<State> FromJsonUnchecked(const json& j) {
  if (!j.is_object()) {
    return Result<State>::Error(std::string("state: expected an object, got ") + TypeName(j));
  }
  State st;
  // The version is checked first: a newer fleet may have changed the rest of
  // the shape, and "upgrade fleet" is the useful message then.
  auto v = j.find("version");
  if (v == j.end()) return Result<State>::Error("state: missing \"version\"");
  if (!v->is_number_integer()) {
    return Result<State>::Error(std::string("state.version: expected an integer, got ") +
                                TypeName(*v));
  }
  int64_t version = v->get<int64_t>();
  if (version > State::kVersion) {
    return Result<State>::Error("state written by a newer fleet (version " +
                                std::to_string(version) + "); this fleet reads version " +
                                std::to_string(State::kVersion) + ": upgrade fleet");
  }
  if (version < 1) {
    return Result<State>::Error("state.version: unsupported version " + std::to_string(version));
  }
  st.version = static_cast<int>(version);

  Status s = RequiredString(j, "lineage", "state", &st.lineage);
  if (!s.ok()) return s;

  auto serial = j.find("serial");
  if (serial == j.end()) return Result<State>::Error("state: missing \"serial\"");
  const std::optional<uint64_t> serial_value = NonNegativeInteger(*serial);
  if (!serial_value) {
    return Result<State>::Error(std::string("state.serial: expected a non-negative integer, got ") +
                                (serial->is_number() ? "a " + serial->dump() : TypeName(*serial)));
  }
  st.serial = *serial_value;

  auto res = j.find("resources");
  if (res != j.end() && !res->is_null()) {
    if (!res->is_array()) {
      return Result<State>::Error(std::string("state.resources: expected an array, got ") +
                                  TypeName(*res));
    }
    st.resources.reserve(res->size());
    for (size_t i = 0; i < res->size(); ++i) {
      auto r = RecordFromJson((*res)[i], "state.resources[" + std::to_string(i) + "]");
      if (!r.ok()) return r.status();
      st.resources.push_back(std::move(r).value());
    }
  }
  if (auto sync = j.find("sync"); sync != j.end() && sync->is_object()) {
    auto commit = sync->find("commit");
    if (commit != sync->end() && commit->is_string()) st.synced_commit = commit->get<std::string>();
    auto approved = sync->find("approved");
    if (approved != sync->end() && approved->is_string())
      st.sync_approved = approved->get<std::string>();
  }
  std::stable_sort(st.resources.begin(), st.resources.end(), AddressLess);
  for (size_t i = 1; i < st.resources.size(); ++i) {
    if (st.resources[i].address == st.resources[i - 1].address) {
      return Result<State>::Error("state.resources: duplicate address \"" +
                                  st.resources[i].address + "\"");
    }
  }
  return st;
}

}  // namespace

const ResourceRecord* State::Find(const std::string& address) const {
  auto it =
      std::lower_bound(resources.begin(), resources.end(), address,
                       [](const ResourceRecord& r, const std::string& a) { return r.address < a; });
  if (it == resources.end() || it->address != address) return nullptr;
  return &*it;
}

void State::Upsert(ResourceRecord record) {
  auto it = std::lower_bound(resources.begin(), resources.end(), record, AddressLess);
  if (it != resources.end() && it->address == record.address) {
    *it = std::move(record);
  } else {
    resources.insert(it, std::move(record));
  }
}

bool State::Remove(const std::string& address) {
  auto it =
      std::lower_bound(resources.begin(), resources.end(), address,
                       [](const ResourceRecord& r, const std::string& a) { return r.address < a; });
  if (it == resources.end() || it->address != address) return false;
  resources.erase(it);
  return true;
}

json State::ToJson() const {
  // Emitted in address order even if a caller appended to `resources`
  // directly, so that the file is deterministic and diffs stay small.
  std::vector<const ResourceRecord*> sorted;
  sorted.reserve(resources.size());
  for (const auto& r : resources) sorted.push_back(&r);
  std::stable_sort(
      sorted.begin(), sorted.end(),
      [](const ResourceRecord* a, const ResourceRecord* b) { return a->address < b->address; });
  json list = json::array();
  for (const ResourceRecord* r : sorted) {
    list.push_back(json{{"address", r->address},
                        {"type", r->type},
                        {"node", r->node},
                        {"attributes", r->attributes},
                        {"updated_at", r->updated_at}});
  }
  json out{{"version", version},
           {"lineage", lineage},
           {"serial", serial},
           {"resources", std::move(list)}};
  if (!synced_commit.empty()) out["sync"]["commit"] = synced_commit;
  if (!sync_approved.empty()) out["sync"]["approved"] = sync_approved;
  return out;
}

Result<State> State::FromJson(const json& j) {
  // The accessors used above are checked first, so nothing should throw; the
  // catch is the module boundary's guarantee that nothing escapes anyway.
  try {
    return FromJsonUnchecked(j);
  } catch (const std::exception& e) {
    return Result<State>::Error(std::string("state: ") + e.what());
  }
}

std::string NewLineage() {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof(b)) != 1) {
    // RAND_bytes fails only when OpenSSL cannot seed itself; a lineage needs
    // uniqueness, not secrecy, so the OS generator is good enough then.
    std::random_device rd;
    for (auto& c : b) c = static_cast<unsigned char>(rd());
  }
  // Mark it as a random (version 4, RFC 4122 variant) UUID.
  b[6] = static_cast<unsigned char>((b[6] & 0x0f) | 0x40);
  b[8] = static_cast<unsigned char>((b[8] & 0x3f) | 0x80);
  char out[37];
  std::snprintf(out, sizeof(out),
                "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
                "%02x%02x%02x%02x%02x%02x",
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                b[13], b[14], b[15]);
  return out;
}

std::string NowRfc3339() { return Rfc3339Utc(RealClock()->WallNow()); }

}  // namespace fleet
