/* The simulated GPU that the fake libcuda.so.1 and libnvidia-ml.so.1 of
 * fleet-sim describe (tests/sim/README.md, "Simulated GPU"). Both libraries
 * read the same node-side config file, so CUDA, NVML and the nvidia-smi
 * stand-in tell the same story. Internal to the two libraries: nothing here
 * is exported. */
#ifndef FLEET_TESTS_SIM_FAKE_GPU_FAKE_GPU_H_
#define FLEET_TESTS_SIM_FAKE_GPU_FAKE_GPU_H_

#include <stddef.h>

#define FAKE_GPU_DEFAULT_CONF "/srv/sim/fake-gpu.conf"
#define FAKE_GPU_MAX_PROCESSES 64

/* The exported driver entry points; everything else stays hidden. */
#define FAKE_GPU_API __attribute__((visibility("default")))

struct fake_gpu_process {
  unsigned int pid;
  int used_known; /* 0: NVML_VALUE_NOT_AVAILABLE (unified memory) */
  unsigned long long used_bytes;
};

struct fake_gpu {
  char profile[16];
  char name[96];
  unsigned char uuid[16];
  char uuid_text[48]; /* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" */
  int cc_major, cc_minor;
  int integrated;
  int multiprocessors;
  unsigned long long total_bytes;
  unsigned long long free_bytes; /* with the display holding its memory */
  unsigned long long unlock_gain_bytes;
  /* Integrated GPUs: the part of free_bytes that is the host's page cache.
   * GB10's cuMemGetInfo counts it as used (the kernel gives it back only
   * under pressure or to drop_caches), so the fake's does too; NVML has no
   * figure on unified memory. A node's /proc/meminfo that agrees has
   * MemFree = free - page_cache_bytes and MemAvailable = free. */
  unsigned long long page_cache_bytes;
  int nvml_memory_supported;
  int processes_supported;
  int process_count;
  struct fake_gpu_process processes[FAKE_GPU_MAX_PROCESSES];
  char driver_version[32]; /* NVML's, e.g. 580.95.05 */
  int cuda_version;        /* cuDriverGetVersion's, e.g. 13000 */
  char sysfs[256];         /* <sysfs>/module/nvidia_drm/parameters */
  int cu_init_error;       /* cuInit returns this when non-zero */
  /* When set, every CUDA context created (a primary context retained) is
   * appended there as a line "pid=<pid> cuDevicePrimaryCtxRetain device=0":
   * the record that a probe did or did not create one under a serve. */
  char context_log[256];
};

enum fake_gpu_load {
  FAKE_GPU_OK = 0,
  FAKE_GPU_NONE = 1,    /* no config file, or profile=none: no GPU */
  FAKE_GPU_INVALID = 2, /* the config is wrong: said on stderr */
};

/* Reads the config named by $FLEET_FAKE_GPU (default FAKE_GPU_DEFAULT_CONF).
 * `who` prefixes messages on stderr ("fake libcuda"). */
enum fake_gpu_load fake_gpu_load(struct fake_gpu *gpu, const char *who)
    __attribute__((visibility("hidden")));

/* Free memory now: free_bytes, plus unlock_gain_bytes while the display does
 * not hold its memory (nvidia_drm loaded with modeset=Y fbdev=N, or not loaded
 * at all), at most total_bytes. Read from sysfs at every call. */
unsigned long long fake_gpu_free_now(const struct fake_gpu *gpu)
    __attribute__((visibility("hidden")));

/* What cuMemGetInfo reports free now: fake_gpu_free_now, less
 * page_cache_bytes on an integrated GPU (never below 0). */
unsigned long long fake_gpu_cuda_free_now(const struct fake_gpu *gpu)
    __attribute__((visibility("hidden")));

#endif /* FLEET_TESTS_SIM_FAKE_GPU_FAKE_GPU_H_ */
