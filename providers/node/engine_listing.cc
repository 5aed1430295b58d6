#include "providers/node/engine_listing.h"

#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>

#include "providers/node/engine_listing_sh.h"
#include "providers/shared/image_ref.h"
#include "providers/shared/node_script.h"
#include "providers/shared/serving_containers.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

// The line prefix and the marker engine_listing.sh prints.
constexpr const char* kApiLine = "engine_api=";
constexpr const char* kApiMarker = "@api=";

std::vector<std::string> Strings(const nlohmann::json& j, const std::string& none) {
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& s : j)
      if (s.is_string() && s.get<std::string>() != none) out.push_back(s.get<std::string>());
  return out;
}

// The bodies of the API's answers, in order, from the engine_api lines.
std::vector<std::string> ApiBodies(const std::string& output, bool* present) {
  std::vector<std::string> bodies(1);
  std::istringstream in(output);
  *present = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(kApiLine, 0) != 0) continue;
    *present = true;
    const std::string l = line.substr(std::string(kApiLine).size());
    if (l.rfind(kApiMarker, 0) == 0)
      bodies.emplace_back();
    else
      bodies.back() += l + "\n";
  }
  bodies.pop_back();  // what followed the last marker: nothing
  return bodies;
}

// engine_listing.sh's $eld: `fleet-probe --api-gpu`'s mode word, or "" for
// the API alone.
std::string GpuReadMode(std::optional<GpuContextMode> gpu) {
  if (!gpu) return "";
  return *gpu == GpuContextMode::kAlways ? "always" : "auto";
}

}  // namespace

std::string EngineListingScript(const std::string& cli, bool images, const std::string& beside,
                                std::optional<GpuContextMode> gpu) {
  // Inline, not `sh -c`: it runs in the node facts probe on every plan, and
  // a process more costs each node a few ms. engine_listing.sh's header
  // names the values.
  return ScriptWithValues({{"elc", ShellQuote(cli)},
                           {"ele", ShellQuote(EngineSocketScript(cli))},
                           {"elu", ShellQuote(ServingContainersApiPath())},
                           {"elf", ShellQuote(kProbeInstallPath)},
                           {"elk", ShellQuote(ServingContainersCliCommand(cli))},
                           {"eli", ShellQuote(images ? ImageListingScript(cli) : "")},
                           {"elb", ShellQuote(beside)},
                           {"eld", ShellQuote(GpuReadMode(gpu))}},
                          kEngineListingScript, kEngineListingScriptSize);
}

ServeListing ContainersFromJson(const std::string& body) {
  ServeListing l;
  if (!ContainerNamesFromJson(body, &l.names))
    l.error = "the engine's API answered /containers/json with no list";
  else
    l.listed = true;
  return l;
}

ImageListing ImagesFromJson(const std::string& body) {
  ImageListing l;
  l.listed = true;
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_array()) {
    l.error = "the engine's API answered /images/json with no list";
    return l;
  }
  for (const auto& i : j) {
    if (!i.is_object() || !i.contains("Id") || !i["Id"].is_string()) continue;
    ListedImage image;
    image.id = NormalizeImageId(i["Id"].get<std::string>());
    if (image.id.empty()) continue;
    // docker's list says "<none>" where its inspect says nothing.
    image.repo_digests = Strings(i.value("RepoDigests", nlohmann::json()), "<none>@<none>");
    image.tags = Strings(i.value("RepoTags", nlohmann::json()), "<none>:<none>");
    MergeListedImage(std::move(image), &l.images);
  }
  return l;
}

EngineApiListing ParseEngineApi(const std::string& output) {
  EngineApiListing a;
  const std::vector<std::string> bodies = ApiBodies(output, &a.present);
  if (!a.present) return a;
  a.serves = bodies.empty() ? ContainersFromJson("") : ContainersFromJson(bodies[0]);
  if (bodies.size() > 1) {
    a.images_listed = true;
    a.images = ImagesFromJson(bodies[1]);
  }
  return a;
}

}  // namespace fleet
