// NodeConnections: one transport per node, shared by the planner and the
// executor so that an apply reuses the sessions its plan opened.
#ifndef FLEET_SRC_ENGINE_NODE_CONNECTIONS_H_
#define FLEET_SRC_ENGINE_NODE_CONNECTIONS_H_

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "manifests/manifest.h"
#include "src/provider.h"
#include "src/transport.h"

namespace fleet {

class NodeConnections {
 public:
  using Factory = std::function<std::unique_ptr<Transport>(const NodeSpec&)>;

  // `manifest` must outlive this object. The default factory is MakeTransport.
  explicit NodeConnections(const Manifest* manifest, Factory factory = nullptr);

  // The node's transport, created on first use (not connected).
  // REQUIRES: `node` is a node of the manifest.
  Transport* Get(const std::string& node);

 private:
  const Manifest* manifest_;
  Factory factory_;
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Transport>> transports_;
};

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_NODE_CONNECTIONS_H_
