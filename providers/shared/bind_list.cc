#include "providers/shared/bind_list.h"

#include <sstream>

#include "providers/shared/hub_cache.h"
#include "src/shell_quote.h"

namespace fleet {

namespace {

bool HasDotDot(const std::string& path) {
  std::istringstream in(path);
  std::string part;
  while (std::getline(in, part, '/'))
    if (part == "..") return true;
  return false;
}

std::string JoinPath(const std::string& dir, const std::string& rel) {
  if (dir.empty()) return rel;
  if (dir.back() == '/') return dir + rel;
  return dir + "/" + rel;
}

}  // namespace

Result<std::vector<BindMount>> BuildBindList(const std::vector<ResolvedFile>& files,
                                             const std::string& snapshot_path,
                                             const std::string& container_root) {
  using R = Result<std::vector<BindMount>>;
  const std::string root = container_root.empty() ? snapshot_path : container_root;
  if (root.empty() || root[0] != '/')
    return R::Error("container path '" + root + "' is not absolute");
  std::vector<BindMount> out;
  for (const ResolvedFile& f : files) {
    if (f.path.empty() || f.path[0] == '/' || HasDotDot(f.path))
      return R::Error("snapshot entry '" + f.path + "' is not a plain relative path");
    if (f.real.empty()) return R::Error(f.path + ": does not resolve (broken symlink?)");
    if (f.real[0] != '/' || HasDotDot(f.real))
      return R::Error(f.path + ": resolved to '" + f.real + "', not an absolute canonical path");
    if (!f.regular) return R::Error(f.path + ": resolves to " + f.real + ", not a regular file");
    out.push_back({f.real, JoinPath(root, f.path)});
  }
  if (out.empty()) return R::Error("the snapshot has no files");
  return out;
}

Result<std::vector<BindMount>> ModelBindList(Transport* t, const std::string& cache,
                                             const std::string& repo, const std::string& revision,
                                             const std::string& container_root) {
  using R = Result<std::vector<BindMount>>;
  const std::string script = "c=" + NodePathWord(cache) +
                             "; d=" + ShellQuote(HubRepoDirName(repo)) +
                             "; r=" + ShellQuote(revision) + "\n" +
                             R"SH(m="$c/$d"; [ -d "$m" ] || m="$c/../$d"
[ -d "$m/snapshots/$r" ] || { [ -f "$m/refs/$r" ] && r=$(cat "$m/refs/$r"); }  # a branch
cd -- "$m/snapshots/$r" 2>/dev/null || { echo "no snapshot $r of $d in $c" >&2; exit 3; }
printf 'root\t%s\n' "$PWD"
find . -mindepth 1 ! -type d -printf '%P\n' | LC_ALL=C sort | while IFS= read -r f; do
  p=$(realpath -e -- "$f" 2>/dev/null) || p=
  k=0; [ -n "$p" ] && [ -f "$p" ] && [ ! -L "$p" ] && k=1
  printf 'b\t%s\t%s\t%s\n' "$k" "$p" "$f"
done
)SH";
  Result<CommandResult> r = t->Run(script);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0)
    return R::Error(t->Describe() + ": " +
                    (r->err.empty() ? "listing the snapshot failed" : r->err));
  std::vector<ResolvedFile> files;
  std::string root;
  std::istringstream in(r->out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("root\t", 0) == 0) {
      root = line.substr(5);
      continue;
    }
    if (line.rfind("b\t", 0) != 0) continue;
    // b <regular> <real> <path>: the path last (it may hold anything but a newline).
    size_t a = line.find('\t', 2), b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) continue;
    ResolvedFile f;
    f.regular = line.substr(2, a - 2) == "1";
    f.real = line.substr(a + 1, b - a - 1);
    f.path = line.substr(b + 1);
    files.push_back(std::move(f));
  }
  Result<std::vector<BindMount>> list = BuildBindList(files, root, container_root);
  if (!list.ok()) return list.status().Prefixed(t->Describe() + ": " + repo + "@" + revision);
  return list;
}

std::string FormatBindList(const std::vector<BindMount>& mounts) {
  std::string out;
  for (const BindMount& m : mounts) out += m.host + "\t" + m.container + "\n";
  return out;
}

}  // namespace fleet
