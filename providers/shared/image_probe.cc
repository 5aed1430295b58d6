#include "providers/shared/image_probe.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "providers/shared/cli_error.h"
#include "providers/shared/engine_api.h"
#include "providers/shared/image_inspect_sh.h"
#include "providers/shared/image_probe_sh.h"
#include "providers/shared/node_script.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// "[...] <id>" or "null <id>": the answer line of kInspectFormat.
bool ParseAnswerLine(const std::string& line, ImageLookup* out) {
  size_t space = line.rfind(' ');
  if (space == std::string::npos) return false;
  std::string id = NormalizeImageId(line.substr(space + 1));
  if (id.empty()) return false;
  nlohmann::json digests = nlohmann::json::parse(line.substr(0, space), nullptr, false);
  if (digests.is_discarded() || !(digests.is_array() || digests.is_null())) return false;
  out->repo_digests.clear();
  if (digests.is_array())
    for (const auto& d : digests)
      if (d.is_string()) out->repo_digests.push_back(d.get<std::string>());
  out->id = id;
  return true;
}

// The line image_inspect.sh starts the API's answer with.
constexpr char kImageApiLine[] = "image_api=";

// A name or an ID the API's path can carry as it is.
bool PathSafe(const std::string& what) {
  return !what.empty() && what.find_first_not_of(
                              "abcdefghijklmnopqrstuvwxyz"
                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:/@") == std::string::npos;
}

// The API's answer to GET /images/NAME/json: its Id and RepoDigests, as
// the CLI's kInspectFormat gives them. False when it is not an image's.
bool ImageLookupFromJson(const std::string& body, ImageLookup* l) {
  const nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_object()) return false;
  const auto id = j.find("Id");
  if (id == j.end() || !id->is_string()) return false;
  l->id = NormalizeImageId(id->get<std::string>());
  if (l->id.empty()) return false;
  const auto digests = j.find("RepoDigests");
  if (digests != j.end() && digests->is_array())
    for (const auto& d : *digests)
      if (d.is_string()) l->repo_digests.push_back(d.get<std::string>());
  return true;
}

}  // namespace

std::string ImageInspectScript(const std::string& cli, const std::string& what) {
  // A name the API's path cannot carry: the CLI's inspect, one command.
  if (!PathSafe(what))
    return ShellCommand({cli, "image", "inspect", "--format", kInspectFormat, what}) + " 2>&1\n";
  // image_inspect.sh (beside this file; its header says what it prints)
  // after the API's read, with its values.
  return EngineSocketScript(cli) +
         ProbeApiGetScript("iio", "ii", "/images/" + what + "/json", {"200", "404"}) +
         ScriptWithValues({{"iin_cli", ShellQuote(cli)},
                           {"iin_format", ShellQuote(kInspectFormat)},
                           {"iin_what", ShellQuote(what)}},
                          kImageInspectScript, kImageInspectScriptSize);
}

ImageLookup ParseImageInspect(int exit_code, const std::string& output) {
  if (output.rfind(kImageApiLine, 0) != 0) return ParseInspect(exit_code, output);
  ImageLookup l;
  l.tried = true;
  const size_t mark = output.rfind("\n@api=");
  if (mark == std::string::npos) {
    l.error = "the engine's API answer has no status";
    return l;
  }
  if (output.compare(mark + 6, 3, "404") == 0) return l;  // a plain miss
  const std::string body =
      output.substr(sizeof kImageApiLine - 1, mark - (sizeof kImageApiLine - 1));
  l.found = ImageLookupFromJson(body, &l);
  if (!l.found) l.error = "cannot read the engine API's image inspect: " + body.substr(0, 300);
  return l;
}

std::string DigestOfFleetTag(const std::string& name) {
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos || name.compare(colon + 1, 7, "sha256-") != 0) return "";
  return DigestAfter(name, colon + 8);
}

std::string DigestOfStagedTag(const std::string& name) {
  const size_t colon = name.rfind(':');
  if (colon == std::string::npos || name.compare(colon + 1, 14, "staged-sha256-") != 0) return "";
  return DigestAfter(name, colon + 15);
}

std::string DigestAfter(const std::string& name, size_t at) {
  const std::string hex = name.substr(at);
  if (hex.size() != 64 || hex.find_first_not_of("0123456789abcdef") != std::string::npos) return "";
  return "sha256:" + hex;
}

std::string ImageProbeScript(const std::string& cli, const ImageRef& ref) {
  // image_probe.sh (beside this file; its header says what it prints) with
  // its values. Inline, not `sh -c`: it runs in the probe of every plan.
  return ScriptWithValues({{"ipr_cli", ShellQuote(cli)},
                           {"ipr_format", ShellQuote(kInspectFormat)},
                           {"ipr_ref", ShellQuote(ref.Lookup())}},
                          kImageProbeScript, kImageProbeScriptSize);
}

ImageLookup ParseInspect(int exit_code, const std::string& output) {
  ImageLookup l;
  l.tried = true;
  if (exit_code == 0) {
    // The answer is one "<json> <id>" line; the CLI may print warnings
    // ("WARN[0000] ...") around it. Lines may have been joined by spaces, so
    // look for the answer as a "[...] <id>" / "null <id>" tail too.
    std::istringstream in(output);
    std::string line;
    while (std::getline(in, line)) {
      line = Trim(line);
      if (ParseAnswerLine(line, &l)) {
        l.found = true;
        return l;
      }
      for (size_t p = line.rfind('['); p != std::string::npos && p > 0; p = line.rfind('[', p - 1))
        if (ParseAnswerLine(line.substr(p), &l)) {
          l.found = true;
          return l;
        }
      size_t n = line.rfind("null ");
      if (n != std::string::npos && ParseAnswerLine(line.substr(n), &l)) {
        l.found = true;
        return l;
      }
    }
    l.error = "cannot read `image inspect` output: " + Trim(output).substr(0, 300);
    return l;
  }
  const std::string lower = AsciiLower(output);
  if (lower.find("image not known") != std::string::npos ||
      lower.find("no such image") != std::string::npos ||
      lower.find("no such object") != std::string::npos)
    return l;  // a plain miss
  // podman's words for a record a crash left half-written ("locating item
  // named "manifest" for image with ID ... (consider removing the image to
  // resolve the issue): file does not exist"); tried by hand on this
  // machine: `rmi ID` then removes it.
  if (lower.find("consider removing the image") != std::string::npos ||
      lower.find("you may need to remove the image") != std::string::npos) {
    l.broken = true;
    return l;
  }
  l.error =
      "`image inspect` exited " + std::to_string(exit_code) + ": " + Trim(output).substr(0, 300);
  return l;
}

ImageProbe ParseImageProbe(const std::string& output) {
  ImageProbe p;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    if (line == "cli missing") {
      p.cli_found = false;
      continue;
    }
    std::istringstream words(line);
    std::string what;
    int rc = -1;
    if (!(words >> what >> rc)) continue;
    std::string rest;
    std::getline(words, rest);
    ImageLookup l = ParseInspect(rc, rest);
    if (what == "ref")
      p.by_ref = l;
    else if (what == "name")
      p.by_name = l;
  }
  return p;
}

}  // namespace fleet
