#include "providers/image/image_steps.h"

#include <cstdio>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>

#include "providers/image/stream_copy.h"
#include "providers/shared/cli_error.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

std::string HumanBytes(uint64_t b) {
  char buf[32];
  if (b >= (1ull << 30))
    snprintf(buf, sizeof buf, "%.2f GiB", b / double(1ull << 30));
  else
    snprintf(buf, sizeof buf, "%.1f MiB", b / double(1ull << 20));
  return buf;
}

// A copy holds two nodes' transports at once: the source's on a thread, the
// target's on the step's. Two copies in opposite directions (A->B, B->A),
// each holding one side, would wait for each other forever; so a copy takes
// both nodes' locks together (std::scoped_lock orders them).
std::mutex& NodeCopyLock(const std::string& node) {
  static std::mutex mu;
  static std::map<std::string, std::unique_ptr<std::mutex>> locks;
  std::lock_guard<std::mutex> lock(mu);
  auto& m = locks[node];
  if (!m) m = std::make_unique<std::mutex>();
  return *m;
}

// Removes `what` (a name or an ID) with `<cli> rmi` (never -f: an image a
// container uses stays). Returns "" or why it could not.
std::string Remove(Transport* t, const std::string& cli, const std::string& what) {
  Result<CommandResult> r = t->Run(ShellCommand({cli, "rmi", what}) + " 2>&1");
  if (!r.ok()) return r.status().message();
  if (r->exit_code != 0) return "`" + cli + " rmi " + what + "`: " + CliErrorText(r->out, 200);
  return "";
}

}  // namespace

Status RemoveBrokenImage(Transport* t, const std::string& cli, const std::string& what,
                         const ProgressFn& progress) {
  std::string e = Remove(t, cli, what);
  if (!e.empty())
    return Status::Error("the engine holds a broken record of " + what +
                         " (a load cut short?) and could not remove it: " + e);
  if (progress)
    progress("removed a broken record of " + what + " (a load cut short) to load again");
  return Status::OK();
}

Status EnsureNames(Transport* t, const std::string& cli, const std::string& node,
                   const std::string& id, const std::vector<std::string>& names,
                   const ProgressFn& progress) {
  for (const std::string& name : names) {
    if (name.empty()) continue;
    Result<ImageLookup> l = InspectImage(t, cli, name);
    if (!l.ok()) return l.status();
    if (l->found && l->id == id) continue;
    const std::string cmd = ShellCommand({cli, "tag", id, name});
    if (progress) progress(cmd);
    Result<CommandResult> r = t->Run(cmd + " 2>&1");
    if (!r.ok()) return r.status();
    if (r->exit_code != 0)
      return Status::Error("`" + cmd + "` exited " + std::to_string(r->exit_code) + ": " +
                           CliErrorText(r->out) + NoSpaceFix(r->out, cli, node));
    l = InspectImage(t, cli, name);
    if (!l.ok()) return l.status();
    if (!l->found || l->id != id)
      return Status::Error("after `" + cmd + "`, " + name + " does not name image " + id);
  }
  return Status::OK();
}

std::vector<std::string> NamesForCopy(const ImageRef& ref) {
  if (!ref.pinned()) return {ref.Lookup()};
  std::vector<std::string> names = {ref.FleetTag()};
  if (!ref.TaggedName().empty()) names.push_back(ref.TaggedName());
  return names;
}

Result<std::string> PullImage(Transport* t, const std::string& cli, const ImageRef& ref,
                              const std::string& node, const ProgressFn& progress) {
  const std::string cmd = ShellCommand({cli, "pull", ref.Lookup()});
  if (progress) progress(cmd);
  Result<CommandResult> r = t->Run(cmd);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return Status::Error("pulling " + ref.Lookup() + " on " + node + " failed: `" + cmd +
                         "` exited " + std::to_string(r->exit_code) + ": " +
                         CliErrorText(r->err.empty() ? r->out : r->err) +
                         NoSpaceFix(r->err + r->out, cli, node));
  Result<ImageLookup> l = InspectImage(t, cli, ref.Lookup());
  if (!l.ok()) return l.status();
  if (!l->found || (ref.pinned() && !HasRepoDigest(l->repo_digests, ref.digest)))
    return Status::Error("`" + cmd + "` succeeded on " + node + " but " + ref.Lookup() +
                         " is not there afterwards");
  return l->id;
}

