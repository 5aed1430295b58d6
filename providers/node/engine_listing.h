// What every node probe asks the node's container engine: the running fleet
// serves (gpu_context.h, NodeFacts::fleet_serves) and, in a plan, every image
// (image_listing.h, NodeFacts::images).
//
// Why not just the CLI: each docker or podman start costs ~80 ms on a node,
// and the plan paid three in a row (`ps`, `image ls`, `image inspect`) on
// every node, converged or not: most of a one-node plan (issue 31). So:
//   - where the engine's API socket answers (docker's DOCKER_HOST=unix://...,
//     else /run/docker.sock, else /var/run/docker.sock; podman's
//     $XDG_RUNTIME_DIR/podman/podman.sock only when its service already
//     runs: fleet never starts one), one process reads /containers/json and
//     /images/json (the installed `fleet-probe --api`, else curl), and the
//     controller parses the JSON (no jq on nodes);
//   - podman with no service: the installed `fleet-probe --podman-store`
//     reads podman's own storage (c/storage's images.json, libpod's BoltDB;
//     a container running only if its process is) and answers as the API
//     would, one process instead of two podman starts (issue 48); it
//     refuses whatever it is unsure of (a setting, SQLite, a busy DB);
//   - else (no reader, no socket, a docker context or a remote DOCKER_HOST,
//     any failed call) the CLI, as before, with the image listing in a
//     pipeline beside `ps`, so the node waits for about one CLI start.
// Both ways end in the same facts: ParseEngineApi gives what the CLI path's
// lines give (engine_listing_test.cc feeds both from the same engines).
#ifndef FLEET_PROVIDERS_NODE_ENGINE_LISTING_H_
#define FLEET_PROVIDERS_NODE_ENGINE_LISTING_H_

#include <initializer_list>
#include <optional>
#include <string>

#include "providers/node/gpu_context.h"
#include "providers/shared/engine_api.h"
#include "providers/shared/image_listing.h"
#include "src/probe/probe_install.h"

namespace fleet {

// sh that lists the node's fleet serves with its container CLI `cli`
// ("docker" or "podman") or its engine's API and prints the fleet_serves
// line (ServeListingScript's, or "fleet_serves=api:" and the API's answer as
// "engine_api=" lines), then runs `beside` (sh, "" for nothing). With
// `images` it also lists the images: where the CLI lists them, `beside`
// runs beside that listing, whose lines (ImageListingScript's, or
// "images=api") follow. Defines $fsl and $gcs for GpuContextScript ($fsl
// "api": $gcs is non-empty when a fleet serve may run), and $elq ("1" when
// the installed fleet-probe knows --api, and so its own deadline; else "")
// for what `beside` runs. With `gpu` (the node facts probe, node_gpu.sh in
// `beside`): where the installed fleet-probe reads the API, it reads the GPU
// in the same process, with the context mode `gpu` and the API's answer
// deciding the context ($elp "1" and $elg the GPU document; else both "").
// The embedded engine_listing.sh, after one quoted assignment per value.
std::string EngineListingScript(const std::string& cli, bool images, const std::string& beside,
                                std::optional<GpuContextMode> gpu = std::nullopt);

// What the API's answer says ("engine_api=" lines in `output`); present is
// false when the node used the CLI.
struct EngineApiListing {
  bool present = false;
  ServeListing serves;
  bool images_listed = false;  // the answer carried /images/json
  ImageListing images;
};
EngineApiListing ParseEngineApi(const std::string& output);

// One endpoint's JSON as the CLI path would have read it: /containers/json
// (names as `ps --format {{.Names}}` prints them) and /images/json (as
// `image ls -q` + `image inspect`: no "<none>" placeholders, one entry per
// ID).
ServeListing ContainersFromJson(const std::string& body);
ImageListing ImagesFromJson(const std::string& body);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_NODE_ENGINE_LISTING_H_
