#include "src/engine/plan_sources.h"

#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "src/engine/copy_routes.h"

namespace fleet {

namespace {

std::string Sha256OfFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return "missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string data = ss.str();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr) != 1)
    return "unreadable";
  static const char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(kHex[md[i] >> 4]);
    out.push_back(kHex[md[i] & 15]);
  }
  return out;
}

// "`x`" with backticks that cannot break out of a Markdown code span.
std::string Code(const std::string& s) {
  std::string t = s;
  for (char& c : t)
    if (c == '`' || c == '\n') c = '\'';
  return "`" + t + "`";
}

}  // namespace

std::map<std::string, std::string> ManifestSources(const Manifest& manifest) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  out["fleet.yaml"] = Sha256OfFile((fs::path(manifest.root_dir) / "fleet.yaml").string());
  for (const auto& [name, d] : manifest.deployments) {
    if (d.recipe_path.empty()) continue;
    fs::path p = fs::path(d.recipe_path).lexically_normal();
    const fs::path abs = p.is_absolute() ? p : fs::path(manifest.root_dir) / p;
    out[p.string()] = Sha256OfFile(abs.string());
  }
  return out;
}

std::string SourcesChanged(const std::map<std::string, std::string>& planned,
                           const std::map<std::string, std::string>& now) {
  if (planned.empty())
    return "it records no hash of the manifests it was made from (an older fleet made it)";
  std::string why;
  auto add = [&](const std::string& s) { why += (why.empty() ? "" : ", ") + s; };
  for (const auto& [path, hash] : planned) {
    auto it = now.find(path);
    if (it == now.end())
      add(path + " is no longer used");
    else if (it->second != hash)
      add(path + " changed");
  }
  for (const auto& [path, hash] : now)
    if (!planned.count(path)) add(path + " is new");
  return why;
}

std::string RenderPlanMarkdown(const Plan& plan) {
  std::ostringstream md;
  const auto sum = plan.Summary();
  auto count = [&](const char* k) {
    auto it = sum.find(k);
    return it == sum.end() ? 0 : it->second;
  };
  md << "### fleet " << (plan.destroy ? "destroy plan" : "plan") << ": ";
  if (!plan.errors.empty())
    md << "**" << plan.errors.size() << " error(s), nothing can be applied**\n\n";
  else if (!plan.HasChanges())
    md << "no changes, the fleet matches the manifests\n\n";
  else
    md << count("create") << " to create, " << count("update") << " to update, " << count("replace")
       << " to replace, " << count("delete") << " to delete (" << count("noop")
       << " unchanged)\n\n";
  if (!plan.errors.empty()) {
    md << "#### Errors\n\n";
    for (const PlanDiagnostic& e : plan.errors) md << "- " << Code(e.ToString()) << "\n";
    md << "\n";
  }
  if (plan.HasChanges()) {
    md << "| action | resource | what | why |\n|---|---|---|---|\n";
    for (const PlanChange& c : plan.changes) {
      if (c.action == Action::kNoop) continue;
      std::string why;
      for (const std::string& r : c.reasons) why += (why.empty() ? "" : "; ") + r;
      for (char& ch : why)
        if (ch == '|' || ch == '\n') ch = ' ';
      std::string what = c.summary;
      for (char& ch : what)
        if (ch == '|' || ch == '\n') ch = ' ';
      md << "| " << ActionName(c.action) << " | " << Code(c.address) << " | " << what << " | "
         << why << " |\n";
    }
    md << "\n";
  }
  const std::vector<std::string> routes = CopyRouteLines(plan);
  if (!routes.empty()) {
    md << "#### Copies between nodes, per source\n\n";
    for (const std::string& r : routes) md << "- " << Code(r) << "\n";
    md << "\n";
  }
  if (!plan.warnings.empty()) {
    md << "#### Notes\n\n";
    for (const std::string& w : plan.warnings) md << "- " << Code(w) << "\n";
    md << "\n";
  }
  md << "<sub>state lineage " << Code(plan.lineage) << " serial " << plan.serial;
  auto y = plan.sources.find("fleet.yaml");
  if (y != plan.sources.end()) md << ", fleet.yaml " << Code(y->second.substr(0, 19));
  md << "</sub>\n";
  return md.str();
}

}  // namespace fleet
