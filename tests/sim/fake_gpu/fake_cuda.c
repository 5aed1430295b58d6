/* A fake libcuda.so.1 for fleet-sim nodes: the CUDA driver API entry points
 * that fleet-probe (src/probe/fleet_probe.cc) dlsym()s, answering for one
 * simulated GPU described by the node's fake GPU config (fake_gpu.h). Built
 * with cuda.h when the toolkit is installed, so that every definition is
 * checked against the real prototype.
 *
 * Like the real driver: cuDriverGetVersion and cuGetError* work before
 * cuInit, everything else returns CUDA_ERROR_NOT_INITIALIZED until cuInit
 * succeeded; cuMemGetInfo needs a current context (CUDA_ERROR_INVALID_CONTEXT
 * without one), which fleet-probe gets by retaining the primary context. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fake_gpu.h"

#ifdef FAKE_GPU_HAVE_CUDA_H
#include <cuda.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef struct CUctx_st *CUcontext;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;
#endif

enum {
  kSuccess = 0,
  kInvalidValue = 1,
  kOutOfMemory = 2,
  kNotInitialized = 3,
  kDeinitialized = 4,
  kNoDevice = 100,
  kInvalidDevice = 101,
  kInvalidContext = 201,
  kOperatingSystem = 304,
  kNotFound = 500,
  kNotSupported = 801,
  kUnknown = 999,
};

struct CUctx_st {
  int device;
};

static struct fake_gpu g_gpu;
static int g_loaded; /* the config was read (once per process) */
static enum fake_gpu_load g_load;
static int g_initialized; /* cuInit succeeded */
static struct CUctx_st g_primary_ctx;
static int g_primary_refs;
static __thread CUcontext t_current;

struct error_text {
  int code;
  const char *name;
  const char *text;
};

