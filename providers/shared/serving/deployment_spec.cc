#include "providers/shared/serving/deployment_spec.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "manifests/recipe.h"
#include "manifests/secrets.h"
#include "providers/shared/blob_hash.h"
#include "providers/shared/model_location.h"
#include "providers/shared/serving/deployment_json.h"
#include "providers/shared/serving/gpu_request.h"
#include "providers/shared/serving/row_placeholder.h"

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
         RecipeUsesPlaceholder(recipe, "head") ||
         RecipeUsesPlaceholder(recipe, "head_fabric_addr") ||
         !RowPlaceholderTensors(recipe).empty();
}

std::vector<std::string> SecretValues(const ContainerSpec& spec) {
  std::vector<std::string> out;
  for (const auto& [k, v] : spec.env)
    if (IsSensitive(k, v) && !v.empty()) out.push_back(v);
  for (const auto& [k, var] : spec.env_from)
    if (const char* v = std::getenv(var.c_str()); v != nullptr && *v) out.push_back(v);
  const std::vector<std::string> shown = spec.Shown().command;
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

namespace {

using Placeholders = std::map<std::string, std::string>;

// The parts of `s` the manifests name directly: container, image, model,
// port and health.
Status FillFromManifest(const Manifest& m, const DeploymentSpec& dep, const std::string& name,
                        const std::string& node, ContainerSpec* s) {
  auto n = m.nodes.find(node);
  if (n == m.nodes.end()) return Status::Error("no node '" + node + "' in the manifests");
  auto img = m.images.find(dep.image);
  if (img == m.images.end())
    return Status::Error("deployment '" + name + "': no image '" + dep.image +
                         "' in the manifests");
  s->deployment = name;
  s->node = node;
  s->container = ContainerName(name);
  s->cli = n->second.container_cli;
  s->image = dep.image;
  s->image_ref = img->second.ref;
  if (!dep.model.empty()) {
    auto mod = m.models.find(dep.model);
    if (mod == m.models.end())
      return Status::Error("deployment '" + name + "': no model '" + dep.model +
                           "' in the manifests");
    s->model = dep.model;
    s->model_repo = mod->second.repo;
    s->model_revision = mod->second.revision;
    Result<HubLocation> loc = ModelLocationOnNode(m, dep.model, node);
    if (!loc.ok()) return loc.status();
    s->model_cache = loc->cache;
  }
  s->port = dep.port;
  s->health_path = dep.health.path;
  s->health_timeout_s = dep.health.timeout_s;
  return Status::OK();
}

// The node's place in the deployment ({rank}, {nnodes}) and the values of
// the placeholders as the container sees them; sets s->model_root.
Result<Placeholders> PlaceInGroup(const Manifest& m, const DeploymentSpec& dep,
                                  const std::string& name, const std::string& node,
                                  const FabricValues* fabric, const TensorRowCounts* rows,
                                  ContainerSpec* s) {
  // Where the container sees the model: kModelRoot, or where the recipe
  // mounts "{model_path}" (the snapshot folder): that folder's files are
  // relative symlinks into ../../blobs, which dangle in a container, so the
  // mount becomes the per-file binds at its container path instead.
  s->model_root = kModelRoot;
  const auto at = std::find(dep.nodes.begin(), dep.nodes.end(), node);
  if (at == dep.nodes.end())
    return Status::Error("deployment '" + name + "' does not list node " + node);
  // One engine across the nodes only when the recipe says so (it uses
  // {rank}, {nnodes} or {head}); otherwise every node runs a replica.
  if (IsGroupRecipe(dep.recipe)) {
    s->rank = static_cast<int>(at - dep.nodes.begin());
    s->nnodes = static_cast<int>(dep.nodes.size());
  }
  auto head = m.nodes.find(dep.nodes[0]);
  Placeholders in_container = {
      {"port", std::to_string(dep.port)},
      {"host", m.nodes.at(node).address},
      {"node", node},
      {"rank", std::to_string(s->rank)},
      {"nnodes", std::to_string(s->nnodes)},
      {"head", head == m.nodes.end() ? dep.nodes[0] : head->second.address}};
  if (fabric != nullptr) {
    s->fabric = *fabric;
    for (auto& [k, v] : FabricPlaceholders(*fabric)) in_container.insert_or_assign(k, v);
  }
  for (const RecipeMount& mount : dep.recipe.extra_mounts)
    if (mount.host == "{model_path}" || mount.host == "{model_path}/")
      s->model_root = FillPlaceholders(mount.container, in_container);
  in_container.insert_or_assign("model_path", s->model_root);
  if (rows != nullptr)
    for (auto& [k, v] : RowPlaceholderValues(*rows, s->rank, s->nnodes))
      in_container.insert_or_assign(k, v);
  return in_container;
}

// `run` options: host network, devices, limits, extra mounts.
void AddRunOptions(const Recipe& r, const Placeholders& in_container, ContainerSpec* s) {
  // On the host side of a mount {model_path} is the snapshot folder, which
  // only the node can spell (its home, its cache): kept for the step.
  Placeholders on_host = in_container;
  on_host.erase("model_path");
  // Serving engines listen on the node's network: rootless containers have
  // no other network on these nodes, and {port} is then the node's port.
  s->options.push_back("--network=host");
  for (const std::string& dev : r.devices) {
    s->options.push_back("--device");
    s->options.push_back(FillPlaceholders(dev, in_container));
  }
  if (!r.memory_limit.empty()) {
    // --memory-swap equal to --memory: no swap, the log's cgroup guard.
    s->options.push_back("--memory=" + r.memory_limit);
    s->options.push_back("--memory-swap=" + r.memory_limit);
  }
  if (!r.cpus.empty()) s->options.push_back("--cpus=" + r.cpus);
  if (!r.shm_size.empty()) s->options.push_back("--shm-size=" + r.shm_size);
  for (std::string& o : GpuRunOptions(s->cli, r)) s->options.push_back(std::move(o));
  s->gpus = GpuRequestText(r);
  for (const RecipeMount& mount : r.extra_mounts) {
    if (mount.host == "{model_path}" || mount.host == "{model_path}/") continue;  // model_root
    s->options.push_back("--volume");
    s->options.push_back(FillPlaceholders(mount.host, on_host) + ":" +
                         FillPlaceholders(mount.container, in_container) +
                         (mount.read_only ? ":ro" : ""));
  }
}

// The command (model and args), the env, and where the health URL is read
// (the address a `--host` argument binds the serve to).
void AddCommand(const Recipe& r, const Placeholders& in_container, bool fabric_env,
                ContainerSpec* s) {
  // The two-positional-model trap is refused by the recipe lint: a
  // non-empty `model` is the one positional model argument.
  if (!r.model.empty()) s->command.push_back(FillPlaceholders(r.model, in_container));
  for (const std::string& a : r.args) s->command.push_back(FillPlaceholders(a, in_container));
  for (const auto& [k, v] : r.env) s->env.insert_or_assign(k, FillPlaceholders(v, in_container));
  s->env_from = r.env_from;
  // fabric_env: what the playbooks export by hand; the recipe's own wins.
  if (fabric_env && s->fabric)
    for (auto& [k, v] : FabricEnv(*s->fabric))
      if (!s->env_from.count(k)) s->env.emplace(k, v);
  for (size_t i = 0; i < s->command.size(); ++i) {
    std::string bind;
    if (s->command[i] == "--host" && i + 1 < s->command.size()) bind = s->command[i + 1];
    if (s->command[i].rfind("--host=", 0) == 0) bind = s->command[i].substr(7);
    if (bind.empty() || bind == "0.0.0.0" || bind == "::" || bind == "[::]") continue;
    s->health_host =
        bind.find(':') != std::string::npos && bind[0] != '[' ? "[" + bind + "]" : bind;
  }
}

// What runs, and nothing else: how long to wait for it or where its health
// is read are not part of it (changing them restarts nothing).
std::string SpecHash(const ContainerSpec& s) {
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
  // Only when set: the hash of a serve that uses no fabric stays what it was.
  if (s.fabric) all.emplace("fabric", nlohmann::json(*s.fabric));
  return HashBlobData(BlobHashKind::kSha256, all.dump());
}

}  // namespace

Result<ContainerSpec> RenderContainerSpec(const Manifest& m, const std::string& name,
                                          const std::string& node, const FabricValues* fabric,
                                          const TensorRowCounts* rows) {
  auto d = m.deployments.find(name);
  if (d == m.deployments.end())
    return Result<ContainerSpec>::Error("no deployment '" + name + "' in the manifests");
  const DeploymentSpec& dep = d->second;
  ContainerSpec s;
  Status filled = FillFromManifest(m, dep, name, node, &s);
  if (!filled.ok()) return filled;
  if (rows != nullptr)
    for (const std::string& tensor : RowPlaceholderTensors(dep.recipe))
      if (!rows->count(tensor))
        return Result<ContainerSpec>::Error("deployment '" + name + "': model " + dep.model +
                                            " has no tensor '" + tensor + "' ({rows:" + tensor +
                                            "})");
  Result<Placeholders> in_container = PlaceInGroup(m, dep, name, node, fabric, rows, &s);
  if (!in_container.ok()) return in_container.status();
  AddRunOptions(dep.recipe, *in_container, &s);
  AddCommand(dep.recipe, *in_container, dep.fabric_env, &s);
  s.hash = SpecHash(s);
  return s;
}

std::string ContainerSpec::HealthUrl() const {
  if (rank > 0) return "";
  return "http://" + health_host + ":" + std::to_string(port) + health_path;
}

void SetHealthFromUrl(const std::string& url, ContainerSpec* spec) {
  const size_t host = std::string("http://").size();
  if (url.size() <= host) return;
  const size_t slash = url.find('/', host);
  const size_t colon = url.rfind(':', slash);
  if (colon != std::string::npos && colon >= host)
    spec->health_host = url.substr(host, colon - host);
  spec->health_path = slash == std::string::npos ? "/" : url.substr(slash);
}

ContainerShown ContainerSpec::Shown() const {
  ContainerShown shown;
  for (const auto& [k, v] : env)
    shown.env.insert_or_assign(k, IsSensitive(k, v) ? "(sensitive)" : v);
  for (const auto& [k, var] : env_from)
    shown.env.insert_or_assign(k, "(from $" + var + " on the controller)");
  // An argument that looks like a token, or follows a flag named for one
  // (--api-key KEY, --hf-token=...), is not shown either.

  bool after_secret_flag = false;
  for (const std::string& a : command) {
    std::string flag = a.rfind("--", 0) == 0 ? a.substr(2, a.find('=') - 2) : "";
    for (char& c : flag)
      if (c == '-') c = '_';
    const bool secret_flag = !flag.empty() && IsSecretKeyName(flag);
    const bool inline_value = secret_flag && a.find('=') != std::string::npos;
    shown.command.push_back(after_secret_flag || HasTokenPrefix(a) ? "(sensitive)"
                            : inline_value ? a.substr(0, a.find('=') + 1) + "(sensitive)"
                                           : a);
    after_secret_flag = secret_flag && !inline_value;
  }
  shown.container = container;
  shown.image = image_ref;
  if (!model.empty()) shown.model = model_repo + "@" + model_revision;
  shown.port = port;
  shown.health = HealthUrl();
  if (nnodes > 1) shown.rank = std::to_string(rank) + " of " + std::to_string(nnodes);
  shown.options = options;
  shown.env_from = env_from;
  shown.spec = hash;
  shown.gpus = gpus;
  shown.fabric = fabric;
  return shown;
}

std::vector<std::string> SpecDifferences(const ContainerShown& before,
                                         const ContainerShown& after) {
  std::vector<std::string> out;
  auto field = [&](const char* name, const std::string& b, const std::string& a) {
    if (b != a) out.push_back(std::string(name) + ": " + b + " -> " + a);
  };
  auto or_none = [](const std::optional<std::string>& v) { return v ? *v : "none"; };
  field("image", before.image, after.image);
  if (before.model != after.model)
    out.push_back("model: " + or_none(before.model) + " -> " + or_none(after.model));
  field("port", std::to_string(before.port), std::to_string(after.port));
  field("health", before.health, after.health);
  if (before.fabric != after.fabric)
    out.push_back("fabric: " + (before.fabric ? DescribeFabricValues(*before.fabric) : "none") +
                  " -> " + (after.fabric ? DescribeFabricValues(*after.fabric) : "none"));
  if (before.command != after.command) out.push_back("command changed");
  if (before.options != after.options)
    out.push_back("run options changed (devices, limits or mounts)");
  std::set<std::string> keys;
  for (const auto& [k, v] : before.env) keys.insert(k);
  for (const auto& [k, v] : after.env) keys.insert(k);
  std::string changed;
  for (const std::string& k : keys) {
    auto b = before.env.find(k), a = after.env.find(k);
    const bool same = (b == before.env.end()) == (a == after.env.end()) &&
                      (b == before.env.end() || b->second == a->second);
    if (!same) changed += (changed.empty() ? "" : ", ") + k;
  }
  if (!changed.empty()) out.push_back("env changed (" + changed + ")");
  // A secret value changed: only the hash tells.
  if (out.empty() && before.spec != after.spec)
    out.push_back("spec changed (a value not shown, e.g. a sensitive env value)");
  return out;
}

}  // namespace fleet
