// What the image provider does on nodes at apply time: look an image up,
// pull it, copy it from another node, name it. Every command is built with
// ShellCommand; every function re-reads the node rather than trusting the
// plan.
#ifndef FLEET_PROVIDERS_IMAGE_IMAGE_STEPS_H_
#define FLEET_PROVIDERS_IMAGE_IMAGE_STEPS_H_

#include <functional>
#include <string>
#include <vector>

#include "providers/shared/find_image.h"
#include "providers/shared/image_probe.h"
#include "providers/shared/image_ref.h"
#include "src/clock.h"
#include "src/status.h"
#include "src/transport.h"

namespace fleet {

using ProgressFn = std::function<void(const std::string&)>;

// Removes `what`, a name or ID whose record the engine cannot read (`rmi`,
// never -f), and says so through `progress`; an error names the node's
// answer.
Status RemoveBrokenImage(Transport* t, const std::string& cli, const std::string& what,
                         const ProgressFn& progress);

// Gives image `id` each of `names` on `node` (skipping empty ones and names
// already pointing at it). Verifies each name resolves to `id` afterwards. A
// tag that fails on a full image storage says so and what to do (docker
// 20.10 then holds the name in memory only, which the next probe sees).
Status EnsureNames(Transport* t, const std::string& cli, const std::string& node,
                   const std::string& id, const std::vector<std::string>& names,
                   const ProgressFn& progress);

// The names fleet gives an image it staged: FleetTag and the ref's
// repository:tag for a pinned ref copied from a node; the tag for a
// floating one.
std::vector<std::string> NamesForCopy(const ImageRef& ref);

// `<cli> pull <ref.Lookup()>` and checks the result (registry digest D among
// the RepoDigests when pinned). Returns the image ID.
Result<std::string> PullImage(Transport* t, const std::string& cli, const ImageRef& ref,
                              const std::string& node, const ProgressFn& progress);

struct CopySpec {
  Transport* source = nullptr;  // connected
  std::string source_node;
  std::string source_cli;
  Transport* target = nullptr;  // connected
  std::string target_node;
  std::string target_cli;
  std::string config;  // image ID on the source to copy
  // Times the copy: the step's (StepContext::clock). Never null.
  Clock* clock = RealClock();
};

// Streams `<source_cli> save <config>` into `<target_cli> load` and checks
// that the target then holds `config`. On any failure the image the load may
// have left (it was absent before: callers check) is removed, and the error
// says what happened and what was cleaned up.
Status CopyImage(const CopySpec& spec, const ProgressFn& progress);

// The end of every copy, whatever carried the bytes: when `problem` is ""
// checks that the target now holds spec.config; otherwise (or when it does
// not) removes whatever the load named (`loaded`) and the image itself, and
// returns the error, saying what was cleaned up. `what_moved` is for the
// message ("1.2 GiB", "over the fabric").
Status FinishImageCopy(const CopySpec& spec, std::string problem,
                       const std::vector<std::string>& loaded, const std::string& what_moved,
                       const ProgressFn& progress);

// The names `<cli> load` reported ("Loaded image: X", "Loaded image(s): X, Y",
// docker's "Loaded image ID: sha256:..."), in order.
std::vector<std::string> ParseLoadedNames(const std::string& load_output);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_IMAGE_IMAGE_STEPS_H_
