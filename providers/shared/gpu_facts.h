// GPU facts of a node and the memory budget check built on them.
//
// The facts come from fleet-probe (src/probe/fleet_probe.cc, which asks the
// CUDA driver) or, when that is not installed, from nvidia-smi. On unified-
// memory GPUs (DGX Spark / GB10) nvidia-smi reports memory as [N/A]; such a
// figure is unknown here (std::nullopt), never zero, and the budget check
// answers "unknown" for it rather than yes or no.
#ifndef FLEET_PROVIDERS_SHARED_GPU_FACTS_H_
#define FLEET_PROVIDERS_SHARED_GPU_FACTS_H_

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fleet {

struct GpuProcess {
  uint32_t pid = 0;
  std::optional<uint64_t> used_bytes;  // NVML gives none on unified memory

  friend bool operator==(const GpuProcess&, const GpuProcess&) = default;
};

struct GpuInfo {
  int index = 0;                   // PCI bus order, as nvidia-smi and `docker --gpus` count
  std::string name;                // "NVIDIA GB10"; empty when unknown
  std::string uuid;                // "GPU-…"; empty when unknown
  std::string compute_capability;  // "12.1"; empty when unknown
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_free_bytes;
  // Who gave memory_free_bytes: "cuMemGetInfo" (a CUDA context), "nvml",
  // "host MemFree" (unified memory, no context: what cuMemGetInfo would
  // say), "host MemAvailable" (an older fleet-probe without a context: page
  // cache counted as free), "nvidia-smi"; "" when unknown (and from a
  // fleet-probe older than the field).
  std::string memory_free_source;
  // Unified memory: what dropping the page cache would add to the free
  // figure (the host's MemAvailable - MemFree). Unknown on discrete GPUs
  // and from an older fleet-probe.
  std::optional<uint64_t> memory_reclaimable_bytes;
  // Shares the host's RAM (CUDA's INTEGRATED attribute). false when unknown:
  // nvidia-smi cannot tell.
  bool unified_memory = false;
  std::vector<GpuProcess> processes;
  bool processes_known = false;     // false: `processes` is empty, not "none"
  std::vector<std::string> errors;  // why a figure above is unknown

  friend bool operator==(const GpuInfo&, const GpuInfo&) = default;
};

struct GpuFacts {
  std::string source;  // "fleet-probe" | "nvidia-smi" | "none"
  std::vector<GpuInfo> gpus;
  std::optional<uint64_t> host_mem_total_bytes;
  std::optional<uint64_t> host_mem_available_bytes;  // /proc/meminfo
  std::string driver_version;  // NVIDIA driver ("580.95.05"); empty if unknown
  // Whether fleet-probe created a CUDA context for these figures, and why
  // (or why not: "fleet serve fleet-x runs on the node", see gpu_context.h).
  bool cuda_context = false;
  std::string context_decision;
  // Whether the node's sudo runs the page cache drop without a password
  // (`sudo -n -l`, asked by the node probe on unified-memory nodes):
  // "allowed", "refused", "no-sudo"; "" when not asked. The command as sudo
  // sees it ("/usr/sbin/sysctl vm.drop_caches=3") and the SSH user, for the
  // sudoers line a refusal names.
  std::string drop_caches_sudo;
  std::string drop_caches_command;
  std::string drop_caches_user;
  // For the operator, e.g. why there is no GPU or why memory is unknown:
  // "memory unknown: nvidia-smi reports [N/A] (unified memory?); install
  // fleet-probe".
  std::string note;
  // fleet-probe's own run ("elapsed_ns" of its document); unset for an older
  // probe and for nvidia-smi. The plan's timing, not a fact of the node: not
  // in GpuFactsToJson.
  std::optional<uint64_t> probe_elapsed_ns;

  friend bool operator==(const GpuFacts&, const GpuFacts&) = default;
};

// Parses the JSON document fleet-probe prints (probe_version 1). On success
// fills *out (source "fleet-probe") and returns true; on malformed input
// returns false with *error saying where, and leaves *out untouched.
bool ParseProbeJson(std::string_view text, GpuFacts* out, std::string* error);

// Parses the output of
//   nvidia-smi
//   --query-gpu=index,name,uuid,memory.total,memory.free,driver_version
//              --format=csv,noheader,nounits
// (memory in MiB). A bracketed value such as [N/A] or [Not Supported] makes
// that figure unknown. Empty output or "No devices were found" means no GPU.
// Same success/failure contract as ParseProbeJson (source "nvidia-smi").
bool ParseNvidiaSmiCsv(std::string_view csv_noheader_output, GpuFacts* out, std::string* error);

// GpuFacts as JSON for the state file and saved plans; unknown figures are
// null. GpuFactsFromJson(GpuFactsToJson(f)) == f. On failure returns false
// with *error (when given) saying where, and leaves *out untouched.
nlohmann::json GpuFactsToJson(const GpuFacts& facts);
bool GpuFactsFromJson(const nlohmann::json& json, GpuFacts* out, std::string* error = nullptr);

// One line for `fleet status` / `fleet probe`, e.g. "GPU 0 (NVIDIA GB10,
// unified) 96.3 GiB free of 119.7 GiB, host MemAvailable 110.4 GiB"; says
// "unknown" with the reason where memory is unknown, or why there is no GPU.
std::string DescribeGpuMemory(const GpuFacts& facts);

struct BudgetAnswer {
  bool fits = false;
  bool known = false;  // false: memory is unknown, so neither yes nor no
  // Does not fit as free memory stands, but fits on a unified-memory GPU
  // once the page cache is dropped (free + reclaimable): the start must
  // drop it first (DropCachesArgv), or the engine's own check refuses.
  bool fits_after_drop = false;
  // The arithmetic in GiB, e.g. "needs 120.0 GiB, GPU 0 (NVIDIA GB10,
  // unified) has 96.3 GiB free of 119.7 GiB: short by 23.7 GiB; ...".
  std::string explanation;
};

// Does `need_bytes` of GPU memory fit on GPU `gpu_index` (-1: on any one GPU
// of the node, the one with the most free memory)? Decides on each GPU's free
// memory as the CUDA driver reports it; on unified memory a need that fits
// free + reclaimable page cache gives fits=false, fits_after_drop=true, and
// the explanation gives both figures. Unknown memory gives known=false and
// fits=false, with the reason.
BudgetAnswer CheckMemoryBudget(const GpuFacts& facts, uint64_t need_bytes, int gpu_index = -1);

// The page cache drop fleet runs (after `sync`) with `sudo -n` before a
// start that fits only once the cache is dropped: the same as `echo 3 >
// /proc/sys/vm/drop_caches`, but one exact command a sudoers line can allow
// without allowing a shell.
std::vector<std::string> DropCachesArgv();

// The sh fragment of the node probe that asks the node's sudo (`sudo -n -l`:
// it runs nothing) about DropCachesArgv, on a unified-memory node only (the
// fleet-probe JSON in $gpj says "unified_memory":true), and prints
// drop_caches_sudo=allowed|refused|no-sudo, drop_caches_sudo_user=... and
// drop_caches_sudo_command=... lines.
std::string DropCachesSudoScript();

// Fills facts->drop_caches_* from the probe's key=value lines.
void ParseDropCachesSudo(const std::map<std::string, std::string>& kv, GpuFacts* facts);

// The plan error for a start that needs the page cache dropped on a node
// whose sudo would ask for a password, naming the sudoers line; "" when
// sudo allows it or was not asked.
std::string DropCachesSudoRefusal(const std::string& node, const GpuFacts& facts);

}  // namespace fleet

#endif  // FLEET_PROVIDERS_SHARED_GPU_FACTS_H_
