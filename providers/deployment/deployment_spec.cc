#include "providers/deployment/deployment_spec.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "manifests/recipe.h"
#include "manifests/secrets.h"
#include "providers/deployment/gpu_request.h"
#include "providers/model/blob_hash.h"
#include "providers/model/model_provider.h"

namespace fleet {
namespace {

// Secret-looking env values never reach a plan, the state or the output.
bool IsSensitive(const std::string& key, const std::string& value) {
  return IsSecretKeyName(key) || IsSecretValue(key, value);
}

}  // namespace

std::string ContainerName(const std::string& deployment) { return "fleet-" + deployment; }

bool IsGroupRecipe(const Recipe& recipe) {
  return RecipeUsesPlaceholder(recipe, "rank") || RecipeUsesPlaceholder(recipe, "nnodes") ||
         RecipeUsesPlaceholder(recipe, "head");
}

std::vector<std::string> SecretValues(const ContainerSpec& spec) {
  std::vector<std::string> out;
  for (const auto& [k, v] : spec.env)
    if (IsSensitive(k, v) && !v.empty()) out.push_back(v);
  for (const auto& [k, var] : spec.env_from)
    if (const char* v = std::getenv(var.c_str()); v != nullptr && *v) out.push_back(v);
  const nlohmann::json shown = spec.ToPlanJson()["command"];
  for (size_t i = 0; i < spec.command.size() && i < shown.size(); ++i)
    if (shown[i] != spec.command[i]) {
      const std::string& a = spec.command[i];
      const size_t eq = a.rfind("--", 0) == 0 ? a.find('=') : std::string::npos;
      out.push_back(eq == std::string::npos ? a : a.substr(eq + 1));
    }
  return out;
}

std::string Redact(std::string text, const std::vector<std::string>& secrets) {
  for (const std::string& secret : secrets) {
    if (secret.size() < 4) continue;  // too short to find without masking words
    for (size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at + 11))
      text.replace(at, secret.size(), "(sensitive)");
  }
  return text;
}

std::string FillPlaceholders(const std::string& s,
                             const std::map<std::string, std::string>& values) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '{') {
      size_t close = s.find('}', i + 1);
      if (close != std::string::npos) {
        auto it = values.find(s.substr(i + 1, close - i - 1));
        if (it != values.end()) {
          out += it->second;
          i = close + 1;
          continue;
        }
      }
    }
    out += s[i++];
  }
  return out;
}

