// How node-side sh reaches a node's container engine without starting its
// CLI: the engine's API socket, read by the installed `fleet-probe --api`
// (one process of ~4 ms instead of a CLI start: podman ~95 ms of CPU,
// docker ~50). Shared by the providers that ask the engine (node: the
// probe's listing, engine_listing.h; image: an image's inspect; deployment:
// a container's inspect and owner; display_ram: the serves it must stop),
// so that none of them includes another's header for it.
#ifndef FLEET_PROVIDERS_SHARED_ENGINE_API_H_
#define FLEET_PROVIDERS_SHARED_ENGINE_API_H_

#include <initializer_list>
#include <string>
#include <vector>

namespace fleet {

// The environment a container CLI's read-only listing runs under, as the
// words before the command ("GOGC=400 "). Why: docker's and podman's CLIs
// are Go programs, and Go's collector runs several times while such a CLI
// starts (its first target is a 4 MiB heap): ~6 ms of a podman `ps` on a
// node, where a plan waits for it. A five-fold target rather than GOGC=off
// keeps the heap bounded by what the listing holds, also under a Go that
// ignores GOMEMLIMIT.
inline constexpr char kListingCliEnv[] = "GOGC=400 ";

// sh that sets $els to the engine's API socket where the node's container
// CLI `cli` would reach its engine through one ("" otherwise: not under a
// docker context or a remote DOCKER_HOST, and podman's only while its
// service already runs): `engine_cli=CLI` and the embedded engine_socket.sh.
// Defines only $engine_cli, $els, $edc and $eps.
std::string EngineSocketScript(const std::string& cli);

// The API's GET of the running containers labelled fleet.deployment (`ps
// --filter label=fleet.deployment`'s filter as the API takes it: the JSON
// object {"label": [<the label>]}, URL-encoded).
std::string ServingContainersApiPath();

// sh: prints each line of the shell word `value` (e.g. "$ela") as
// PREFIX + line, so that an API's answer can travel among other lines of a
// probe's output and be told apart there.
std::string PrefixedLinesScript(const std::string& value, const std::string& prefix);

// sh: the installed probe's GET of the API's `path` into $OUT (as `curl -w
// '\n@api=%{http_code}\n'` prints it; "" without a socket), its exit status
// in $OUT_rc (127 without an installed probe), and $ANSWERED set to 1 when
// the engine answered with one of `codes` (e.g. "200", "404"), else "": the
// embedded engine_api_get.sh, then one line that hands its answer to the
// caller's names. REQUIRES: $els set (EngineSocketScript).
std::string ProbeApiGetScript(const std::string& out, const std::string& answered,
                              const std::string& path, std::initializer_list<const char*> codes);

// The containers' names in the API's answer to /containers/json, as `ps
// --format {{.Names}}` prints them (no leading '/', several joined by ',').
// False when the answer is no list.
bool ContainerNamesFromJson(const std::string& body, std::vector<std::string>* names);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_ENGINE_API_H_
