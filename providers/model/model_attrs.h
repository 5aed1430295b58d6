// The typed forms of a model resource's attributes, and their one JSON
// conversion each.
//
// Plans, saved plan files and the state store see a model as JSON (the
// generic DesiredResource/PlanChange/ResourceRecord attributes); inside the
// provider it is one of these structs. The JSON is read and written only by
// the to_json/from_json pairs below, so a misspelt attribute is a compile
// error inside the provider. What the probe found is HubProbe
// (hub_cache.h), with its own ToJson/FromJson.
//
// The JSON forms are exactly those fleet has always written: nlohmann::json
// objects keep their keys sorted, so the order of the fields here does not
// matter, but which keys are present does. from_json gives a missing key
// its default (a record written by an older fleet, a hand-made detail).
#ifndef FLEET_PROVIDERS_MODEL_MODEL_ATTRS_H_
#define FLEET_PROVIDERS_MODEL_MODEL_ATTRS_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "providers/shared/completeness.h"
#include "providers/shared/fabric_route.h"

namespace fleet {

// What a model resource declares (DesiredResource::attributes, built by
// Expand): one copy of a repo at a revision, in a node's cache or a store.
struct ModelWant {
  std::string repo;
  std::string revision;                // a commit id, or the branch of a floating revision
  std::string store;                   // "local" or the store the model lives in
  std::string source;                  // as declared: "hub", "node:<n>", "store:<s>"
  std::string location;                // the node or store this copy is in
  std::string location_kind = "node";  // "node" | "store"
  std::string cache;                   // the hub cache path there
  std::string source_kind = "hub";     // "hub" | "node" | "store"
  std::string source_name;             // the node or store named by source
  std::string source_address;          // "model.<name>@<source_name>"; "" for the hub
  std::string source_node;             // the node that reads the source
  std::string source_cache;            // the source's hub cache path
  bool self_source = false;            // this copy is the source
  std::string verify = "sizes";        // "sizes" | "deep"
  bool verify_forced = false;          // --verify-now: deep even if recorded deep
  std::vector<std::string> wanted_by;  // why it is in scope (plan text)
  std::vector<std::pair<std::string, std::string>> mounted_stores;  // store, path
  std::string branch;  // a floating revision's branch; "" when pinned (key absent)
  // location_kind "store" only (keys absent otherwise): the store's nodes,
  // and those declared `power: {state: off}`.
  std::vector<std::string> store_nodes;
  std::vector<std::string> store_nodes_off;

  bool InStore() const { return location_kind == "store"; }
  bool FromHub() const { return source_kind == "hub"; }
  // Staged from a peer node or a store that is not this copy.
  bool FromPeer() const { return !self_source && !FromHub(); }
};
void to_json(nlohmann::json& j, const ModelWant& w);
void from_json(const nlohmann::json& j, ModelWant& w);

// What apply is told to do (PlanChange::detail of an ensure/fix change, or
// of a noop): the declaration without the fields only the diff reads
// (wanted_by, mounted_stores, store_nodes, store_nodes_off), with what the
// diff decided. For a floating revision `want.revision` is the commit the
// plan resolved ("": the download resolves it); `want.verify` is what apply
// does ("deep" | "sizes"), once the probe was read.
struct ModelStep {
  ModelWant want;
  std::string op;                 // "" (nothing to do) | "ensure" | "fix"
  std::optional<bool> write_ref;  // floating revision: point refs/<branch> at it
  // Set once the probe was read (keys absent before):
  std::optional<bool> legacy;                         // the repo folder is in the legacy layout
  std::optional<std::vector<std::string>> fix_links;  // absolute links to make relative
  std::optional<uint64_t> expected_bytes;             // 0: unknown before the download
  // Staged from a peer node onto a node: over the fabric or through the
  // controller (key absent for other sources).
  std::optional<FabricRoute> route;
  // A staging lock on this host whose owner is gone (a crash, a power
  // loss): apply takes it over and releases it, whatever else it does.
  std::optional<bool> clear_stale_lock;
};
void to_json(nlohmann::json& j, const ModelStep& s);
void from_json(const nlohmann::json& j, ModelStep& s);

// The detail of a --purge change: remove one revision fleet staged.
struct ModelRemoval {
  std::string repo;
  std::string revision;
  std::string cache;
  std::string location;
};
void to_json(nlohmann::json& j, const ModelRemoval& r);  // with "op": "remove"
void from_json(const nlohmann::json& j, ModelRemoval& r);
// The removal a change's detail asks for, if it is one.
std::optional<ModelRemoval> ModelRemovalOf(const nlohmann::json& detail);

// What a copy holds, as the plan shows it before and after the change.
struct ModelHoldings {
  std::string revision;
  size_t files = 0;
  uint64_t bytes = 0;
  bool complete = false;
  std::optional<std::string> layout;  // absent: the hub layout
  std::string verified;               // "" (key absent): not known
  std::string branch;                 // a floating revision's branch; "" (key absent) when pinned
};
void to_json(nlohmann::json& j, const ModelHoldings& h);
void from_json(const nlohmann::json& j, ModelHoldings& h);

// What the state records for a copy apply verified.
struct ModelRecord {
  std::string repo;
  std::string revision;  // the commit verified
  std::string cache;
  std::string location;
  std::string source;
  std::optional<Listing> files;  // absent: not a verified record
  uint64_t bytes = 0;
  std::string verified;          // "headers" | "deep"
  std::string verified_at;       // RFC 3339
  std::string origin;            // "staged" (fleet wrote it) | "adopted" (found, checked)
  std::string branch;            // a floating revision's branch; "" when pinned (key absent)
  std::string deep_verified_at;  // when verified is "deep" (key absent otherwise)
};
void to_json(nlohmann::json& j, const ModelRecord& r);
void from_json(const nlohmann::json& j, ModelRecord& r);
// The record of a resource, if there is one and it is an object.
std::optional<ModelRecord> ModelRecordOf(const nlohmann::json* attributes);

// The record describes this copy (same repo, revision and cache) and lists
// its files.
bool IsRecordOf(const std::optional<ModelRecord>& rec, const ModelWant& want);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_MODEL_MODEL_ATTRS_H_
