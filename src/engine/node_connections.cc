#include "src/engine/node_connections.h"

namespace fleet {

NodeConnections::NodeConnections(const Manifest* manifest, Factory factory)
    : manifest_(manifest), factory_(std::move(factory)) {
  if (!factory_) factory_ = [](const NodeSpec& spec) { return MakeTransport(EndpointFor(spec)); };
}

Transport* NodeConnections::Get(const std::string& node) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = transports_.find(node);
  if (it != transports_.end()) return it->second.get();
  const NodeSpec& spec = manifest_->nodes.at(node);
  Transport* t = (transports_[node] = factory_(spec)).get();
  return t;
}

}  // namespace fleet
