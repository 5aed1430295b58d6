#include "providers/node/engine_listing.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "providers/shared/image_ref.h"
#include "providers/shared/serving_containers.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

constexpr const char* kApiLine = "engine_api=";
constexpr const char* kApiMarker = "@api=";

// The same endpoints as URLs for curl.
std::string CurlUrls(bool images) {
  return ShellQuote("http://localhost" + ServingContainersApiPath()) +
         (images ? " 'http://localhost/images/json'" : "");
}

// One read of both endpoints, kept only when every answer was a 200 (a line
// "@api=<code>" can only come from the reader: JSON escapes its newlines).
// The reader is fleet's installed probe (`fleet-probe --api`, one process of
// ~4 ms); curl (~18 ms to load) only where that probe does not run or
// refuses --api (exit 2: installed before it knew the flag). Any other
// failure of the probe (no answer, a short one, its 10 s deadline) is the
// engine's, which curl would meet too: the CLI answers then. $elq says the
// probe knows --api, and so ends its GPU run itself (node_provider.cc drops
// `timeout`).
//
// With `gpu` (the node facts probe, whose GPU run follows): the probe reads
// the API and the GPU in one process (`fleet-probe --api-gpu`, a start less
// on every plan of the node: issue 48). What follows its "@gpu=" marker is
// the GPU document ($elg, $elp=1: node_gpu.sh prints it and starts no probe
// of its own); the marker comes only after every answer was a 200, so the
// answer before it is whole. A probe installed before it knew --api-gpu
// exits 2, and --api alone reads the API as before.
std::string ApiReadScript(const std::string& paths, std::optional<GpuContextMode> gpu) {
  if (!gpu) return ProbeApiReadScript("ela", "elr", paths);
  const std::string marker = "\"\n@gpu=\"";
  return std::string("elr=127; [ -x \"") + kInstalledProbe + "\" ] && { ela=$(\"" +
         kInstalledProbe + "\" --api-gpu " + (*gpu == GpuContextMode::kAlways ? "always" : "auto") +
         " \"$els\" " + paths + " 2>/dev/null); elr=$?; }\n" +
         "    case $ela in\n"
         "    *" +
         marker + "*) elg=${ela#*" + marker + "}; ela=${ela%%" + marker +
         "*}; elp=1; elr=0 ;;\n"
         "    *) if [ \"$elr\" = 2 ]; then\n      " +
         ProbeApiReadScript("ela", "elr", paths) +
         "      fi ;;\n"
         "    esac\n";
}

std::string ApiScript(bool images, std::optional<GpuContextMode> gpu) {
  const std::string nl = "\n";
  const std::string paths =
      ShellQuote(ServingContainersApiPath()) + (images ? " /images/json" : "");
  return "  if [ -n \"$els\" ]; then\n    " + ApiReadScript(paths, gpu) +
         "    case $elr in\n"
         "    2 | 126 | 127) ela=\n"
         "      if command -v curl >/dev/null 2>&1; then\n"
         "        ela=$(curl -sg --max-time 10 --unix-socket \"$els\" -w '\\n" +
         std::string(kApiMarker) + "%{http_code}\\n' " + CurlUrls(images) +
         " 2>/dev/null) || ela=\n"
         "      fi ;;\n"
         "    *) elq=1; [ \"$elr\" = 0 ] || ela= ;;\n"
         "    esac\n"
         "    case $ela in *\"" +
         (images ? nl + kApiMarker + "200" + nl + "\"*\"" : std::string()) + nl + kApiMarker +
         "200\") ;; *) ela= ;; esac\n"
         "  fi\n";
}

// Today's CLI listing of the serves (ServeListingScript's words). The names
// are picked out of the lines by the shell itself (a sed and a tr were ~2
// ms of a plan's wait on the node): split at newlines only, with `set -f`
// so that no line is taken for a file pattern.
std::string CliServesScript(const std::string& cli) {
  return "    if gcs=$(" + ServingContainersCliCommand(cli) +
         " 2>&1); then\n"
         "      fsl=listed; set -f; elo=$IFS; IFS='\n'; elg=\n"
         "      for l in $gcs; do case $l in serving=*) elg=\"$elg${l#serving=} \" ;; esac; done\n"
         "      IFS=$elo; set +f; gcs=$elg\n"
         "    else fsl=engine-error; gcs=$(printf '%s' \"$gcs\" | head -n 1 | cut -c1-300); fi\n";
}

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

}  // namespace

// With the images, where the CLI answers, the script from here to
// EngineListingEnd becomes the function elm, run in the background beside
// the image listing (ell) inside a command substitution that keeps ell's
// lines: elm writes to the script's own output (fd 9), and ell's lines
// follow once both have ended, whole and in order (no temp file: mktemp
// and rm were ~3 ms of the node's side; nor a `cat` draining a pipe, a
// process more). elm's stdin is /dev/null, so that nothing in it reads
// what is not its own. elm starts with `ps`.
std::string EngineListingBegin(const std::string& cli, bool images,
                               std::optional<GpuContextMode> gpu) {
  std::string s;
  if (images) s += "ell() {\n" + ImageListingScript(cli) + "}\n";
  s += "elc=" + ShellQuote(cli) +
       "; ela=; els=; elq=; elg=; elp=\n"
       "if ! command -v \"$elc\" >/dev/null 2>&1; then fsl=no-engine; gcs=\n"
       "else\n" +
       EngineSocketScript(cli) + ApiScript(images, gpu) +
       "  if [ -n \"$ela\" ]; then\n"
       "    fsl=api; gcs=api; case $ela in '[]'*) gcs= ;; esac\n"
       "  else\n" +
       (images
            ? "    fsl=cli\n  fi\nfi\nelm() {\nif [ \"$fsl\" = cli ]; then\n" + CliServesScript(cli)
            : CliServesScript(cli) + "  fi\n") +
       "fi\n"
       "if [ \"$fsl\" = api ]; then echo fleet_serves=api:\n  " +
       PrefixedLinesScript("\"$ela\"", kApiLine) +
       "else printf 'fleet_serves=%s:%s\\n' \"$fsl\" \"$gcs\"; fi\n";
  return s;
}

std::string EngineListingEnd(bool images) {
  if (!images) return "";
  return "}\n"
         "if [ \"$fsl\" = cli ]; then\n"
         "  { elx=$( { elm </dev/null >&9 9>&- & } ; ell 2>&1 9>&-; wait); } 9>&1\n"
         "  printf '%s\\n' \"$elx\"\n"
         "else elm; if [ \"$fsl\" = api ]; then echo images=api; else ell; fi; fi\n";
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