std::vector<std::string> ParseLoadedNames(const std::string& load_output) {
  std::vector<std::string> names;
  std::istringstream in(load_output);
  std::string line;
  while (std::getline(in, line)) {
    size_t p = line.find("Loaded image");
    if (p == std::string::npos) continue;
    size_t colon = line.find(": ", p);
    if (colon == std::string::npos) continue;
    std::string rest = line.substr(colon + 2);
    std::stringstream parts(rest);
    std::string name;
    while (std::getline(parts, name, ',')) {
      size_t b = name.find_first_not_of(' ');
      size_t e = name.find_last_not_of(" \r");
      if (b != std::string::npos) names.push_back(name.substr(b, e - b + 1));
    }
  }
  return names;
}

Status CopyImage(const CopySpec& spec, const ProgressFn& progress) {
  const std::string save = ShellCommand({spec.source_cli, "save", spec.config});
  const std::string load = ShellCommand({spec.target_cli, "load"});
  if (progress)
    progress("copying " + ShortId(spec.config) + " from " + spec.source_node + ": `" + save +
             "` | `" + load + "`");
  StreamCopyOptions options;
  options.clock = spec.clock;
  options.on_progress = [&](uint64_t bytes) {
    if (progress) progress("copied " + HumanBytes(bytes) + " from " + spec.source_node);
  };
  StreamCopyResult copy;
  {
    std::scoped_lock both(NodeCopyLock(spec.source_node), NodeCopyLock(spec.target_node));
    copy = StreamCopy(spec.source, save, spec.target, load, options);
  }
  std::vector<std::string> loaded;
  if (copy.target.ok()) loaded = ParseLoadedNames(copy.target->out + "\n" + copy.target->err);
  char rate[64];
  snprintf(rate, sizeof rate, " in %.1f s (%.0f MB/s)", copy.seconds,
           copy.seconds > 0 ? copy.bytes / copy.seconds / 1e6 : 0.0);
  return FinishImageCopy(spec, copy.Problem(), loaded, HumanBytes(copy.bytes) + rate, progress);
}

Status FinishImageCopy(const CopySpec& spec, std::string problem,
                       const std::vector<std::string>& loaded, const std::string& what_moved,
                       const ProgressFn& progress) {
  const std::string what = spec.source_node + " -> " + spec.target_node;
  const std::string load = ShellCommand({spec.target_cli, "load"});
  Result<ImageLookup> after = InspectImage(spec.target, spec.target_cli, spec.config);
  if (problem.empty()) {
    if (!after.ok()) return after.status().Prefixed("copy " + what + ": checking the result");
    if (after->found && after->id == spec.config) {
      if (progress) progress("copied " + what_moved + " from " + spec.source_node);
      return Status::OK();
    }
    problem =
        "`" + load + "` succeeded but image " + spec.config + " is not on " + spec.target_node;
    if (!loaded.empty()) problem += " (it loaded " + loaded.front() + ")";
  }

  // Failed: leave nothing half-loaded that looks present. The image was
  // absent before the step (the caller checked), so whatever the load named
  // goes, and so does the image itself if it got committed.
  std::vector<std::string> leftovers;
  for (const std::string& name : loaded)
    if (NormalizeImageId(name).empty()) leftovers.push_back(name);
  std::string cleanup;
  for (const std::string& name : leftovers) {
    std::string e = Remove(spec.target, spec.target_cli, name);
    if (!e.empty()) cleanup += "; could not remove " + name + ": " + e;
  }
  Result<ImageLookup> still = InspectImage(spec.target, spec.target_cli, spec.config);
  if (still.ok() && (still->found || still->broken)) {
    std::string e = Remove(spec.target, spec.target_cli, spec.config);
    if (!e.empty())
      cleanup += "; could not remove the loaded image " + spec.config + ": " + e;
    else
      cleanup += "; removed the image the load left (" + ShortId(spec.config) + ")";
  } else if (!still.ok()) {
    cleanup += "; could not check for a leftover image: " + still.status().message();
  }
  cleanup += NoSpaceFix(problem, spec.target_cli, spec.target_node);
  return Status::Error("copy " + what + " failed after " + what_moved + ": " + problem + cleanup);
}

}  // namespace fleet
