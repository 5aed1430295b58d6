// The resource model: what the planner reasons about.
//
// A resource has an address ("image.b12x@dgx1", "node.dgx1"), a type (the
// provider that owns it), the node it lives on, its desired attributes and
// the addresses it depends on. Attributes are JSON values so that plans and
// state can print and store them without knowing each type.
#ifndef FLEET_SRC_RESOURCE_H_
#define FLEET_SRC_RESOURCE_H_

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "manifests/diagnostic.h"

namespace fleet {

// "node.<node>", "display_ram.<node>", "<type>.<name>@<node>".
std::string NodeAddress(const std::string& node);
std::string ResourceAddress(const std::string& type, const std::string& name,
                            const std::string& node);
// The name of a "<type>.<name>@<node>" address of that type ("" when the
// address is not one): ResourceName("deployment", "deployment.q@dgx1") == "q".
std::string ResourceName(const std::string& type, const std::string& address);

struct DesiredResource {
  std::string address;
  std::string type;
  std::string name;  // the manifest name ("b12x"), or the node name
  std::string node;  // the node whose transport reaches it
  nlohmann::json attributes = nlohmann::json::object();
  std::vector<std::string> depends_on;  // addresses
  SourceLoc loc;                        // where the manifest declares it
};

// What the probe read for one resource.
struct ActualResource {
  bool probed = false;  // false: not read (node off, unreachable, skipped)
  bool exists = false;  // the thing is there at all
  nlohmann::json attributes = nlohmann::json::object();
  std::string error;  // a read error worth showing (not "absent")
};

// Facts about a node shared by every resource on it (read once per plan by
// the node provider's probe).
struct NodeFacts {
  bool reachable = false;
  std::string unreachable_reason;  // e.g. "connection refused"
  std::string hostname;
  std::string machine_id;
  std::string boot_id;
  std::string arch;
  std::string kernel;
  nlohmann::json gpu = nlohmann::json::object();    // GpuFactsToJson
  nlohmann::json fabric = nlohmann::json::array();  // FabricPortsToJson: RoCE/IB ports
  // fleet-probe's wall time on the node in seconds; -1 when it did not run
  // or the node's clock could not say. Measured each plan, not recorded.
  double gpu_probe_s = -1;
  // The running containers labelled fleet.deployment (fleet's serves), when
  // the node's container CLI could list them (or it has none).
  bool fleet_serves_listed = false;
  std::vector<std::string> fleet_serves;
  // Every image on the node (providers/shared/image_listing.h, ImageListing
  // JSON), listed once by the plan's node probe and read by every image
  // resource on the node and by the search for images no state knows; null
  // where the node's probe did not list (`fleet probe`, apply's re-reads).
  // Not in ToJson: it is the image provider's input, not a node fact to show.
  nlohmann::json images;
  // The node's power switch as the controller read it at plan time (the
  // engine reads it, beside the probe): its state ("on", "off",
  // "unavailable", ...) or, when it could not be read, why (naming the
  // controller and the entity, never the token). Both empty: not read (no
  // switch declared, or no controller). `power_switch_refused`: the
  // controller answered and refused (unknown entity, token refused), as
  // opposed to not answering at all.
  std::string power_switch_state;
  std::string power_switch_error;
  bool power_switch_refused = false;
  nlohmann::json ToJson() const;
};

}  // namespace fleet

#endif  // FLEET_SRC_RESOURCE_H_