/* The driver's own names and descriptions (cuGetErrorName/String). */
static const struct error_text kErrors[] = {
    {kSuccess, "CUDA_SUCCESS", "no error"},
    {kInvalidValue, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {kOutOfMemory, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {kNotInitialized, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {kDeinitialized, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {kNoDevice, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {kInvalidDevice, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {kInvalidContext, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {kOperatingSystem, "CUDA_ERROR_OPERATING_SYSTEM",
     "OS call failed or operation not supported on this OS"},
    {kNotFound, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {kNotSupported, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {kUnknown, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

static const struct error_text *find_error(CUresult rc) {
  for (size_t i = 0; i < sizeof kErrors / sizeof kErrors[0]; ++i)
    if (kErrors[i].code == (int)rc) return &kErrors[i];
  return NULL;
}

static CUresult check_device(CUdevice dev) {
  if (!g_initialized) return (CUresult)kNotInitialized;
  return dev == 0 ? (CUresult)kSuccess : (CUresult)kInvalidDevice;
}

FAKE_GPU_API CUresult cuGetErrorName(CUresult error, const char **pStr) {
  if (pStr == NULL) return (CUresult)kInvalidValue;
  const struct error_text *e = find_error(error);
  *pStr = e != NULL ? e->name : NULL;
  return e != NULL ? (CUresult)kSuccess : (CUresult)kInvalidValue;
}

FAKE_GPU_API CUresult cuGetErrorString(CUresult error, const char **pStr) {
  if (pStr == NULL) return (CUresult)kInvalidValue;
  const struct error_text *e = find_error(error);
  *pStr = e != NULL ? e->text : NULL;
  return e != NULL ? (CUresult)kSuccess : (CUresult)kInvalidValue;
}

static void load_once(void) {
  if (g_loaded) return;
  g_loaded = 1;
  g_load = fake_gpu_load(&g_gpu, "fake libcuda");
}

/* A config that names no GPU is a driver without a GPU: CUDA_ERROR_NO_DEVICE;
 * an invalid config (said on stderr) CUDA_ERROR_UNKNOWN; cu_init_error in the
 * config makes cuInit fail with that code. */
FAKE_GPU_API CUresult cuInit(unsigned int Flags) {
  if (Flags != 0) return (CUresult)kInvalidValue;
  load_once();
  CUresult rc = (CUresult)kSuccess;
  if (g_load == FAKE_GPU_NONE) {
    rc = (CUresult)kNoDevice;
  } else if (g_load != FAKE_GPU_OK) {
    rc = (CUresult)kUnknown;
  } else if (g_gpu.cu_init_error != 0) {
    rc = (CUresult)g_gpu.cu_init_error;
  }
  g_initialized = rc == (CUresult)kSuccess;
  return rc;
}

/* Answers before cuInit, as the real driver does (without a GPU too). */
FAKE_GPU_API CUresult cuDriverGetVersion(int *driverVersion) {
  if (driverVersion == NULL) return (CUresult)kInvalidValue;
  load_once();
  *driverVersion = g_load == FAKE_GPU_OK ? g_gpu.cuda_version : 13000;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceGetCount(int *count) {
  if (count == NULL) return (CUresult)kInvalidValue;
  if (!g_initialized) return (CUresult)kNotInitialized;
  *count = 1;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  if (device == NULL) return (CUresult)kInvalidValue;
  if (!g_initialized) return (CUresult)kNotInitialized;
  if (ordinal != 0) return (CUresult)kInvalidDevice;
  *device = 0;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (name == NULL || len <= 0) return (CUresult)kInvalidValue;
  const size_t n = strlen(g_gpu.name) < (size_t)len - 1 ? strlen(g_gpu.name) : (size_t)len - 1;
  memcpy(name, g_gpu.name, n);
  name[n] = '\0';
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (uuid == NULL) return (CUresult)kInvalidValue;
  memcpy(uuid->bytes, g_gpu.uuid, sizeof uuid->bytes);
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (pi == NULL) return (CUresult)kInvalidValue;
  switch ((int)attrib) {
    case 16: /* CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT */
      *pi = g_gpu.multiprocessors;
      break;
    case 18: /* CU_DEVICE_ATTRIBUTE_INTEGRATED */
      *pi = g_gpu.integrated;
      break;
    case 41: /* CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING */
    case 83: /* CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY */
    case 89: /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS */
      *pi = 1;
      break;
    case 75: /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR */
      *pi = g_gpu.cc_major;
      break;
    case 76: /* CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR */
      *pi = g_gpu.cc_minor;
      break;
    case 88: /* CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: unified memory */
      *pi = g_gpu.integrated;
      break;
    default:
      return (CUresult)kInvalidValue;
  }
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (bytes == NULL) return (CUresult)kInvalidValue;
  *bytes = (size_t)g_gpu.total_bytes;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (pctx == NULL) return (CUresult)kInvalidValue;
  g_primary_ctx.device = dev;
  if (g_primary_refs++ == 0 && g_gpu.context_log[0] != '\0') {
    /* A context now exists on the GPU: recorded for the tests. */
    FILE *log = fopen(g_gpu.context_log, "a");
    if (log != NULL) {
      fprintf(log, "pid=%ld cuDevicePrimaryCtxRetain device=%d\n", (long)getpid(), (int)dev);
      fclose(log);
    }
  }
  *pctx = &g_primary_ctx;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  const CUresult rc = check_device(dev);
  if (rc != (CUresult)kSuccess) return rc;
  if (g_primary_refs == 0) return (CUresult)kInvalidContext;
  if (--g_primary_refs == 0 && t_current == &g_primary_ctx) t_current = NULL;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuCtxSetCurrent(CUcontext ctx) {
  if (!g_initialized) return (CUresult)kNotInitialized;
  if (ctx != NULL && (ctx != &g_primary_ctx || g_primary_refs == 0))
    return (CUresult)kInvalidContext;
  t_current = ctx;
  return (CUresult)kSuccess;
}

FAKE_GPU_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
  if (!g_initialized) return (CUresult)kNotInitialized;
  if (t_current == NULL || g_primary_refs == 0) return (CUresult)kInvalidContext;
  if (free == NULL || total == NULL) return (CUresult)kInvalidValue;
  *free = (size_t)fake_gpu_cuda_free_now(&g_gpu); /* GB10: page cache is not free */
  *total = (size_t)g_gpu.total_bytes;
  return (CUresult)kSuccess;
}
