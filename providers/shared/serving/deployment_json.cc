#include "providers/shared/serving/deployment_json.h"

#include "src/json_number.h"

namespace fleet {
namespace {

nlohmann::json OrNull(const std::optional<std::string>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

std::optional<std::string> StringOrNone(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

}  // namespace

void to_json(nlohmann::json& j, const FabricValues& v) {
  j = {{"address", v.address},     {"interface", v.interface},       {"hcas", v.hcas},
       {"gid_index", v.gid_index}, {"head_address", v.head_address}, {"subnet", v.subnet}};
}

void from_json(const nlohmann::json& j, FabricValues& v) {
  v.address = j.value("address", "");
  v.interface = j.value("interface", "");
  v.hcas = j.value("hcas", "");
  v.gid_index = IntegerOr(j, "gid_index", -1);
  v.head_address = j.value("head_address", "");
  v.subnet = j.value("subnet", "");
}

void to_json(nlohmann::json& j, const ContainerShown& v) {
  j = {{"container", v.container}, {"image", v.image},     {"model", OrNull(v.model)},
       {"port", v.port},           {"health", v.health},   {"rank", OrNull(v.rank)},
       {"options", v.options},     {"command", v.command}, {"env", v.env},
       {"env_from", v.env_from},   {"spec", v.spec}};
  if (!v.gpus.empty()) j["gpus"] = v.gpus;
  if (v.fabric) j["fabric"] = *v.fabric;
}

void from_json(const nlohmann::json& j, ContainerShown& v) {
  v.container = j.value("container", "");
  v.image = j.value("image", "");
  v.model = StringOrNone(j, "model");
  v.port = IntegerOr(j, "port", 0);
  v.health = j.value("health", "");
  v.rank = StringOrNone(j, "rank");
  v.options = j.value("options", std::vector<std::string>());
  v.command = j.value("command", std::vector<std::string>());
  v.env = j.value("env", std::map<std::string, std::string>());
  v.env_from = j.value("env_from", std::map<std::string, std::string>());
  v.spec = j.value("spec", "");
  v.gpus = j.value("gpus", "");
  if (auto f = j.find("fabric"); f != j.end() && f->is_object()) v.fabric = f->get<FabricValues>();
}

void to_json(nlohmann::json& j, const DeploymentWant& v) {
  j = v.shown;
  j["cli"] = v.cli;
  j["health_timeout_s"] = v.health_timeout_s;
  if (v.gpu_memory_bytes > 0) j["gpu_memory_bytes"] = v.gpu_memory_bytes;
  if (!v.rows.tensors.empty())
    j["rows"] = {{"tensors", v.rows.tensors},
                 {"model", v.rows.model},
                 {"cache", v.rows.location.cache},
                 {"repo", v.rows.location.repo},
                 {"revision", v.rows.location.revision}};
}

void from_json(const nlohmann::json& j, DeploymentWant& v) {
  v.shown = j.get<ContainerShown>();
  v.cli = j.value("cli", "");
  v.health_timeout_s = IntegerOr(j, "health_timeout_s", 1800);
  v.gpu_memory_bytes = IntegerOr(j, "gpu_memory_bytes", uint64_t{0});
  v.rows = RowSource{};
  if (auto it = j.find("rows"); it != j.end() && it->is_object()) {
    v.rows.tensors = it->value("tensors", std::vector<std::string>());
    v.rows.model = it->value("model", "");
    v.rows.location.cache = it->value("cache", "");
    v.rows.location.repo = it->value("repo", "");
    v.rows.location.revision = it->value("revision", "");
  }
}

void to_json(nlohmann::json& j, const DeploymentRecord& v) {
  j = v.want;
  j["container_id"] = v.container_id;
  j["image_id"] = v.image_id;
  if (v.heal && !v.heal->Empty()) j["heal"] = *v.heal;
}

void from_json(const nlohmann::json& j, DeploymentRecord& v) {
  v.want = j.get<DeploymentWant>();
  v.container_id = j.value("container_id", "");
  v.image_id = j.value("image_id", "");
  v.heal.reset();
  if (auto h = j.find("heal"); h != j.end() && h->is_object()) v.heal = h->get<HealLedger>();
}

void to_json(nlohmann::json& j, const DeploymentDetail& v) {
  j = nlohmann::json::object();
  if (!v.name.empty()) j["name"] = v.name;
  if (!v.container.empty()) {
    j["container"] = v.container;
    j["cli"] = v.cli;
  }
  if (v.drop_page_cache) j["drop_page_cache"] = true;
  if (v.keep_previous) j["keep_previous"] = true;
}

void from_json(const nlohmann::json& j, DeploymentDetail& v) {
  v.name = j.value("name", "");
  v.container = j.value("container", "");
  v.cli = j.value("cli", "");
  v.drop_page_cache = j.value("drop_page_cache", false);
  v.keep_previous = j.value("keep_previous", false);
}

void to_json(nlohmann::json& j, const ContainerProbe& v) {
  j = {{"cli_found", v.cli_found}, {"exists", v.exists},
       {"state", v.state},         {"exit_code", v.exit_code},
       {"spec", v.spec},           {"id", v.id},
       {"image", v.image},         {"age_s", v.age_s},
       {"health", v.health},       {"health_tool", v.health_tool},
       {"port_busy", v.port_busy}, {"serving", v.serving},
       {"error", v.error}};
  if (v.health_timed_out) j["health_timed_out"] = true;
  if (!v.gpu_support.empty()) j["gpu_support"] = v.gpu_support;
  if (!v.tensor_rows.empty()) j["tensor_rows"] = v.tensor_rows;
  if (v.rows_snapshot_missing) j["rows_snapshot_missing"] = true;
  if (!v.rows_error.empty()) j["rows_error"] = v.rows_error;
}

void from_json(const nlohmann::json& j, ContainerProbe& v) {
  v.cli_found = j.value("cli_found", true);
  v.exists = j.value("exists", false);
  v.state = j.value("state", "");
  v.exit_code = IntegerOr(j, "exit_code", 0);
  v.spec = j.value("spec", "");
  v.id = j.value("id", "");
  v.image = j.value("image", "");
  v.age_s = IntegerOr(j, "age_s", -1L);
  v.health = IntegerOr(j, "health", -1);
  v.health_tool = j.value("health_tool", "");
  v.health_timed_out = j.value("health_timed_out", false);
  v.port_busy = j.value("port_busy", false);
  v.serving = j.value("serving", std::vector<std::string>());
  v.error = j.value("error", "");
  v.gpu_support = j.value("gpu_support", std::map<std::string, std::string>());
  v.tensor_rows = j.value("tensor_rows", std::map<std::string, uint64_t>());
  v.rows_snapshot_missing = j.value("rows_snapshot_missing", false);
  v.rows_error = j.value("rows_error", "");
}

std::optional<DeploymentRecord> DeploymentRecordFrom(const nlohmann::json& j) {
  if (!j.is_object()) return std::nullopt;
  return j.get<DeploymentRecord>();
}

nlohmann::json ContainerProbe::ToJson() const { return *this; }

ContainerProbe ContainerProbe::FromJson(const nlohmann::json& j) { return j.get<ContainerProbe>(); }

nlohmann::json ContainerSpec::ToPlanJson() const { return Shown(); }

std::vector<std::string> SpecDifferences(const nlohmann::json& before,
                                         const nlohmann::json& after) {
  return SpecDifferences(before.get<ContainerShown>(), after.get<ContainerShown>());
}

}  // namespace fleet
