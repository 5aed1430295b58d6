#include "providers/shared/display_ram_json.h"

#include "src/json_number.h"

namespace fleet {
namespace {

nlohmann::json OrNull(const std::optional<uint64_t>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}

}  // namespace

void to_json(nlohmann::json& j, const DisplayRamWant& v) {
  j = {{"mode", v.mode}, {"wanted_by", v.wanted_by}};
}

void from_json(const nlohmann::json& j, DisplayRamWant& v) {
  v.mode = j.value("mode", kModeDefault);
  v.wanted_by = j.value("wanted_by", std::vector<std::string>());
}

void to_json(nlohmann::json& j, const ModuleValues& v) {
  j = {{"loaded", v.loaded}, {"modeset", v.modeset}, {"fbdev", v.fbdev}};
}

void from_json(const nlohmann::json& j, ModuleValues& v) {
  v.loaded = j.value("loaded", true);
  v.modeset = j.value("modeset", "N");
  v.fbdev = j.value("fbdev", "Y");
}

void to_json(nlohmann::json& j, const DisplayRamFound& v) {
  j = {{"loaded", v.loaded}, {"modeset", v.modeset}, {"fbdev", v.fbdev},
       {"card0", v.card0},   {"mode", v.mode},       {"serving", v.serving}};
  if (!v.engine_error.empty()) j["engine_error"] = v.engine_error;
  if (v.sudo_checked)
    j["sudo"] = {{"allowed", v.sudo_allowed}, {"modprobe", v.modprobe_path}, {"user", v.sudo_user}};
  if (!v.drm_holders.empty())
    j["drm_holders"] = {{"processes", v.drm_holders},
                        {"units", v.drm_holder_units},
                        {"units_sudo_ok", v.units_sudo_ok},
                        {"systemctl", v.systemctl_path}};
}

void from_json(const nlohmann::json& j, DisplayRamFound& v) {
  v.loaded = j.value("loaded", false);
  v.modeset = j.value("modeset", "");
  v.fbdev = j.value("fbdev", "");
  v.card0 = j.value("card0", false);
  v.mode = j.value("mode", kModeDefault);
  v.serving = j.value("serving", std::vector<std::string>());
  v.engine_error = j.value("engine_error", "");
  if (auto sudo = j.find("sudo"); sudo != j.end() && sudo->is_object()) {
    v.sudo_checked = true;
    v.sudo_allowed = sudo->value("allowed", std::vector<std::string>());
    v.modprobe_path = sudo->value("modprobe", "");
    v.sudo_user = sudo->value("user", "");
  }
  if (auto h = j.find("drm_holders"); h != j.end() && h->is_object()) {
    v.drm_holders = h->value("processes", std::vector<std::string>());
    v.drm_holder_units = h->value("units", std::vector<std::string>());
    v.units_sudo_ok = h->value("units_sudo_ok", std::vector<std::string>());
    v.systemctl_path = h->value("systemctl", "");
  }
}

void to_json(nlohmann::json& j, const DisplayRamRecord& v) {
  j = {{"mode", v.mode}, {"boot_id", v.boot_id}};
  if (v.original) j["original"] = *v.original;
  if (v.reloaded) j["gpu_free_before_bytes"] = OrNull(v.gpu_free_before_bytes);
  if (v.read_back) {
    j["modeset"] = v.modeset;
    j["fbdev"] = v.fbdev;
    j["card0"] = v.card0;
    j["gpu_free_after_bytes"] = OrNull(v.gpu_free_after_bytes);
  }
  if (!v.stopped_units.empty()) j["stopped_units"] = v.stopped_units;
}

void from_json(const nlohmann::json& j, DisplayRamRecord& v) {
  v = DisplayRamRecord();
  if (!j.is_object()) return;
  v.mode = j.value("mode", "");
  if (auto it = j.find("original"); it != j.end()) v.original = it->get<ModuleValues>();
  v.boot_id = j.value("boot_id", "");
  v.reloaded = j.contains("gpu_free_before_bytes");
  v.gpu_free_before_bytes = OptionalInteger<uint64_t>(j, "gpu_free_before_bytes");
  v.read_back = j.contains("modeset");
  v.modeset = j.value("modeset", "");
  v.fbdev = j.value("fbdev", "");
  v.card0 = j.value("card0", false);
  v.stopped_units = j.value("stopped_units", std::vector<std::string>());
  v.gpu_free_after_bytes = OptionalInteger<uint64_t>(j, "gpu_free_after_bytes");
}

void to_json(nlohmann::json& j, const DisplayRamStep& v) {
  j = {{"op", v.op}};
  if (v.original) j["original"] = *v.original;
  if (!v.stop_containers.empty()) j["stop_containers"] = v.stop_containers;
  if (v.power_off_follows) j["power_off_follows"] = true;
  if (!v.stop_units.empty()) j["stop_units"] = v.stop_units;
  if (!v.start_units.empty()) j["start_units"] = v.start_units;
}

bool PowersNodeOff(const PlanChange& c) {
  return c.type == "node" && c.action != Action::kNoop && c.after.is_object() &&
         c.after.value("power", "") == "off";
}

void from_json(const nlohmann::json& j, DisplayRamStep& v) {
  v.op = j.value("op", "");
  if (auto it = j.find("original"); it != j.end()) v.original = it->get<ModuleValues>();
  v.stop_containers = j.value("stop_containers", std::vector<std::string>());
  v.power_off_follows = j.value("power_off_follows", false);
  v.stop_units = j.value("stop_units", std::vector<std::string>());
  v.start_units = j.value("start_units", std::vector<std::string>());
}

nlohmann::json ModuleAfterJson(const std::string& mode, const ModuleValues& values) {
  nlohmann::json j = values;
  j["mode"] = mode;
  return j;
}

nlohmann::json UnlockedAfterJson() {
  return {{"mode", kModeUnlocked}, {"modeset", "Y"}, {"fbdev", "N"}};
}

std::vector<std::string> ContainersStoppedBy(const PlanChange& c) {
  return c.detail.get<DisplayRamStep>().stop_containers;
}

}  // namespace fleet
