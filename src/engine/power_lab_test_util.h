// The lab the power policies' tests build: nodes behind switches of their
// own (switch.<name>, all on until a test says otherwise), one engine image
// "img", and deployments of it serving a model each.
#ifndef FLEET_SRC_ENGINE_POWER_LAB_TEST_UTIL_H_
#define FLEET_SRC_ENGINE_POWER_LAB_TEST_UTIL_H_

#include <string>
#include <vector>

#include "manifests/manifest.h"

namespace fleet::testing_power {

// `nodes` at <name>.lan, each with a power switch, and the image "img".
inline Manifest SwitchedNodes(const std::vector<std::string>& nodes) {
  Manifest m;
  for (const std::string& n : nodes) {
    NodeSpec node;
    node.name = n;
    node.address = n + ".lan";
    node.power.present = true;
    node.power.switch_entity = "switch." + n;
    m.nodes[n] = node;
  }
  ImageSpec image;
  image.name = "img";
  image.ref = "eng@sha256:" + std::string(64, 'a');
  m.images["img"] = image;
  return m;
}

// Deployment `name` of "img" on `node` at `port`, serving `model`; returned
// for the test to add what its policy reads.
inline DeploymentSpec& AddDeployment(Manifest* m, const std::string& name, const std::string& node,
                                     int port, const std::string& model) {
  DeploymentSpec d;
  d.name = name;
  d.nodes = {node};
  d.port = port;
  d.served_model = model;
  d.image = "img";
  d.recipe.args = {"serve"};
  return m->deployments[name] = d;
}

}  // namespace fleet::testing_power

#endif  // FLEET_SRC_ENGINE_POWER_LAB_TEST_UTIL_H_