Result<ContainerSpec> RenderContainerSpec(const Manifest& m, const std::string& name,
                                          const std::string& node) {
  using R = Result<ContainerSpec>;
  auto d = m.deployments.find(name);
  if (d == m.deployments.end()) return R::Error("no deployment '" + name + "' in the manifests");
  auto n = m.nodes.find(node);
  if (n == m.nodes.end()) return R::Error("no node '" + node + "' in the manifests");
  const DeploymentSpec& dep = d->second;
  auto img = m.images.find(dep.image);
  if (img == m.images.end())
    return R::Error("deployment '" + name + "': no image '" + dep.image + "' in the manifests");

  ContainerSpec s;
  s.deployment = name;
  s.node = node;
  s.container = ContainerName(name);
  s.cli = n->second.container_cli;
  s.image = dep.image;
  s.image_ref = img->second.ref;
  if (!dep.model.empty()) {
    auto mod = m.models.find(dep.model);
    if (mod == m.models.end())
      return R::Error("deployment '" + name + "': no model '" + dep.model + "' in the manifests");
    s.model = dep.model;
    s.model_repo = mod->second.repo;
    s.model_revision = mod->second.revision;
    Result<HubLocation> loc = ModelLocationOnNode(m, dep.model, node);
    if (!loc.ok()) return loc.status();
    s.model_cache = loc->cache;
  }
  s.port = dep.port;
  s.health_path = dep.health.path;
  s.health_timeout_s = dep.health.timeout_s;

  const Recipe& r = dep.recipe;
  // Where the container sees the model: kModelRoot, or where the recipe
  // mounts "{model_path}" (the snapshot folder): that folder's files are
  // relative symlinks into ../../blobs, which dangle in a container, so the
  // mount becomes the per-file binds at its container path instead.
  s.model_root = kModelRoot;
  const auto at = std::find(dep.nodes.begin(), dep.nodes.end(), node);
  if (at == dep.nodes.end())
    return R::Error("deployment '" + name + "' does not list node " + node);
  // One engine across the nodes only when the recipe says so (it uses
  // {rank}, {nnodes} or {head}); otherwise every node runs a replica.
  if (IsGroupRecipe(dep.recipe)) {
    s.rank = static_cast<int>(at - dep.nodes.begin());
    s.nnodes = static_cast<int>(dep.nodes.size());
  }
  auto head = m.nodes.find(dep.nodes[0]);
  std::map<std::string, std::string> in_container = {
      {"port", std::to_string(dep.port)},
      {"host", n->second.address},
      {"node", node},
      {"rank", std::to_string(s.rank)},
      {"nnodes", std::to_string(s.nnodes)},
      {"head", head == m.nodes.end() ? dep.nodes[0] : head->second.address}};
  for (const RecipeMount& mount : r.extra_mounts)
    if (mount.host == "{model_path}" || mount.host == "{model_path}/")
      s.model_root = FillPlaceholders(mount.container, in_container);
  in_container["model_path"] = s.model_root;
  // On the host side of a mount {model_path} is the snapshot folder, which
  // only the node can spell (its home, its cache): kept for the step.
  std::map<std::string, std::string> on_host = in_container;
  on_host.erase("model_path");

  // Serving engines listen on the node's network: rootless containers have
  // no other network on these nodes, and {port} is then the node's port.
  s.options.push_back("--network=host");
  for (const std::string& dev : r.devices) {
    s.options.push_back("--device");
    s.options.push_back(FillPlaceholders(dev, in_container));
  }
  if (!r.memory_limit.empty()) {
    // --memory-swap equal to --memory: no swap, the log's cgroup guard.
    s.options.push_back("--memory=" + r.memory_limit);
    s.options.push_back("--memory-swap=" + r.memory_limit);
  }
  if (!r.cpus.empty()) s.options.push_back("--cpus=" + r.cpus);
  if (!r.shm_size.empty()) s.options.push_back("--shm-size=" + r.shm_size);
  for (std::string& o : GpuRunOptions(s.cli, r)) s.options.push_back(std::move(o));
  s.gpus = GpuRequestText(r);
  for (const RecipeMount& mount : r.extra_mounts) {
    if (mount.host == "{model_path}" || mount.host == "{model_path}/") continue;  // model_root
    s.options.push_back("--volume");
    s.options.push_back(FillPlaceholders(mount.host, on_host) + ":" +
                        FillPlaceholders(mount.container, in_container) +
                        (mount.read_only ? ":ro" : ""));
  }
  // The two-positional-model trap is refused by the recipe lint: a
  // non-empty `model` is the one positional model argument.
  if (!r.model.empty()) s.command.push_back(FillPlaceholders(r.model, in_container));
  for (const std::string& a : r.args) s.command.push_back(FillPlaceholders(a, in_container));
  for (const auto& [k, v] : r.env) s.env[k] = FillPlaceholders(v, in_container);
  s.env_from = r.env_from;
  for (size_t i = 0; i < s.command.size(); ++i) {
    std::string bind;
    if (s.command[i] == "--host" && i + 1 < s.command.size()) bind = s.command[i + 1];
    if (s.command[i].rfind("--host=", 0) == 0) bind = s.command[i].substr(7);
    if (bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "[::]") continue;
    s.health_host = bind.find(':') != std::string::npos && bind[0] != '[' ? "[" + bind + "]" : bind;
  }

  // What runs, and nothing else: how long to wait for it or where its
  // health is read are not part of it (changing them restarts nothing).
  nlohmann::json all = {{"container", s.container},
                        {"cli", s.cli},
                        {"image_ref", s.image_ref},
                        {"model_repo", s.model_repo},
                        {"model_revision", s.model_revision},
                        {"model_cache", s.model_cache},
                        {"model_root", s.model_root},
                        {"port", s.port},
                        {"rank", s.rank},
                        {"nnodes", s.nnodes},
                        {"options", s.options},
                        {"command", s.command},
                        {"env", s.env},
                        {"env_from", s.env_from}};
  s.hash = HashBlobData(BlobHashKind::kSha256, all.dump());
  return s;
}

