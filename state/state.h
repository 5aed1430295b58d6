// The state: what fleet has done to the fleet and must be able to undo.
//
// One JSON document (DESIGN.md "State"): version, lineage (fixed at
// creation), serial (bumped only when something changed), resources[].
#ifndef FLEET_STATE_STATE_H_
#define FLEET_STATE_STATE_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "src/status.h"

namespace fleet {

struct ResourceRecord {
  std::string address;        // e.g. "display_ram.dgx1"
  std::string type;           // e.g. "display_ram"
  std::string node;           // node name, or "" for fleet-wide resources
  nlohmann::json attributes;  // what apply did and what undo needs
  std::string updated_at;     // RFC 3339 UTC
};

struct State {
  static constexpr int kVersion = 1;
  int version = kVersion;
  std::string lineage;  // random UUID-like id, fixed when the state is created
  uint64_t serial = 0;
  std::vector<ResourceRecord> resources;  // sorted by address
  // The manifests commit `fleet watch --sync` applied last ("" when none):
  // sync never goes backwards from it. Written only when set.
  std::string synced_commit;
  // A commit a person approved for sync (`fleet sync approve`): sync applies
  // it although it changes what only a person may change. "" when none.
  std::string sync_approved;

  const ResourceRecord* Find(const std::string& address) const;
  // Inserts or replaces the record with the same address; keeps the order.
  void Upsert(ResourceRecord record);
  // Returns true when a record was removed.
  bool Remove(const std::string& address);

  nlohmann::json ToJson() const;
  static Result<State> FromJson(const nlohmann::json& j);
};

// A new random lineage id (hex, from OpenSSL's RAND_bytes).
std::string NewLineage();

// Current UTC time as RFC 3339 ("2026-11-29T17:35:24Z").
std::string NowRfc3339();

}  // namespace fleet

#endif  // FLEET_STATE_STATE_H_
