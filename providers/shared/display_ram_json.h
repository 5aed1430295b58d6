// The display_ram provider's typed attributes and their one pair of JSON
// conversions each: the boundary where the generic DesiredResource,
// ActualResource, PlanChange and ResourceRecord JSON is read and written.
// Nothing else in the provider reads an attribute by its key.
//
// Readers are lenient (a missing key is its default) so that state written
// by an older fleet still reads; writers produce exactly the keys the plan
// and state have always had.
#ifndef FLEET_PROVIDERS_SHARED_DISPLAY_RAM_JSON_H_
#define FLEET_PROVIDERS_SHARED_DISPLAY_RAM_JSON_H_

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "src/plan.h"

namespace fleet {

inline constexpr const char* kModeDefault = "default";
inline constexpr const char* kModeUnlocked = "unlocked";

// What a node's display RAM should be (DesiredResource::attributes).
struct DisplayRamWant {
  std::string mode = kModeDefault;     // kModeDefault or kModeUnlocked
  std::vector<std::string> wanted_by;  // "node dgx1", "deployment qwen38"
};

// The nvidia_drm values an unlock found, to be restored later.
struct ModuleValues {
  bool loaded = true;
  std::string modeset = "N";  // "Y" / "N" as the kernel prints them
  std::string fbdev = "Y";
};

// What the probe read: the module's values and the serving containers
// running (listed only when the module is not in the desired mode).
struct DisplayRamFound {
  bool loaded = false;
  std::string modeset;
  std::string fbdev;
  bool card0 = false;
  std::string mode = kModeDefault;  // kModeUnlocked when modeset=Y fbdev=N
  std::vector<std::string> serving;
  // The container CLI's output when it could not list the serves (the Docker
  // daemon down, the socket not the user's); "" when it could.
  std::string engine_error;
  // What the node's sudo allows without a password (`sudo -n -l`), asked
  // only when a reload is planned: the modprobe arguments allowed, the
  // node's modprobe and its SSH user, for the plan's error and its fix.
  bool sudo_checked = false;
  std::vector<std::string> sudo_allowed;  // "-r nvidia_drm", "nvidia_drm modeset=1 fbdev=0"
  std::string modprobe_path;
  std::string sudo_user;
  // What holds the DRM device (/dev/dri/card*) open, read where a reload
  // is planned: "gdm (pid 1234, unit gdm.service)" each. Only processes the
  // SSH user may read the descriptors of are seen. Key written only when
  // one was found.
  std::vector<std::string> drm_holders;
  std::vector<std::string> drm_holder_units;  // the units among them, once each
  // Those units whose `sudo -n systemctl stop UNIT` and `start UNIT` the
  // node's sudo allows, and the node's systemctl (display_manager: stop).
  std::vector<std::string> units_sudo_ok;
  std::string systemctl_path;
};

// What an unlock records: the original values (written before the reload,
// by a checkpoint), then what the reload gave and the GPU memory it freed.
struct DisplayRamRecord {
  std::string mode;  // "unlocking" (the checkpoint), kModeUnlocked
  std::optional<ModuleValues> original;
  std::string boot_id;
  // Set when this step reloaded the module: the free GPU memory before it
  // (none: unknown), and, once read back, the values after it.
  bool reloaded = false;
  std::optional<uint64_t> gpu_free_before_bytes;
  bool read_back = false;
  std::string modeset;
  std::string fbdev;
  bool card0 = false;
  std::optional<uint64_t> gpu_free_after_bytes;
  // display_manager: stop: the units the unlock stopped, started again
  // after the restore. Key written only when set.
  std::vector<std::string> stopped_units;
};

// PlanChange::detail of a display_ram step.
inline constexpr const char* kOpUnlock = "unlock";
inline constexpr const char* kOpRestore = "restore";
struct DisplayRamStep {
  std::string op;                            // kOpUnlock, kOpRestore
  std::optional<ModuleValues> original;      // restore: the values to put back
  std::vector<std::string> stop_containers;  // stopped before, started after
  // A destroy's restore on a node this plan then powers off: a restore
  // that fails does not stop that power off (the reboot brings nvidia_drm
  // back to its boot default: the unlock is per boot). Key written only
  // when set.
  bool power_off_follows = false;
  // display_manager: stop. Units stopped before the reload (those holding
  // the DRM device), and, for a restore, started again after it (with
  // those the unlock stopped). Keys written only when set.
  std::vector<std::string> stop_units;
  std::vector<std::string> start_units;
};

// True when `c` is a node change that powers its node off (read from its
// after, the node provider's record: {"power": "off"}).
bool PowersNodeOff(const PlanChange& c);

void to_json(nlohmann::json& j, const DisplayRamWant& v);
void from_json(const nlohmann::json& j, DisplayRamWant& v);
void to_json(nlohmann::json& j, const ModuleValues& v);
void from_json(const nlohmann::json& j, ModuleValues& v);
void to_json(nlohmann::json& j, const DisplayRamFound& v);
void from_json(const nlohmann::json& j, DisplayRamFound& v);
void to_json(nlohmann::json& j, const DisplayRamRecord& v);
void from_json(const nlohmann::json& j, DisplayRamRecord& v);
void to_json(nlohmann::json& j, const DisplayRamStep& v);
void from_json(const nlohmann::json& j, DisplayRamStep& v);

// A change's after: the module in `mode` with `values` (a restore).
nlohmann::json ModuleAfterJson(const std::string& mode, const ModuleValues& values);
// A change's after: unlocked, modeset=Y fbdev=N.
nlohmann::json UnlockedAfterJson();

// The serving containers a planned display_ram change stops before its
// module reload (their deployments start them again after it): what a
// deployment's diff reads of it.
std::vector<std::string> ContainersStoppedBy(const PlanChange& display_ram_change);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_DISPLAY_RAM_JSON_H_
