// What a saved plan was made from, and a pull-request summary of it: the
// GitOps loop (plan on a change, review, apply exactly the reviewed plan).
#ifndef FLEET_SRC_ENGINE_PLAN_SOURCES_H_
#define FLEET_SRC_ENGINE_PLAN_SOURCES_H_

#include <map>
#include <string>

#include "manifests/manifest.h"
#include "src/plan.h"

namespace fleet {

// fleet.yaml and every recipe the manifests name: repo-relative path ->
// "sha256:<hex>" of the file's bytes ("missing" when it cannot be read).
std::map<std::string, std::string> ManifestSources(const Manifest& manifest);

// "" when `now` is what the plan was made from; otherwise why not, e.g.
// "fleet.yaml changed, recipes/b.toml is new". A plan that recorded no
// sources (made by an older fleet) cannot be checked and is refused.
std::string SourcesChanged(const std::map<std::string, std::string>& planned,
                           const std::map<std::string, std::string>& now);

// A short Markdown summary fit for a pull-request comment: counts, every
// change with its reasons, errors, warnings, what it was made from.
std::string RenderPlanMarkdown(const Plan& plan);

}  // namespace fleet

#endif  // FLEET_SRC_ENGINE_PLAN_SOURCES_H_
