// NodeProvider: the node itself (`node.<name>`): reachability, identity and
// GPU summary. Every other resource on a node depends on it.
//
// Identity is the first safety check of every plan: the machine behind the
// address must call itself by the manifest's `hostname` (the log's
// label-inversion incident: a name that pointed at another box for a day),
// and must be the machine recorded at the first apply (machine id).
#ifndef FLEET_PROVIDERS_NODE_NODE_PROVIDER_H_
#define FLEET_PROVIDERS_NODE_NODE_PROVIDER_H_

#include <string>

#include "providers/node/gpu_context.h"
#include "providers/node/node_json.h"
#include "src/provider.h"

namespace fleet {

// The read-only script that prints a node's facts (key=value lines).
// `sysfs` is the node's paths.sysfs (its infiniband ports are read there);
// `cli` its container CLI and `gpu_context` when fleet-probe may create a
// CUDA context (gpu_context.h: by default not while a fleet serve runs);
// `list_images`: the plan's probe also lists the node's images
// (engine_listing.h, NodeFacts::images).
std::string NodeFactsScript(const std::string& sysfs = "/sys", const std::string& cli = "docker",
                            GpuContextMode gpu_context = GpuContextMode::kAuto,
                            bool list_images = false);

// Parses what NodeFactsScript printed. Unknown lines are ignored.
NodeFacts ParseNodeFacts(const std::string& output);

// Returns "" when the node's reported identity matches the manifest (and the
// state record, if any), else the error to show.
// `where` is the endpoint ("127.0.0.1:22001") for the message.
std::string CheckNodeIdentity(const std::string& node, const std::string& where,
                              const std::string& expected_hostname, const NodeFacts& facts,
                              const NodeRecord& recorded);

// The node's fabric endpoint (manifest's `fabric:` or the probed ports)
// and its ports, for `fleet probe` (a few lines, each ending in "\n").
std::string DescribeNodeFabric(const NodeSpec& spec, const NodeFacts& facts);

// The command the node's sudo runs for `poweroff_command`: "sudo -n
// systemctl poweroff" -> {"systemctl", "poweroff"}. Empty when the command
// does not start with sudo, or is more than plain words (a pipe, a
// variable, quotes): nothing can be checked of it then.
std::vector<std::string> PoweroffSudoArgv(const std::string& poweroff_command);

// The read-only fragment that asks the node's sudo (`sudo -n -l`: it runs
// nothing, asks nothing) whether `argv` may run without a password, and
// its parser.
std::string PoweroffSudoScript(const std::vector<std::string>& argv);
PoweroffSudo ParsePoweroffSudo(const std::string& output);

// The plan's error for a power off whose `sudo -n` would be asked for a
// password: the node, the command and the exact sudoers line. "" when
// allowed or not checked.
std::string PoweroffSudoRefusal(const std::string& node, const PoweroffSudo& sudo);

class NodeProvider : public Provider {
 public:
  std::string type() const override { return "node"; }
  bool IsNodeItself() const override { return true; }
  // From the manifest's `power` (NodeWant::power).
  DeclaredPower PowerOf(const DesiredResource& r) const override;
  // "power off" for a power off (NodeStep::op).
  std::string TakesDown(const PlanChange& c) const override;
  std::vector<DesiredResource> Expand(const Manifest& m) const override;
  std::string ProbeScript(const DesiredResource& r, const NodeSpec& node) const override;
  ActualResource ParseProbe(const DesiredResource& r, const std::string& output,
                            const NodeFacts& facts) const override;
  PlanChange Diff(const DesiredResource& desired, const ActualResource& actual,
                  const ResourceRecord* record, const DiffContext& ctx) const override;
  PlanChange DiffDestroy(const DesiredResource& desired, const ActualResource& actual,
                         const ResourceRecord* record, const DiffContext& ctx) const override;
  // A node that answers, is declared on and is who the manifests say
  // (hostname, address): its identity as the probe read it.
  Result<nlohmann::json> Adopt(const DesiredResource& desired, const ActualResource& actual,
                               const DiffContext& ctx, const StepContext* node) const override;
  Result<nlohmann::json> Apply(const PlanChange& change, const StepContext& ctx) const override;

 private:
  // DiffDestroy's change before the poweroff's sudo is checked.
  PlanChange DestroyChange(const DesiredResource& desired, const ResourceRecord* record,
                           const DiffContext& ctx) const;
};

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_NODE_PROVIDER_H_
