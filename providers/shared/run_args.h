// How a container is started from a staged image (for the deployment
// provider): never with a pull. In the log, an image missing on one node made
// `docker run` pull from the internet until a timeout killed it while the
// launcher printed "started"; with --pull=never the run fails at once and
// says the image is missing.
#ifndef FLEET_PROVIDERS_SHARED_RUN_ARGS_H_
#define FLEET_PROVIDERS_SHARED_RUN_ARGS_H_

#include <string>
#include <vector>

namespace fleet {

// argv of `<cli> run --pull=never <options...> <image> <command...>`.
//
// `image` should be the config digest the image resource recorded
// ("sha256:<hex>", attribute `image_id`): it names the image on every node,
// whether pulled or copied, while "repo@sha256:<manifest digest>" does not
// survive a copy. Any --pull option in `options` ("--pull=always",
// "--pull always") is dropped: never pulling is the point.
std::vector<std::string> RunArgsNoPull(const std::string& cli,
                                       const std::vector<std::string>& options,
                                       const std::string& image,
                                       const std::vector<std::string>& command);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_RUN_ARGS_H_
