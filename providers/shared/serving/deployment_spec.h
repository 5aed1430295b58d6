// The container a deployment runs on one node, rendered from the manifests:
// what `<cli> run` gets, and a hash of it that the container carries as a
// label, so a later plan sees whether the running container is still the
// declared one without re-reading its arguments.
//
// Placeholders: {port} (the deployment's port), {model_path} (where the
// container sees the model: kModelRoot, or the container path of an extra
// mount whose host is "{model_path}", which becomes per-file binds; on the
// host side of any other mount, the snapshot folder), {host} (the node's
// address), {node} (the node's name), {rank} (the node's index in the
// deployment's nodes), {nnodes} (how many), {head} (the first node's
// address: where workers find the head), the fabric's {fabric_addr},
// {fabric_if}, {fabric_hca}, {fabric_gid_index} and {head_fabric_addr}
// (fabric_values.h; filled only when the render is given FabricValues), and
// {rows:TENSOR} (this rank's "begin:end" of the tensor's first dimension,
// row_placeholder.h; filled only when the render is given the rows).
#ifndef FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_SPEC_H_
#define FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_SPEC_H_

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "providers/shared/container_labels.h"
#include "providers/shared/serving/fabric_values.h"
#include "providers/shared/serving/row_placeholder.h"
#include "src/status.h"

namespace fleet {

// Where the container sees the model's snapshot: every file bound read-only
// at kModelRoot/<path in the snapshot> (no symlinks: the log's O_NOFOLLOW trap).
inline constexpr const char* kModelRoot = "/model";
// Labels on every serving container fleet starts: kDeploymentLabel and
// kSpecLabel (providers/shared/container_labels.h).

// What a plan shows of a ContainerSpec: everything but env values and
// arguments that look secret. Its JSON (deployment_json.cc) is the plan's
// and the state's "after" of a deployment.
struct ContainerShown {
  std::string container;
  std::string image;                 // image_ref
  std::optional<std::string> model;  // "<repo>@<revision>"; none when the recipe serves none
  int port = 0;
  std::string health;               // HealthUrl()
  std::optional<std::string> rank;  // "<rank> of <nnodes>" on several nodes
  std::vector<std::string> options;
  std::vector<std::string> command;  // secrets shown as "(sensitive)"
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> env_from;
  std::string spec;                    // ContainerSpec::hash
  std::string gpus;                    // ContainerSpec::gpus; the plan shows it only when set
  std::optional<FabricValues> fabric;  // ContainerSpec::fabric
};

struct ContainerSpec {
  std::string deployment;  // manifest name
  std::string node;
  std::string container;  // "fleet-<deployment>"
  std::string cli;        // the node's container CLI
  std::string image;      // ImageSpec name
  std::string image_ref;  // as the manifest pins it (repo@sha256:…)
  std::string model;      // ModelSpec name; "" when the recipe serves no model
  std::string model_repo;
  std::string model_revision;
  std::string model_cache;  // the hub cache it is bound from, as the node spells it
  std::string model_root;   // where the container sees it, file by file
  int port = 0;
  // Its place in a deployment on several nodes: rank 0 (the first node
  // listed, the head) serves the API and is health-checked; the others run
  // the engine's workers and are healthy while they run.
  int rank = 0;
  int nnodes = 1;
  std::string health_path;
  // Where the serve listens, as the node reaches it: 127.0.0.1, or the
  // address a `--host` argument binds it to (a serve bound to the node's LAN
  // address does not answer on loopback).
  std::string health_host = "127.0.0.1";
  int health_timeout_s = 0;
  // `run` options without --name, labels, model binds and the image: host
  // network, env, devices, limits, extra mounts. A host path may still hold
  // "{model_path}" (known on the node only) and "~/" (the node user's home).
  std::vector<std::string> options;
  std::string gpus;                  // GpuRequestText: "all", "2", "0,1", "" (none)
  std::vector<std::string> command;  // the recipe's model (when set) and args
  std::map<std::string, std::string> env;
  // NAME -> the controller's variable its value comes from at apply; only
  // the names are hashed and shown (a rotated token restarts nothing).
  std::map<std::string, std::string> env_from;
  // The fabric facts the render was given (a deployment that uses the
  // fabric: fabric_env or a fabric placeholder); hashed when set, so a
  // fabric change replaces the serve.
  std::optional<FabricValues> fabric;
  std::string hash;  // sha256 hex of all the above

  // "http://<health_host>:<port><health_path>"; "" for a worker (rank > 0).
  std::string HealthUrl() const;

  // What a plan shows: everything but env values and arguments that look
  // secret.
  ContainerShown Shown() const;
  nlohmann::json ToPlanJson() const;  // Shown() as JSON
};

// Sets spec->health_host and spec->health_path from `url`, a HealthUrl()
// as the plan and the state show it ("http://<host>:<port><path>"). An
// empty url (a worker's) leaves them as they are.
void SetHealthFromUrl(const std::string& url, ContainerSpec* spec);

// "fleet-<deployment>": the one name fleet gives a deployment's container.
std::string ContainerName(const std::string& deployment);

// True when the recipe runs one engine across its nodes (it uses {rank},
// {nnodes}, {head} or {head_fabric_addr}): the first node is the head, the
// others its workers.
// Otherwise every node of the deployment runs a replica of its own.
bool IsGroupRecipe(const Recipe& recipe);

struct ContainerSpec;
// The values of `spec` that must not be shown: sensitive env values, the
// from_env values of this process's environment, hidden arguments.
std::vector<std::string> SecretValues(const ContainerSpec& spec);

// `text` with every occurrence of each of `secrets` replaced by
// "(sensitive)" (for a container's log lines in an error).
std::string Redact(std::string text, const std::vector<std::string>& secrets);

// Renders deployment `name` on `node` of `m`. Fails when the deployment,
// node or image is not in the manifests (the loader reports those first).
// `fabric` (may be null) fills the fabric placeholders and, with
// fabric_env: true, the NCCL/Gloo/UCX env (the recipe's env and env_from
// win); without it fabric placeholders stay as written
// (deployment_fabric.h's RenderWithFabric finds the values).
// `rows`: the rows of the tensors the recipe's {rows:...} name, read from
// the model's headers on the node; without them those placeholders stay as
// written (the plan cannot know them yet); a tensor missing from `rows` is
// an error naming the model and the tensor.
Result<ContainerSpec> RenderContainerSpec(const Manifest& m, const std::string& name,
                                          const std::string& node,
                                          const FabricValues* fabric = nullptr,
                                          const TensorRowCounts* rows = nullptr);

// `s` with every {key} of `values` replaced; unknown placeholders are kept
// (the recipe lint already refused them).
std::string FillPlaceholders(const std::string& s,
                             const std::map<std::string, std::string>& values);

// The parts of two shown specs that differ, each as a reason: "image: a ->
// b", "command changed", "env changed (KEY)". The JSON form reads two plan
// JSONs (ContainerSpec::ToPlanJson).
std::vector<std::string> SpecDifferences(const ContainerShown& before, const ContainerShown& after);
std::vector<std::string> SpecDifferences(const nlohmann::json& before, const nlohmann::json& after);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_DEPLOYMENT_SPEC_H_