std::string ContainerSpec::HealthUrl() const {
  if (rank > 0) return "";
  return "http://" + health_host + ":" + std::to_string(port) + health_path;
}

nlohmann::json ContainerSpec::ToPlanJson() const {
  nlohmann::json env_shown = nlohmann::json::object();
  for (const auto& [k, v] : env) env_shown[k] = IsSensitive(k, v) ? "(sensitive)" : v;
  for (const auto& [k, var] : env_from) env_shown[k] = "(from $" + var + " on the controller)";
  // An argument that looks like a token, or follows a flag named for one
  // (--api-key KEY, --hf-token=...), is not shown either.
  nlohmann::json command_shown = nlohmann::json::array();
  bool after_secret_flag = false;
  for (const std::string& a : command) {
    std::string flag = a.rfind("--", 0) == 0 ? a.substr(2, a.find('=') - 2) : "";
    for (char& c : flag)
      if (c == '-') c = '_';
    const bool secret_flag = !flag.empty() && IsSecretKeyName(flag);
    const bool inline_value = secret_flag && a.find('=') != std::string::npos;
    command_shown.push_back(after_secret_flag || HasTokenPrefix(a) ? "(sensitive)"
                            : inline_value ? a.substr(0, a.find('=') + 1) + "(sensitive)"
                                           : a);
    after_secret_flag = secret_flag && !inline_value;
  }
  nlohmann::json j = {
      {"container", container},
      {"image", image_ref},
      {"model",
       model.empty() ? nlohmann::json() : nlohmann::json(model_repo + "@" + model_revision)},
      {"port", port},
      {"health", HealthUrl()},
      {"rank", nnodes > 1 ? nlohmann::json(std::to_string(rank) + " of " + std::to_string(nnodes))
                          : nlohmann::json()},
      {"options", options},
      {"command", command_shown},
      {"env", env_shown},
      {"env_from", env_from},
      {"spec", hash}};
  if (!gpus.empty()) j["gpus"] = gpus;
  return j;
}

std::vector<std::string> SpecDifferences(const nlohmann::json& before,
                                         const nlohmann::json& after) {
  std::vector<std::string> out;
  auto str = [](const nlohmann::json& v) {
    return v.is_string() ? v.get<std::string>() : v.is_null() ? std::string("none") : v.dump();
  };
  for (const char* key : {"image", "model", "port", "health"}) {
    const nlohmann::json b = before.value(key, nlohmann::json());
    const nlohmann::json a = after.value(key, nlohmann::json());
    if (b != a) out.push_back(std::string(key) + ": " + str(b) + " -> " + str(a));
  }
  if (before.value("command", nlohmann::json()) != after.value("command", nlohmann::json()))
    out.push_back("command changed");
  if (before.value("options", nlohmann::json()) != after.value("options", nlohmann::json()))
    out.push_back("run options changed (devices, limits or mounts)");
  const nlohmann::json eb = before.value("env", nlohmann::json::object());
  const nlohmann::json ea = after.value("env", nlohmann::json::object());
  std::set<std::string> keys;
  for (auto it = eb.begin(); it != eb.end(); ++it) keys.insert(it.key());
  for (auto it = ea.begin(); it != ea.end(); ++it) keys.insert(it.key());
  std::string changed;
  for (const std::string& k : keys)
    if (eb.value(k, nlohmann::json()) != ea.value(k, nlohmann::json()))
      changed += (changed.empty() ? "" : ", ") + k;
  if (!changed.empty()) out.push_back("env changed (" + changed + ")");
  // A secret value changed: only the hash tells.
  if (out.empty() && before.value("spec", "") != after.value("spec", ""))
    out.push_back("spec changed (a value not shown, e.g. a sensitive env value)");
  return out;
}

}  // namespace fleet
