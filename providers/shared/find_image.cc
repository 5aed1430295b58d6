#include "providers/shared/find_image.h"

namespace fleet {

Result<ImageLookup> InspectImage(Transport* t, const std::string& cli, const std::string& what) {
  Result<CommandResult> r = t->Run(ImageInspectScript(cli, what));
  if (!r.ok()) return r.status();
  ImageLookup l = ParseImageInspect(r->exit_code, r->out);
  if (!l.error.empty()) return Status::Error("looking up " + what + ": " + l.error);
  return l;
}

Result<FoundImage> FindImage(Transport* t, const std::string& cli, const ImageRef& ref,
                             const std::string& config) {
  FoundImage f;
  Result<ImageLookup> l = InspectImage(t, cli, ref.Lookup());
  if (!l.ok()) return l.status();
  if (l->broken) f.broken = ref.Lookup();
  if (l->found && (!ref.pinned() || HasRepoDigest(l->repo_digests, ref.digest))) {
    f.present = true;
    f.id = l->id;
    f.how = ref.pinned() ? "by registry digest" : "by tag";
    return f;
  }
  if (!ref.pinned()) return f;
  if (!config.empty()) {
    l = InspectImage(t, cli, config);
    if (!l.ok()) return l.status();
    if (l->broken) f.broken = config;
    if (l->found && l->id == config) {
      f.present = true;
      f.id = l->id;
      f.how = "by config digest";
    }
    return f;
  }
  l = InspectImage(t, cli, ref.FleetTag());
  if (!l.ok()) return l.status();
  if (l->broken) f.broken = ref.FleetTag();
  if (l->found) {
    f.present = true;
    f.id = l->id;
    f.how = "by fleet's tag " + ref.FleetTag();
  }
  return f;
}

}  // namespace fleet
