// The deployment provider's typed attributes and their one pair of JSON
// conversions each: the boundary where the generic DesiredResource,
// ActualResource, PlanChange and ResourceRecord JSON is read and written.
// Nothing else in the provider reads an attribute by its key.
//
// Readers are lenient (a missing key is its default) so that state written
// by an older fleet still reads; writers produce exactly the keys the plan
// and state have always had.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_JSON_H_
#define FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "providers/shared/hub_remote.h"
#include "providers/shared/serving/deployment_probe.h"
#include "providers/shared/serving/deployment_spec.h"
#include "providers/shared/serving/heal_ledger.h"

namespace fleet {

// What a deployment declares on one node (DesiredResource::attributes, and
// the plan's "after"): what the plan shows of its container, and how to
// reach and wait for it.
// Where a {rows:...} recipe reads its tensors' rows on the node.
struct RowSource {
  std::vector<std::string> tensors;  // empty: the recipe has no {rows:...}
  std::string model;                 // the ModelSpec name, for messages
  HubLocation location;              // the snapshot the serve binds
};

struct DeploymentWant {
  ContainerShown shown;
  RowSource rows;
  std::string cli;  // the node's container CLI
  int health_timeout_s = 1800;
  uint64_t gpu_memory_bytes = 0;  // 0: no need declared (the key is absent)
};

// What a deployment's state record holds: what it runs, and as what.
struct DeploymentRecord {
  DeploymentWant want;
  std::string container_id;
  std::string image_id;
  // What `fleet watch --heal` keeps of the serve (written only when set:
  // every record apply writes has none, which is how an apply clears it).
  std::optional<HealLedger> heal;
};

// PlanChange::detail of a deployment step: the deployment's name (a step
// renders its spec again), or, for a serve the manifests dropped, the
// container and CLI to remove it with.
struct DeploymentDetail {
  std::string name;
  std::string container;
  std::string cli;
  // Unified memory full of page cache: the start drops it first (the plan
  // found the serve fits only then).
  bool drop_page_cache = false;
  // A gated change in place (issue #47): the container it replaces stays,
  // stopped, as <container>-previous until the gate decides
  // (RestorePrevious, RemovePrevious).
  bool keep_previous = false;
};

void to_json(nlohmann::json& j, const FabricValues& v);
void from_json(const nlohmann::json& j, FabricValues& v);
void to_json(nlohmann::json& j, const ContainerShown& v);
void from_json(const nlohmann::json& j, ContainerShown& v);
void to_json(nlohmann::json& j, const DeploymentWant& v);
void from_json(const nlohmann::json& j, DeploymentWant& v);
void to_json(nlohmann::json& j, const DeploymentRecord& v);
void from_json(const nlohmann::json& j, DeploymentRecord& v);
void to_json(nlohmann::json& j, const DeploymentDetail& v);
void from_json(const nlohmann::json& j, DeploymentDetail& v);
void to_json(nlohmann::json& j, const ContainerProbe& v);
void from_json(const nlohmann::json& j, ContainerProbe& v);

// A record, or nothing when `j` is null (no record).
std::optional<DeploymentRecord> DeploymentRecordFrom(const nlohmann::json& j);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_JSON_H_
