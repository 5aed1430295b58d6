/* A fake libnvidia-ml.so.1 for fleet-sim nodes: the NVML entry points that
 * fleet-probe (src/probe/fleet_probe.cc) dlsym()s, plus nvmlDeviceGetMemoryInfo
 * (what nvidia-smi's memory.total/free show), answering for the simulated GPU
 * of the node's fake GPU config (fake_gpu.h). nvml.h is installed nowhere
 * here, so its few types are declared as NVML 12 defines them.
 *
 * As on the real GB10: nvmlDeviceGetMemoryInfo is NOT_SUPPORTED (unified
 * memory), and the compute processes carry NVML_VALUE_NOT_AVAILABLE as their
 * memory ("PID:na" in the config). */
#include <stddef.h>
#include <string.h>

#include "fake_gpu.h"

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlProcessInfo_st {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
} nvmlProcessInfo_t;
typedef struct nvmlMemory_st {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
} nvmlMemory_t;

enum {
  kSuccess = 0,
  kUninitialized = 1,
  kInvalidArgument = 2,
  kNotSupported = 3,
  kNoPermission = 4,
  kAlreadyInitialized = 5,
  kNotFound = 6,
  kInsufficientSize = 7,
  kInsufficientPower = 8,
  kDriverNotLoaded = 9,
  kTimeout = 10,
  kGpuIsLost = 15,
  kUnknown = 999,
};
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_NO_INSTANCE 0xFFFFFFFFu

struct nvmlDevice_st {
  int index;
};

static struct fake_gpu g_gpu;
static int g_init_count;
static struct nvmlDevice_st g_device;

FAKE_GPU_API const char *nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kNoPermission:
      return "Insufficient Permissions";
    case kAlreadyInitialized:
      return "Already Initialized";
    case kNotFound:
      return "Not Found";
    case kInsufficientSize:
      return "Insufficient Size";
    case kInsufficientPower:
      return "Insufficient External Power";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    case kTimeout:
      return "Timeout";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

/* No config or profile=none: no driver (DRIVER_NOT_LOADED, what NVML says on
 * a machine without the kernel module); an invalid config: UNKNOWN. */
FAKE_GPU_API nvmlReturn_t nvmlInit_v2(void) {
  if (g_init_count > 0) {
    ++g_init_count;
    return kSuccess;
  }
  switch (fake_gpu_load(&g_gpu, "fake libnvidia-ml")) {
    case FAKE_GPU_OK:
      break;
    case FAKE_GPU_NONE:
      return kDriverNotLoaded;
    default:
      return kUnknown;
  }
  g_init_count = 1;
  return kSuccess;
}

FAKE_GPU_API nvmlReturn_t nvmlShutdown(void) {
  if (g_init_count == 0) return kUninitialized;
  --g_init_count;
  return kSuccess;
}

FAKE_GPU_API nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
  if (g_init_count == 0) return kUninitialized;
  if (version == NULL) return kInvalidArgument;
  const size_t n = strlen(g_gpu.driver_version);
  if (length < n + 1) return kInsufficientSize;
  memcpy(version, g_gpu.driver_version, n + 1);
  return kSuccess;
}

FAKE_GPU_API nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
  if (g_init_count == 0) return kUninitialized;
  if (uuid == NULL || device == NULL) return kInvalidArgument;
  if (strcmp(uuid, g_gpu.uuid_text) != 0) return kNotFound;
  g_device.index = 0;
  *device = &g_device;
  return kSuccess;
}

FAKE_GPU_API nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                  unsigned int *infoCount,
                                                                  nvmlProcessInfo_t *infos) {
  if (g_init_count == 0) return kUninitialized;
  if (device != &g_device || infoCount == NULL) return kInvalidArgument;
  if (!g_gpu.processes_supported) return kNotSupported;
  const unsigned int n = (unsigned int)g_gpu.process_count;
  if (*infoCount < n) {
    *infoCount = n;
    return kInsufficientSize;
  }
  if (n > 0 && infos == NULL) return kInvalidArgument;
  for (unsigned int i = 0; i < n; ++i) {
    const struct fake_gpu_process *p = &g_gpu.processes[i];
    infos[i].pid = p->pid;
    infos[i].usedGpuMemory = p->used_known ? p->used_bytes : NVML_VALUE_NOT_AVAILABLE;
    infos[i].gpuInstanceId = NVML_NO_INSTANCE;
    infos[i].computeInstanceId = NVML_NO_INSTANCE;
  }
  *infoCount = n;
  return kSuccess;
}

/* Not used by fleet-probe: what nvidia-smi's memory.total/free read. */
FAKE_GPU_API nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
  if (g_init_count == 0) return kUninitialized;
  if (device != &g_device || memory == NULL) return kInvalidArgument;
  if (!g_gpu.nvml_memory_supported) return kNotSupported;
  memory->total = g_gpu.total_bytes;
  memory->free = fake_gpu_free_now(&g_gpu);
  memory->used = memory->total - memory->free;
  return kSuccess;
}
