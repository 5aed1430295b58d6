// Rules of fleet.yaml that span sections (a deployment names an image, two
// nodes share a switch), run once every section has been read so that the
// order of sections in the file does not matter. Each rule reports through
// the Reporter, located at the place the operator must edit.
#ifndef FLEET_MANIFESTS_MANIFEST_CHECKS_H_
#define FLEET_MANIFESTS_MANIFEST_CHECKS_H_

#include <map>
#include <string>
#include <vector>

#include "manifests/manifest.h"
#include "manifests/yaml_schema.h"

namespace fleet::manifest_checks {

using yaml_schema::Located;
using yaml_schema::Reporter;

// A name used elsewhere in the manifest, to be checked once every section is
// read: `kind` is the section it must be defined in.
struct PendingRef {
  std::string kind;     // "node", "image", "model", "store"
  std::string context;  // "deployment 'qwen38'"
  Located<std::string> ref;
};

// Where a deployment's fields were written.
struct DeploymentLocs {
  SourceLoc port;
  std::vector<Located<std::string>> nodes;
};

// What the reader noted while reading, for the rules below.
struct ReadNotes {
  std::vector<PendingRef> refs;
  std::map<std::string, Located<std::string>> switches;  // node -> entity
  std::map<std::string, DeploymentLocs> deployment_locs;
  std::vector<std::string> node_order;  // file order, for stable messages
  std::vector<std::string> deployment_order;
};

// Every name used (deployment image/model/nodes, store nodes, image and model
// nodes, node:<x> / store:<x> sources, model stores) is defined; otherwise
// an error with "did you mean" or the defined names.
void CheckReferences(const Manifest& m, const ReadNotes& notes,
                     Reporter* reporter);
// No two nodes share a power switch entity (the log's copy-paste switch.dgx3).
void CheckSwitches(const Manifest& m, const ReadNotes& notes,
                   Reporter* reporter);
// No two nodes share address and ssh port (two names for one machine).
void CheckAddresses(const Manifest& m, const ReadNotes& notes,
                    Reporter* reporter);
// No two deployments on one node and port; no node twice in a deployment.
void CheckPorts(const Manifest& m, const ReadNotes& notes, Reporter* reporter);
// A node runs one deployment at a time: two deployments on one node are an
// error naming both, unless both say shared: true.
void CheckOneServePerNode(const Manifest& m, const ReadNotes& notes, Reporter* reporter);
// A deployment's model in a shared store is mounted on all its nodes.
void CheckModelPlacement(const Manifest& m, const ReadNotes& notes,
                         Reporter* reporter);
// No deployment on a node whose desired power state is off.
void CheckPoweredOff(const Manifest& m, const ReadNotes& notes,
                     Reporter* reporter);

// All of the above, in that order.
void CheckAcrossSections(const Manifest& m, const ReadNotes& notes,
                         Reporter* reporter);

}  // namespace fleet::manifest_checks

#endif  // FLEET_MANIFESTS_MANIFEST_CHECKS_H_
