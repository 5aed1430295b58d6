// A serve's container on its node, from `run` to removal: started from the
// image already on the node (never a pull), the model bound file by file,
// env through a 0600 file, the container it replaces kept aside until the
// new one serves and put back when it does not.
#ifndef FLEET_PROVIDERS_SHARED_SERVING_CONTAINER_LIFECYCLE_H_
#define FLEET_PROVIDERS_SHARED_SERVING_CONTAINER_LIFECYCLE_H_

#include <string>

#include "providers/shared/serving/deployment_spec.h"
#include "src/provider.h"
#include "src/status.h"

namespace fleet {

// What a `run` of spec's container that the engine refused (a non-zero
// exit) means, as a typed Status: kAlreadyExists when the name is taken,
// kFailed otherwise; the message names the command and quotes the engine.
Status RunRefusal(const ContainerSpec& spec, const CommandResult& run);

// Stops (30 s grace) and removes container `name`; one that is not there is
// not an error, an engine that cannot say (its daemon down, its storage
// broken) is.
Status RemoveContainer(const StepContext& ctx, const std::string& cli, const std::string& name);
// What RemoveContainer runs on the node (remove_container.sh).
std::string RemoveContainerScript(const std::string& cli, const std::string& name);

// A serve's container moved aside while its replacement starts (stopped
// with 30 s grace, renamed `to`), or back (renamed `to`, started).
enum class SwapWay { kAside, kBack };
std::string SwapContainerScript(const std::string& cli, SwapWay how, const std::string& from,
                                const std::string& to);

// The ID of the image of `spec`, by digest, already on the node; an error
// naming the image step to apply first when it is not there.
Result<std::string> StagedImage(const StepContext& ctx, const ContainerSpec& spec);

// The container of that name on the node now, and the spec label it has.
struct ExistingContainer {
  bool exists = false;
  std::string spec;
};
Result<ExistingContainer> InspectExisting(const StepContext& ctx, const ContainerSpec& spec);

// The declared container is there: starts it when it is stopped, then waits
// for its health and smoke checks (WaitServing).
Status StartExisting(const StepContext& ctx, const ContainerSpec& spec);

// `sync`, then the page cache drop (DropCachesArgv) with `sudo -n`, on
// ctx.node: before a start on unified memory (GB10) that fits only once the
// cache is dropped, since the engine's start-up check (cuMemGetInfo) counts
// the cache as used and refuses. The plan checked that sudo allows it.
Status DropPageCache(const StepContext& ctx);

// A new container in place of `existing` (nothing, or another spec): sets
// the old one aside, starts the new one from `image_id`, waits for it to
// serve; on failure removes it and puts the old one back.
// With `keep_previous`, the old one stays, stopped, as <container>-previous
// once the new one serves (a gate in place decides later).
Status ReplaceContainer(const StepContext& ctx, const ContainerSpec& spec,
                        const ExistingContainer& existing, const std::string& image_id,
                        bool keep_previous = false);

// A gate in place refused the new spec: removes it, puts <container>-previous
// back under its name, starts it and waits for it to serve.
Status RestorePrevious(const StepContext& ctx, const ContainerSpec& spec);

// A gate in place passed: the old container kept aside goes.
Status RemovePrevious(const StepContext& ctx, const ContainerSpec& spec);

// The started container's id, for the state record. An error when the node
// stops answering or the container is gone: the step cannot say it runs.
Result<std::string> ContainerId(const StepContext& ctx, const ContainerSpec& spec);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_SERVING_CONTAINER_LIFECYCLE_H_
