#include "providers/image/image_probe.h"

#include <algorithm>
#include <cctype>
#include <sstream>

#include "src/shell_quote.h"

namespace fleet {

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

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

// Docker finds `repo@sha256:D` only under that repository name, podman
// under any name that holds D (`other/x@D` pulled, or `x:tag` then D). For
// the same answer on both, a docker miss looks D up among every image's
// registry digests (`image ls --digests`, listing everything: never
// `image ls REF`, which says nothing for a digest ref) and inspects that
// image by ID: its RepoDigests then name D.
std::string DockerDigestFallback(const std::string& cli, const ImageRef& ref,
                                 const std::string& inspect) {
  const size_t slash = cli.rfind('/');
  if (!ref.pinned() || cli.substr(slash == std::string::npos ? 0 : slash + 1) != "docker")
    return "";
  return "if [ \"$rc\" != 0 ]; then\n"
         "  id=$(\"$cli\" image ls --digests --no-trunc --format '{{.Digest}} {{.ID}}' "
         "2>/dev/null | awk -v d=" +
         ShellQuote(ref.digest) +
         " '$1 == d { print $2; exit }')\n"
         "  if [ -n \"$id\" ]; then out=$(" +
         inspect +
         "\"$id\" 2>&1); rc=$?; fi\n"
         "fi\n";
}

// One "tagged <name> <id>" line per image carrying fleet's tag. Listing
// (not looking up a ref) is what `image ls` is for; both CLIs print one line
// per tag and the full ID with --no-trunc.
std::string FleetTaggedListing() {
  return "\"$cli\" image ls --no-trunc --format '{{.Repository}}:{{.Tag}} {{.ID}}' 2>/dev/null | "
         "awk '$1 ~ /:(staged-)?sha256-[0-9a-f]+$/ { print \"tagged \" $1 \" \" $2 }'\n";
}

}  // namespace

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
  // One line per lookup: "<what> <exit status> <inspect's output, newlines
  // turned into spaces>". 2>&1 keeps the reason of a miss; the parser skips
  // warnings around the answer.
  const std::string inspect = "\"$cli\" image inspect --format " + ShellQuote(kInspectFormat) + " ";
  std::string s = "cli=" + ShellQuote(cli) +
                  "\n"
                  "command -v \"$cli\" >/dev/null 2>&1 || { echo 'cli missing'; exit 0; }\n" +
                  FleetTaggedListing() + "out=$(" + inspect + ShellQuote(ref.Lookup()) +
                  " 2>&1); rc=$?\n" + DockerDigestFallback(cli, ref, inspect) +
                  "printf 'ref %s %s\\n' \"$rc\" \"$(printf '%s' \"$out\" | tr '\\n' ' ')\"\n";
  const std::string name = ref.FleetTag();
  if (!name.empty())
    s += "[ \"$rc\" = 0 ] && exit 0\n"
         "out=$(" +
         inspect + ShellQuote(name) +
         " 2>&1); rc=$?\n"
         "printf 'name %s %s\\n' \"$rc\" \"$(printf '%s' \"$out\" | tr '\\n' ' ')\"\n";
  return s;
}

std::string ImageInventoryScript(const std::string& cli) {
  return "cli=" + ShellQuote(cli) +
         "\n"
         "command -v \"$cli\" >/dev/null 2>&1 || { echo 'cli missing'; exit 0; }\n" +
         FleetTaggedListing();
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
  const std::string lower = Lower(output);
  if (lower.find("image not known") != std::string::npos ||
      lower.find("no such image") != std::string::npos ||
      lower.find("no such object") != std::string::npos)
    return l;  // a plain miss
  l.error =
      "`image inspect` exited " + std::to_string(exit_code) + ": " + Trim(output).substr(0, 300);
  return l;
}

ImageProbe ParseImageProbe(const std::string& output) {
  ImageProbe p;
  std::istringstream in(output);
  std::string line;
  std::vector<std::string> staged_ids;
  while (std::getline(in, line)) {
    if (line == "cli missing") {
      p.cli_found = false;
      continue;
    }
    std::istringstream words(line);
    std::string what;
    if (line.rfind("tagged ", 0) == 0) {
      std::string name, id;
      words >> what >> name >> id;
      if (NormalizeImageId(id).empty()) continue;
      if (!DigestOfFleetTag(name).empty()) p.fleet_tagged.push_back({name, NormalizeImageId(id)});
      if (!DigestOfStagedTag(name).empty()) staged_ids.push_back(NormalizeImageId(id));
      continue;
    }
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
  for (FleetTagged& t : p.fleet_tagged)
    t.staged = std::find(staged_ids.begin(), staged_ids.end(), t.id) != staged_ids.end();
  return p;
}

}  // namespace fleet
