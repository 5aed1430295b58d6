// fleet-probe: prints one JSON document with this node's host memory and the
// facts of its GPUs, read from the CUDA driver (and from NVML when present).
//
// Why it exists: on unified-memory GPUs (DGX Spark / GB10) nvidia-smi and NVML
// report GPU memory as [N/A], while the CUDA driver's cuMemGetInfo answers.
// fleet may copy this file to a node and build it there with
//   c++ -O2 -std=c++17 fleet_probe.cc -ldl -pthread -o fleet-probe
// so it stays one self-contained C++17 source file with no dependencies.
//
// Contract:
// - libcuda.so.1 and libnvidia-ml.so.1 are dlopen()ed, never linked: the same
//   binary runs on nodes without a GPU or a driver and says so.
// - stdout carries exactly one JSON document (probe_version 1):
//     {"probe_version":1,
//      "host":{"mem_total_bytes":N,"mem_available_bytes":N,"mem_free_bytes":N,
//              "swap_free_bytes":N},
//      "cuda":{"available":B,"driver_version":"13.0","error":S},
//      "cuda_context":B,"cuda_context_refused":S,
//      "nvml":{"available":B,"driver_version":"580.95.05","error":S},
//      "gpus":[{"index":0,"name":S,"uuid":"GPU-…","compute_capability":"12.1",
//               "memory_total_bytes":N,"memory_free_bytes":N,
//               "memory_free_source":"cuMemGetInfo"|"nvml"|"host MemFree",
//               "memory_reclaimable_bytes":N,
//               "unified_memory":B,"processes":[{"pid":N,"used_bytes":N}],
//               "errors":[S]}]}
//   Any value that could not be read is null, never 0 or false. "processes"
//   is null when NVML could not list them. cuda.available is true when
//   cuInit succeeded; otherwise "gpus" is [] and cuda.error says why.
// - Errors of CUDA or NVML calls on one GPU go to that GPU's "errors"; they
//   never abort the probe.
// - Exit 0 whenever the document was written (no GPU and no driver included),
//   1 on an internal error (stdout not writable), 2 on a bad command line.
// - GPU indexes follow PCI bus order, as nvidia-smi and `docker --gpus` count.
// - To ask cuMemGetInfo, the probe retains each GPU's primary context for a
//   moment, which briefly costs that GPU a little memory. With --no-context
//   it creates none (a serve owns the GPU: on unified memory a context costs
//   memory the serve counted on); free memory then comes from NVML where it
//   answers, else, on unified memory, from the host's MemFree, and
//   "memory_free_source" says which. "cuda_context" says whether a context
//   was created.
// - Nor does it create one, whatever the command line, while any process
//   holds a GPU of the node, fleet's or not: a process on NVML's compute list
//   of any GPU or, where NVML cannot list them, a process other than this one
//   with /dev/nvidia<N> open (only the processes whose fds this user may
//   read: run as root to see every user's). "cuda_context_refused" then says
//   which process; it is null when no context was asked or none was refused.
// - Unified memory (GB10): cuMemGetInfo counts the page cache as used (the
//   kernel frees it only under pressure; vLLM's start-up check reads the same
//   figure). Without a context the free figure is therefore the host's
//   MemFree, not MemAvailable, so that it means the same with and without a
//   context. "memory_reclaimable_bytes" is what the kernel can give back
//   (`sync; echo 3 > /proc/sys/vm/drop_caches`): MemAvailable - MemFree, the
//   kernel's own estimate of the page cache and reclaimable slab it can free
//   without swapping, less the reserve it keeps (Cached + Buffers - Shmem
//   would leave out the slab that drop_caches=3 frees too and count the
//   reserve it never hands out; both leave out shmem/tmpfs). So free +
//   reclaimable is MemAvailable, the figure llama.cpp reads on unified
//   memory. null on discrete GPUs, whose memory is not the page cache's.
// - FLEET_PROBE_PROC names another /proc for the /dev/nvidia<N> scan (tests).
// - `fleet-probe --sha256 [--threads N] [--] FILE...` is the hasher of
//   fleet's deep verify instead: one line "<sha256 hex>  FILE" per file on
//   stdout as each is done (sha256sum's format), on N threads (default: the
//   online CPUs), the largest file first; the last 2N files are hashed in
//   8 MiB steps, the one with the most left first, so that all N threads stay
//   busy until the end (a thread per core, no more). A file it cannot hash is named on
//   stderr ("fleet-probe: FILE: why") and makes the exit 1; the others are
//   still hashed. libcrypto (OpenSSL 1.1 or 3) is dlopen()ed: without it the
//   exit is 3, so `fleet-probe --sha256` with no file (exit 0) says whether
//   this node can hash with it.
// - `fleet-probe --api SOCKET PATH...` reads a container engine's API instead
//   (docker's, or podman's compatible one): for each PATH a GET over the
//   unix socket SOCKET, printed as its body followed by "\n@api=<status>\n",
//   the format of `curl -w '\n@api=%{http_code}\n'` ("000": no answer).
//   Exit 0 when every GET was answered; 7 when one could not connect, write
//   or read, or its body ended short of its Content-Length (curl's code):
//   "000" is then its last line, the PATHs after it are not asked; 2 on a
//   bad command line; 10 s at most in all (then SIGALRM).
//   Why not curl: loading libcurl and the libraries it links costs a node
//   ~18 ms, most of what a converged plan costs there (issue 31); an HTTP/1.0
//   GET over a local socket with the answer read to its end needs none of it.
// - `fleet-probe --api-gpu auto|always SOCKET PATH...` is --api and then,
//   when every PATH answered 200, "@gpu=" and the GPU facts' document in the
//   same process (a plan's node probe on a node whose engine API answers:
//   one process start less there, ~3.4 ms where a start is slow, issue 48).
//   The CUDA context as gpu_context.sh decides it from the same answer:
//   with always, or with auto when the first body is an empty list ("[]":
//   no fleet serve runs); else --no-context. The exit code is --api's, or
//   the GPU facts' once "@gpu=" is out.
// - `fleet-probe --stat-within SECONDS PATH` is `timeout -k 5 SECONDS stat -L
//   -- PATH` in one process (the hung-mount check of a plan's model caches):
//   exit 0 when stat(2) answered and found PATH, 1 when it answered with an
//   error, 124 when it had not answered within SECONDS (a hung network or
//   FUSE mount), 2 on a bad command line. stat runs in a child whose output
//   is /dev/null: past the deadline the child is sent SIGKILL and left to
//   init, so no pipe of the caller's waits for a process stuck in the
//   kernel. Why: timeout and stat were two process starts on every node of
//   every plan that declares a model cache (~7 ms where a start costs 3.4,
//   issue 48).
// - The GPU facts end themselves after 20 s (SIGALRM), as `timeout 20` did:
//   a driver hung in cuInit must not hang the plan. "elapsed_ns" in the
//   document is the probe's own time from main() to the document.
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

#ifdef FLEET_PROBE_HAVE_CUDA_H
#include <cuda.h>

#include <type_traits>
#else
// The few cuda.h (CUDA 13.0) types used here, ABI-identical to the header's:
// its enums CUresult and CUdevice_attribute are int-sized. A build with the
// toolkit checks all of these against cuda.h (static_asserts below).
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef struct CUctx_st* CUcontext;
typedef struct CUuuid_st {
  char bytes[16];
} CUuuid;
#endif

namespace {

constexpr int kProbeVersion = 1;
// fleet-probe --version: the architecture this binary was compiled for.
#if defined(__x86_64__)
constexpr char kBuiltFor[] = "x86_64";
#elif defined(__aarch64__)
constexpr char kBuiltFor[] = "aarch64";
#else
constexpr char kBuiltFor[] = "another architecture";
#endif

// cuda.h values, spelled out so that the standalone build needs no header.
constexpr int kCudaSuccess = 0;
constexpr int kAttrIntegrated = 18;  // CU_DEVICE_ATTRIBUTE_INTEGRATED
constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;

// Driver API entry points, by the versioned symbol that cuda.h 13.0 maps each
// name to. _v2 matters: cuDeviceTotalMem and cuMemGetInfo without it take
// 32-bit sizes. The primary context (retain + set current) is used instead of
// cuCtxCreate, whose signature changed in CUDA 13 (cuCtxCreate_v4).
using CuInitFn = CUresult (*)(unsigned int);
using CuDriverGetVersionFn = CUresult (*)(int*);
using CuDeviceGetCountFn = CUresult (*)(int*);
using CuDeviceGetFn = CUresult (*)(CUdevice*, int);
using CuDeviceGetNameFn = CUresult (*)(char*, int, CUdevice);
using CuDeviceGetUuidFn = CUresult (*)(CUuuid*, CUdevice);
using CuDeviceGetAttributeFn = CUresult (*)(int*, CUdevice_attribute, CUdevice);
using CuDeviceTotalMemFn = CUresult (*)(size_t*, CUdevice);
using CuDevicePrimaryCtxRetainFn = CUresult (*)(CUcontext*, CUdevice);
using CuDevicePrimaryCtxReleaseFn = CUresult (*)(CUdevice);
using CuCtxSetCurrentFn = CUresult (*)(CUcontext);
using CuMemGetInfoFn = CUresult (*)(size_t*, size_t*);
using CuGetErrorTextFn = CUresult (*)(CUresult, const char**);

#ifdef FLEET_PROBE_HAVE_CUDA_H
static_assert(CUDA_SUCCESS == kCudaSuccess);
static_assert(CU_DEVICE_ATTRIBUTE_INTEGRATED == kAttrIntegrated);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == kAttrComputeCapabilityMajor);
static_assert(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == kAttrComputeCapabilityMinor);
static_assert(sizeof(CUresult) == sizeof(int));
static_assert(sizeof(CUdevice_attribute) == sizeof(int));
static_assert(std::is_same_v<CUdevice, int>);
static_assert(sizeof(CUuuid) == 16);
static_assert(std::is_same_v<CuInitFn, decltype(&cuInit)>);
static_assert(std::is_same_v<CuDriverGetVersionFn, decltype(&cuDriverGetVersion)>);
static_assert(std::is_same_v<CuDeviceGetCountFn, decltype(&cuDeviceGetCount)>);
static_assert(std::is_same_v<CuDeviceGetFn, decltype(&cuDeviceGet)>);
static_assert(std::is_same_v<CuDeviceGetNameFn, decltype(&cuDeviceGetName)>);
static_assert(std::is_same_v<CuDeviceGetUuidFn, decltype(&cuDeviceGetUuid_v2)>);
static_assert(std::is_same_v<CuDeviceGetAttributeFn, decltype(&cuDeviceGetAttribute)>);
static_assert(std::is_same_v<CuDeviceTotalMemFn, decltype(&cuDeviceTotalMem_v2)>);
static_assert(std::is_same_v<CuDevicePrimaryCtxRetainFn, decltype(&cuDevicePrimaryCtxRetain)>);
static_assert(std::is_same_v<CuDevicePrimaryCtxReleaseFn, decltype(&cuDevicePrimaryCtxRelease_v2)>);
static_assert(std::is_same_v<CuCtxSetCurrentFn, decltype(&cuCtxSetCurrent)>);
static_assert(std::is_same_v<CuMemGetInfoFn, decltype(&cuMemGetInfo_v2)>);
static_assert(std::is_same_v<CuGetErrorTextFn, decltype(&cuGetErrorName)>);
static_assert(std::is_same_v<CuGetErrorTextFn, decltype(&cuGetErrorString)>);
#endif

// NVML, declared here because nvml.h ships with neither the toolkit nor CI.
// nvmlReturn_t is an int-sized enum; NvmlProcessInfo is nvmlProcessInfo_t as
// the _v3 process calls fill it.
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
struct NvmlProcessInfo {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
constexpr nvmlReturn_t kNvmlSuccess = 0;
constexpr nvmlReturn_t kNvmlErrorInsufficientSize = 7;
constexpr unsigned long long kNvmlValueNotAvailable = ~0ULL;
constexpr unsigned int kNvmlDriverVersionBufferSize = 80;

using NvmlInitFn = nvmlReturn_t (*)();
using NvmlShutdownFn = nvmlReturn_t (*)();
using NvmlErrorStringFn = const char* (*)(nvmlReturn_t);
using NvmlSystemGetDriverVersionFn = nvmlReturn_t (*)(char*, unsigned int);
using NvmlDeviceGetHandleByUuidFn = nvmlReturn_t (*)(const char*, nvmlDevice_t*);
using NvmlDeviceGetComputeRunningProcessesFn = nvmlReturn_t (*)(nvmlDevice_t, unsigned int*,
                                                                NvmlProcessInfo*);
// nvmlMemory_t (v1): what nvidia-smi's memory.total/free show.
struct NvmlMemory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
using NvmlDeviceGetMemoryInfoFn = nvmlReturn_t (*)(nvmlDevice_t, NvmlMemory*);

// ---------------------------------------------------------------------------
// What the probe found.

struct HostReport {
  std::optional<uint64_t> mem_total_bytes;
  std::optional<uint64_t> mem_available_bytes;
  std::optional<uint64_t> mem_free_bytes;
  std::optional<uint64_t> swap_free_bytes;
};

struct LibraryReport {
  bool available = false;
  std::optional<std::string> driver_version;
  std::optional<std::string> error;
};

struct ProcessReport {
  uint32_t pid = 0;
  std::optional<uint64_t> used_bytes;
};

struct GpuReport {
  int index = 0;
  std::optional<std::string> name;
  std::optional<std::string> uuid;
  std::optional<std::string> compute_capability;
  std::optional<uint64_t> memory_total_bytes;
  std::optional<uint64_t> memory_free_bytes;
  std::optional<std::string> memory_free_source;
  std::optional<uint64_t> memory_reclaimable_bytes;
  std::optional<bool> unified_memory;
  std::optional<std::vector<ProcessReport>> processes;
  std::vector<std::string> errors;
};

struct Report {
  HostReport host;
  LibraryReport cuda;
  bool cuda_context = false;                        // a primary context was retained
  std::optional<std::string> cuda_context_refused;  // why none, though one was asked
  LibraryReport nvml;
  std::vector<GpuReport> gpus;
  uint64_t elapsed_ns = 0;  // from main() to the document
};

// ---------------------------------------------------------------------------
// JSON output, by hand (no dependencies). Strings are escaped and invalid
// UTF-8 (e.g. in a dlerror() message) becomes U+FFFD, so that strict parsers
// accept the document.

class JsonWriter {
 public:
  explicit JsonWriter(bool pretty) : pretty_(pretty) {}

  void BeginObject() { Open('{'); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('['); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key) {
    BeginElement();
    AppendString(key);
    out_ += pretty_ ? ": " : ":";
    after_key_ = true;
  }
  void String(std::string_view s) {
    BeginValue();
    AppendString(s);
  }
  void Uint(uint64_t v) {
    BeginValue();
    out_ += std::to_string(v);
  }
  void Bool(bool v) {
    BeginValue();
    out_ += v ? "true" : "false";
  }
  void Null() {
    BeginValue();
    out_ += "null";
  }
  void OptString(const std::optional<std::string>& s) {
    if (s) {
      String(*s);
    } else {
      Null();
    }
  }
  void OptUint(const std::optional<uint64_t>& v) {
    if (v) {
      Uint(*v);
    } else {
      Null();
    }
  }
  void OptBool(const std::optional<bool>& v) {
    if (v) {
      Bool(*v);
    } else {
      Null();
    }
  }

  // The document, ending in a newline.
  std::string Finish() { return out_ + "\n"; }

 private:
  void Open(char c) {
    BeginValue();
    out_ += c;
    counts_.push_back(0);
  }
  void Close(char c) {
    const bool empty = counts_.back() == 0;
    counts_.pop_back();
    if (!empty) Newline();
    out_ += c;
  }
  void BeginValue() {
    if (after_key_) {
      after_key_ = false;
    } else if (!counts_.empty()) {
      BeginElement();
    }
  }
  void BeginElement() {
    if (counts_.back()++ > 0) out_ += ',';
    Newline();
  }
  void Newline() {
    if (!pretty_) return;
    out_ += '\n';
    out_.append(2 * counts_.size(), ' ');
  }

  // Length of the valid UTF-8 sequence starting at s[i], 0 if invalid.
  static size_t Utf8Length(std::string_view s, size_t i) {
    const auto byte = [&](size_t k) -> int {
      return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
    };
    const int c = byte(0);
    size_t len = 0;
    int lo = 0x80, hi = 0xBF;  // range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // overlong
      if (c == 0xED) hi = 0x9F;  // surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // overlong
      if (c == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return 0;
    }
    if (byte(1) < lo || byte(1) > hi) return 0;
    for (size_t k = 2; k < len; ++k) {
      if (byte(k) < 0x80 || byte(k) > 0xBF) return 0;
    }
    return len;
  }

  void AppendString(std::string_view s) {
    out_ += '"';
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) {
        const size_t len = Utf8Length(s, i);
        if (len == 0) {
          out_ += "\\ufffd";
          ++i;
        } else {
          out_.append(s.substr(i, len));
          i += len;
        }
        continue;
      }
      switch (c) {
        case '"':
          out_ += "\\\"";
          break;
        case '\\':
          out_ += "\\\\";
          break;
        case '\n':
          out_ += "\\n";
          break;
        case '\r':
          out_ += "\\r";
          break;
        case '\t':
          out_ += "\\t";
          break;
        case '\b':
          out_ += "\\b";
          break;
        case '\f':
          out_ += "\\f";
          break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += static_cast<char>(c);
          }
      }
      ++i;
    }
    out_ += '"';
  }

  bool pretty_;
  bool after_key_ = false;
  std::vector<int> counts_;  // elements written so far, per open container
  std::string out_;
};

// ---------------------------------------------------------------------------
// Host memory from /proc/meminfo; a figure it lacks stays null.

void ReadHostMemory(HostReport* host) {
  FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return;
  char line[256];
  while (std::fgets(line, sizeof(line), f) != nullptr) {
    char key[64];
    unsigned long long kib = 0;
    if (std::sscanf(line, "%63[^:]: %llu kB", key, &kib) != 2) continue;
    const uint64_t bytes = static_cast<uint64_t>(kib) * 1024;
    if (std::strcmp(key, "MemTotal") == 0) {
      host->mem_total_bytes = bytes;
    } else if (std::strcmp(key, "MemAvailable") == 0) {
      host->mem_available_bytes = bytes;
    } else if (std::strcmp(key, "MemFree") == 0) {
      host->mem_free_bytes = bytes;
    } else if (std::strcmp(key, "SwapFree") == 0) {
      host->swap_free_bytes = bytes;
    }
  }
  std::fclose(f);
}

// ---------------------------------------------------------------------------
// CUDA.

std::string DlError(const char* library) {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string(library) + ": dlopen failed";
}

template <typename Fn>
Fn Symbol(void* library, const char* name) {
  return reinterpret_cast<Fn>(dlsym(library, name));
}

struct Cuda {
  CuInitFn init = nullptr;
  CuDriverGetVersionFn driver_get_version = nullptr;
  CuDeviceGetCountFn device_get_count = nullptr;
  CuDeviceGetFn device_get = nullptr;
  CuDeviceGetNameFn device_get_name = nullptr;
  CuDeviceGetUuidFn device_get_uuid = nullptr;
  CuDeviceGetAttributeFn device_get_attribute = nullptr;
  CuDeviceTotalMemFn device_total_mem = nullptr;
  CuDevicePrimaryCtxRetainFn primary_ctx_retain = nullptr;
  CuDevicePrimaryCtxReleaseFn primary_ctx_release = nullptr;
  CuCtxSetCurrentFn ctx_set_current = nullptr;
  CuMemGetInfoFn mem_get_info = nullptr;
  CuGetErrorTextFn get_error_name = nullptr;
  CuGetErrorTextFn get_error_string = nullptr;

  void Resolve(void* lib) {
    init = Symbol<CuInitFn>(lib, "cuInit");
    driver_get_version = Symbol<CuDriverGetVersionFn>(lib, "cuDriverGetVersion");
    device_get_count = Symbol<CuDeviceGetCountFn>(lib, "cuDeviceGetCount");
    device_get = Symbol<CuDeviceGetFn>(lib, "cuDeviceGet");
    device_get_name = Symbol<CuDeviceGetNameFn>(lib, "cuDeviceGetName");
    device_get_uuid = Symbol<CuDeviceGetUuidFn>(lib, "cuDeviceGetUuid_v2");
    if (device_get_uuid == nullptr) {  // drivers before CUDA 11.4
      device_get_uuid = Symbol<CuDeviceGetUuidFn>(lib, "cuDeviceGetUuid");
    }
    device_get_attribute = Symbol<CuDeviceGetAttributeFn>(lib, "cuDeviceGetAttribute");
    device_total_mem = Symbol<CuDeviceTotalMemFn>(lib, "cuDeviceTotalMem_v2");
    primary_ctx_retain = Symbol<CuDevicePrimaryCtxRetainFn>(lib, "cuDevicePrimaryCtxRetain");
    primary_ctx_release = Symbol<CuDevicePrimaryCtxReleaseFn>(lib, "cuDevicePrimaryCtxRelease_v2");
    ctx_set_current = Symbol<CuCtxSetCurrentFn>(lib, "cuCtxSetCurrent");
    mem_get_info = Symbol<CuMemGetInfoFn>(lib, "cuMemGetInfo_v2");
    get_error_name = Symbol<CuGetErrorTextFn>(lib, "cuGetErrorName");
    get_error_string = Symbol<CuGetErrorTextFn>(lib, "cuGetErrorString");
  }

  // "cuMemGetInfo_v2: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
  std::string ErrorText(const char* call, CUresult rc) const {
    std::string text = std::string(call) + ": ";
    const char* name = nullptr;
    const char* description = nullptr;
    if (get_error_name != nullptr && static_cast<int>(get_error_name(rc, &name)) != kCudaSuccess) {
      name = nullptr;
    }
    if (get_error_string != nullptr &&
        static_cast<int>(get_error_string(rc, &description)) != kCudaSuccess) {
      description = nullptr;
    }
    text +=
        name != nullptr ? std::string(name) : "CUDA error " + std::to_string(static_cast<int>(rc));
    if (description != nullptr) text += std::string(" (") + description + ")";
    return text;
  }

  // Calls fn(args...); on failure (or a symbol the driver lacks) appends the
  // reason to *errors and returns false.
  template <typename Fn, typename... Args>
  bool Call(std::vector<std::string>* errors, const char* call, Fn fn, Args... args) const {
    if (fn == nullptr) {
      errors->push_back(std::string(call) + ": not exported by libcuda.so.1");
      return false;
    }
    const CUresult rc = fn(args...);
    if (static_cast<int>(rc) != kCudaSuccess) {
      errors->push_back(ErrorText(call, rc));
      return false;
    }
    return true;
  }
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", the form nvidia-smi and NVML use.
std::string FormatUuid(const CUuuid& uuid) {
  std::string text = "GPU-";
  static const char kHex[] = "0123456789abcdef";
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text += '-';
    const unsigned char b = static_cast<unsigned char>(uuid.bytes[i]);
    text += kHex[b >> 4];
    text += kHex[b & 0xF];
  }
  return text;
}

GpuReport ProbeGpu(const Cuda& cu, int index) {
  GpuReport gpu;
  gpu.index = index;
  std::vector<std::string>* errors = &gpu.errors;
  CUdevice dev = 0;
  if (!cu.Call(errors, "cuDeviceGet", cu.device_get, &dev, index)) return gpu;

  char name[256] = {};
  if (cu.Call(errors, "cuDeviceGetName", cu.device_get_name, name,
              static_cast<int>(sizeof(name) - 1), dev)) {
    gpu.name = name;
  }
  CUuuid uuid = {};
  if (cu.Call(errors, "cuDeviceGetUuid_v2", cu.device_get_uuid, &uuid, dev)) {
    gpu.uuid = FormatUuid(uuid);
  }
  int major = 0, minor = 0;
  if (cu.Call(errors, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)", cu.device_get_attribute,
              &major, static_cast<CUdevice_attribute>(kAttrComputeCapabilityMajor), dev) &&
      cu.Call(errors, "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)", cu.device_get_attribute,
              &minor, static_cast<CUdevice_attribute>(kAttrComputeCapabilityMinor), dev)) {
    gpu.compute_capability = std::to_string(major) + "." + std::to_string(minor);
  }
  // An integrated GPU shares the host's memory (GB10): its "GPU memory" is the
  // same RAM the OS hands out, which is why NVML reports it as N/A.
  int integrated = 0;
  if (cu.Call(errors, "cuDeviceGetAttribute(INTEGRATED)", cu.device_get_attribute, &integrated,
              static_cast<CUdevice_attribute>(kAttrIntegrated), dev)) {
    gpu.unified_memory = integrated != 0;
  }
  size_t total = 0;
  if (cu.Call(errors, "cuDeviceTotalMem_v2", cu.device_total_mem, &total, dev)) {
    gpu.memory_total_bytes = total;
  }

  return gpu;
}

// cuMemGetInfo needs a current context. A primary context belongs to this
// process: retaining it creates one on the GPU (driver memory, on unified
// memory taken from what a running serve counted on) until the release.
// Hence --no-context, which the plan passes while a serve runs, and the
// holder check before this is called (GpuHolder).
void ProbeGpuWithContext(const Cuda& cu, GpuReport* report, bool* context_created) {
  GpuReport& gpu = *report;
  std::vector<std::string>* errors = &gpu.errors;
  CUdevice dev = 0;
  if (!cu.Call(errors, "cuDeviceGet", cu.device_get, &dev, gpu.index)) return;
  CUcontext ctx = nullptr;
  if (cu.Call(errors, "cuDevicePrimaryCtxRetain", cu.primary_ctx_retain, &ctx, dev)) {
    *context_created = true;
    if (cu.Call(errors, "cuCtxSetCurrent", cu.ctx_set_current, ctx)) {
      size_t free_bytes = 0, total_bytes = 0;
      if (cu.Call(errors, "cuMemGetInfo_v2", cu.mem_get_info, &free_bytes, &total_bytes)) {
        gpu.memory_free_bytes = free_bytes;
        gpu.memory_free_source = "cuMemGetInfo";
        if (!gpu.memory_total_bytes) gpu.memory_total_bytes = total_bytes;
      }
      cu.Call(errors, "cuCtxSetCurrent", cu.ctx_set_current, static_cast<CUcontext>(nullptr));
    }
    cu.Call(errors, "cuDevicePrimaryCtxRelease_v2", cu.primary_ctx_release, dev);
  }
}

// The driver, once cuInit succeeded (for the context pass after NVML).
std::optional<Cuda> ProbeCuda(Report* report) {
  // The probe reports the node, not the caller's view of it: see every GPU,
  // numbered in PCI bus order as nvidia-smi, NVML and `docker --gpus` do.
  unsetenv("CUDA_VISIBLE_DEVICES");
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);

  LibraryReport& status = report->cuda;
  // Never dlclose()d: the driver may keep threads running until exit.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    status.error = DlError("libcuda.so.1");
    return std::nullopt;
  }
  Cuda cu;
  cu.Resolve(lib);
  std::vector<std::string> errors;
  int version = 0;
  if (cu.Call(&errors, "cuDriverGetVersion", cu.driver_get_version, &version)) {
    status.driver_version =
        std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
  }
  int count = 0;
  if (cu.Call(&errors, "cuInit", cu.init, 0u)) {
    status.available = true;
    if (cu.Call(&errors, "cuDeviceGetCount", cu.device_get_count, &count)) {
      for (int i = 0; i < count; ++i) {
        report->gpus.push_back(ProbeGpu(cu, i));
      }
    }
  }
  if (!errors.empty()) {
    std::string joined;
    for (const std::string& e : errors) joined += (joined.empty() ? "" : "; ") + e;
    status.error = joined;
  }
  if (!status.available) return std::nullopt;
  return cu;
}

// ---------------------------------------------------------------------------
// NVML: the driver version and the processes on each GPU, matched by UUID.

// Without a context (--no-context), NVML's free figure where it has one
// (discrete GPUs; unified memory says NOT_SUPPORTED).
void FillFromNvml(NvmlDeviceGetMemoryInfoFn memory_info, nvmlDevice_t dev, GpuReport* gpu) {
  NvmlMemory memory = {};
  if (gpu->memory_free_bytes || memory_info == nullptr ||
      memory_info(dev, &memory) != kNvmlSuccess) {
    return;
  }
  gpu->memory_free_bytes = memory.free;
  gpu->memory_free_source = "nvml";
  if (!gpu->memory_total_bytes) gpu->memory_total_bytes = memory.total;
}

void ProbeNvml(Report* report) {
  LibraryReport& status = report->nvml;
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    status.error = DlError("libnvidia-ml.so.1");
    return;
  }
  const auto init = Symbol<NvmlInitFn>(lib, "nvmlInit_v2");
  const auto shutdown = Symbol<NvmlShutdownFn>(lib, "nvmlShutdown");
  const auto error_string = Symbol<NvmlErrorStringFn>(lib, "nvmlErrorString");
  const auto driver_version =
      Symbol<NvmlSystemGetDriverVersionFn>(lib, "nvmlSystemGetDriverVersion");
  const auto by_uuid = Symbol<NvmlDeviceGetHandleByUuidFn>(lib, "nvmlDeviceGetHandleByUUID");
  const auto processes = Symbol<NvmlDeviceGetComputeRunningProcessesFn>(
      lib, "nvmlDeviceGetComputeRunningProcesses_v3");
  const auto memory_info = Symbol<NvmlDeviceGetMemoryInfoFn>(lib, "nvmlDeviceGetMemoryInfo");

  const auto error_text = [&](const char* call, nvmlReturn_t rc) {
    const char* text = error_string != nullptr ? error_string(rc) : nullptr;
    return std::string(call) + ": " +
           (text != nullptr ? std::string(text) : "NVML error " + std::to_string(rc));
  };
  if (init == nullptr) {
    status.error = "nvmlInit_v2: not exported by libnvidia-ml.so.1";
    return;
  }
  const nvmlReturn_t rc = init();
  if (rc != kNvmlSuccess) {
    status.error = error_text("nvmlInit_v2", rc);
    return;
  }
  status.available = true;

  if (driver_version != nullptr) {
    char buf[kNvmlDriverVersionBufferSize] = {};
    const nvmlReturn_t vrc = driver_version(buf, sizeof(buf));
    if (vrc == kNvmlSuccess) {
      status.driver_version = buf;
    } else {
      status.error = error_text("nvmlSystemGetDriverVersion", vrc);
    }
  }

  for (GpuReport& gpu : report->gpus) {
    if (!gpu.uuid) continue;  // its errors already say why
    if (by_uuid == nullptr || processes == nullptr) {
      gpu.errors.push_back(
          "NVML: libnvidia-ml.so.1 lacks nvmlDeviceGetHandleByUUID or "
          "nvmlDeviceGetComputeRunningProcesses_v3");
      continue;
    }
    nvmlDevice_t dev = nullptr;
    const nvmlReturn_t hrc = by_uuid(gpu.uuid->c_str(), &dev);
    if (hrc != kNvmlSuccess) {
      gpu.errors.push_back(error_text("nvmlDeviceGetHandleByUUID", hrc));
      continue;
    }
    FillFromNvml(memory_info, dev, &gpu);
    // Processes may start between the calls, so retry a few times on a
    // buffer that is too small.
    std::vector<NvmlProcessInfo> infos(16);
    bool answered = false;
    for (int attempt = 0; attempt < 4 && !answered; ++attempt) {
      unsigned int n = static_cast<unsigned int>(infos.size());
      const nvmlReturn_t prc = processes(dev, &n, infos.data());
      if (prc == kNvmlErrorInsufficientSize) {
        infos.resize(static_cast<size_t>(n) + 16);
        continue;
      }
      answered = true;
      if (prc != kNvmlSuccess) {
        gpu.errors.push_back(error_text("nvmlDeviceGetComputeRunningProcesses_v3", prc));
        break;
      }
      std::vector<ProcessReport> list;
      for (unsigned int i = 0; i < n && i < infos.size(); ++i) {
        ProcessReport p;
        p.pid = infos[i].pid;
        // Unified-memory GPUs report no per-process figure: null, not 0.
        if (infos[i].usedGpuMemory != kNvmlValueNotAvailable) {
          p.used_bytes = infos[i].usedGpuMemory;
        }
        list.push_back(p);
      }
      gpu.processes = std::move(list);
    }
    if (!answered) {
      gpu.errors.push_back("nvmlDeviceGetComputeRunningProcesses_v3: process list kept growing");
    }
  }
  if (shutdown != nullptr) shutdown();
}

// A unified-memory GPU allocates from the host's RAM. Without a context (and
// NVML has no figure for it), its free figure is the host's MemFree: what
// cuMemGetInfo counts as free on GB10, which leaves the page cache out.
// Either way, what dropping the page cache would add is MemAvailable -
// MemFree (see the contract above for why that and not Cached).
void FillFromHost(Report* report) {
  const HostReport& host = report->host;
  for (GpuReport& gpu : report->gpus) {
    if (!gpu.unified_memory.value_or(false)) continue;
    if (!gpu.memory_free_bytes && host.mem_free_bytes) {
      gpu.memory_free_bytes = host.mem_free_bytes;
      gpu.memory_free_source = "host MemFree";
    }
    if (host.mem_available_bytes && host.mem_free_bytes) {
      gpu.memory_reclaimable_bytes = *host.mem_available_bytes > *host.mem_free_bytes
                                         ? *host.mem_available_bytes - *host.mem_free_bytes
                                         : 0;
    }
  }
}

// "/dev/nvidia0" .. "/dev/nvidia<N>", the GPUs' device nodes (not
// nvidiactl, nvidia-uvm or nvidia-modeset, which every NVML or CUDA user
// such as a monitoring agent opens without holding a GPU).
bool IsGpuDeviceNode(const char* target) {
  const char kPrefix[] = "/dev/nvidia";
  if (std::strncmp(target, kPrefix, sizeof(kPrefix) - 1) != 0) return false;
  const char* digits = target + sizeof(kPrefix) - 1;
  if (*digits == '\0') return false;
  for (const char* c = digits; *c != '\0'; ++c) {
    if (!std::isdigit(static_cast<unsigned char>(*c))) return false;
  }
  return true;
}

// A process other than this one with a GPU's device node open, from
// /proc/<pid>/fd: 0 when none is seen. FLEET_PROBE_PROC names another /proc
// for tests of this scan.
uint32_t DeviceNodeHolder() {
  const char* env = std::getenv("FLEET_PROBE_PROC");
  const std::string proc = env != nullptr && *env != '\0' ? env : "/proc";
  const long self = static_cast<long>(getpid());
  DIR* dir = opendir(proc.c_str());
  if (dir == nullptr) return 0;
  uint32_t holder = 0;
  while (holder == 0) {
    const dirent* e = readdir(dir);
    if (e == nullptr) break;
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || pid <= 0 || pid == self) continue;
    const std::string fds = proc + "/" + e->d_name + "/fd";
    DIR* fd_dir = opendir(fds.c_str());
    if (fd_dir == nullptr) continue;  // gone, or another user's
    while (const dirent* f = readdir(fd_dir)) {
      char target[256];
      const ssize_t n = readlink((fds + "/" + f->d_name).c_str(), target, sizeof(target) - 1);
      if (n <= 0) continue;
      target[n] = '\0';
      if (IsGpuDeviceNode(target)) {
        holder = static_cast<uint32_t>(pid);
        break;
      }
    }
    closedir(fd_dir);
  }
  closedir(dir);
  return holder;
}

// Why no context may be created: the process that holds a GPU (NVML's
// compute list, or the device nodes where NVML did not list), or nullopt.
// The probe's own cuInit has opened the device nodes too: it is left out.
std::optional<std::string> GpuHolder(const Report& report) {
  bool all_listed = !report.gpus.empty();
  for (const GpuReport& gpu : report.gpus) {
    if (!gpu.processes) {
      all_listed = false;
      continue;
    }
    if (!gpu.processes->empty()) {
      return "process " + std::to_string(gpu.processes->front().pid) + " runs on GPU " +
             std::to_string(gpu.index) + " (NVML)";
    }
  }
  if (all_listed) return std::nullopt;
  if (const uint32_t pid = DeviceNodeHolder()) {
    return "process " + std::to_string(pid) +
           " has a GPU device node (/dev/nvidia<N>) open, and NVML did not list the GPU's "
           "processes";
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------
// --sha256: the node-side hasher of `fleet apply --verify=deep`.
//
// Why mmap: hashing a page-cached file through read() copies every byte out
// of the page cache first; `openssl dgst` spends ~0.80 of `openssl speed`'s
// per-core figure per CPU-second that way, a mapped file ~0.93 (measured on
// 256 MB files, user+sys). On a later host reads won (0.74 against 0.57)
// until the touch ahead below made the mapped file 0.80. Files are mapped a
// window at a time, so that a 32-bit node maps no more than that and pages
// already hashed are let go. (MAP_POPULATE or MADV_POPULATE_READ per window,
// whole-file mappings and 16-256 MiB windows measured the same CPU per byte
// within noise.)
//
// Why steps: one file's SHA-256 runs on one core, so what keeps every thread
// busy to the end is the order. A thread takes the largest file first and
// keeps it while more than 2 x threads files are unfinished (few files open
// at once, a line as each ends); among the last 2 x threads, a thread takes,
// every step, the file with the most bytes left (longest remaining first:
// the shortest finish on identical cores), so the last files end together
// instead of one core hashing the last file alone: 3 equal shards on 2
// threads take 1.5 shards' time, not 2, without more threads than cores.

constexpr uint64_t kHashWindowBytes = uint64_t{64} << 20;  // mapped at a time, per file
constexpr uint64_t kHashStepBytes = uint64_t{8} << 20;     // hashed before a thread may switch

// Why the touch ahead: SHA-256 reads a mapping page by page, and each new
// 4 KiB page's first read waits for its address translation (a two-level
// walk in a VM) and its first lines. Prefetching one byte two pages ahead
// starts both while the current page is hashed: on a 2-core VM (kernel 6.18,
// SHA-NI) a mapped file went from ~0.57 to ~0.80 of openssl speed's in-cache
// rate per CPU-second; an anonymous buffer from 0.64 to ~0.93. The touch
// stays inside the window (a pointer past a mapping's end is undefined), so
// the next step's first pages are touched too. (One byte per page did as
// well as every line; one page ahead gained nothing.)
constexpr size_t kHashPageBytes = 4096;  // the smallest page; larger pages just see extra touches
constexpr size_t kTouchAheadBytes = 2 * kHashPageBytes;

// The EVP calls, unchanged from OpenSSL 1.1 to 3.x, by their C prototypes.
using EvpMdCtxNewFn = void* (*)();
using EvpMdCtxFreeFn = void (*)(void*);
using EvpSha256Fn = const void* (*)();
using EvpDigestInitExFn = int (*)(void*, const void*, void*);
using EvpDigestUpdateFn = int (*)(void*, const void*, size_t);
using EvpDigestFinalExFn = int (*)(void*, unsigned char*, unsigned int*);

struct Crypto {
  EvpMdCtxNewFn ctx_new = nullptr;
  EvpMdCtxFreeFn ctx_free = nullptr;
  EvpSha256Fn sha256 = nullptr;
  EvpDigestInitExFn init = nullptr;
  EvpDigestUpdateFn update = nullptr;
  EvpDigestFinalExFn final = nullptr;
};

bool LoadCrypto(Crypto* c, std::string* error) {
  void* lib = nullptr;
  for (const char* name : {"libcrypto.so.3", "libcrypto.so.1.1", "libcrypto.so"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) break;
  }
  if (lib == nullptr) {
    *error = "cannot load OpenSSL's libcrypto: " + DlError("libcrypto.so.3");
    return false;
  }
  c->ctx_new = Symbol<EvpMdCtxNewFn>(lib, "EVP_MD_CTX_new");
  c->ctx_free = Symbol<EvpMdCtxFreeFn>(lib, "EVP_MD_CTX_free");
  c->sha256 = Symbol<EvpSha256Fn>(lib, "EVP_sha256");
  c->init = Symbol<EvpDigestInitExFn>(lib, "EVP_DigestInit_ex");
  c->update = Symbol<EvpDigestUpdateFn>(lib, "EVP_DigestUpdate");
  c->final = Symbol<EvpDigestFinalExFn>(lib, "EVP_DigestFinal_ex");
  if (c->ctx_new && c->ctx_free && c->sha256 && c->init && c->update && c->final) return true;
  *error = "libcrypto lacks EVP_MD_CTX_new (OpenSSL older than 1.1)";
  return false;
}

// A file that shrinks under its mapping raises SIGBUS in the thread reading
// it: that thread's jump (set while it hashes a window) turns it into an
// error for that file instead of the end of the process.
thread_local sigjmp_buf* tls_sigbus_jump = nullptr;

void OnSigbus(int sig) {
  if (tls_sigbus_jump != nullptr) siglongjmp(*tls_sigbus_jump, 1);
  signal(sig, SIG_DFL);
  raise(sig);
}

void CatchSigbus() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = OnSigbus;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

std::string Hex(const unsigned char* bytes, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (size_t i = 0; i < n; ++i) {
    hex += kDigits[bytes[i] >> 4];
    hex += kDigits[bytes[i] & 15];
  }
  return hex;
}

// One file: opened when a thread first takes it; its EVP context and mapped
// window go from thread to thread between steps (one thread at a time).
struct HashJob {
  const char* path = nullptr;
  uint64_t size = 0;  // stat()'s before it is opened, fstat()'s after
  uint64_t done = 0;
  int fd = -1;
  void* ctx = nullptr;
  void* window = nullptr;
  uint64_t window_offset = 0;
  size_t window_length = 0;
  bool busy = false;  // a thread is hashing a step of it
  bool finished = false;
  uint64_t left() const { return size - done; }
};

void ReleaseJob(const Crypto& c, HashJob* job) {
  if (job->window != nullptr) munmap(job->window, job->window_length);
  if (job->ctx != nullptr) c.ctx_free(job->ctx);
  if (job->fd >= 0) close(job->fd);
  job->window = nullptr;
  job->ctx = nullptr;
  job->fd = -1;
}

bool OpenJob(const Crypto& c, HashJob* job, std::string* error) {
  job->fd = open(job->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  struct stat st;
  if (job->fd < 0 || fstat(job->fd, &st) != 0) {
    *error = std::strerror(errno);
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    return false;
  }
  job->size = static_cast<uint64_t>(st.st_size);
  job->ctx = c.ctx_new();
  if (job->ctx != nullptr && c.init(job->ctx, c.sha256(), nullptr) == 1) return true;
  *error = "libcrypto's SHA-256 failed";
  return false;
}

// Maps the window holding byte `done` of the file where the current one
// does not: windows start at multiples of kHashWindowBytes.
bool MapWindow(HashJob* job, std::string* error) {
  if (job->window != nullptr && job->done < job->window_offset + job->window_length) return true;
  if (job->window != nullptr) munmap(job->window, job->window_length);
  job->window = nullptr;
  job->window_offset = job->done;
  job->window_length = static_cast<size_t>(std::min(kHashWindowBytes, job->left()));
  void* data = mmap(nullptr, job->window_length, PROT_READ, MAP_SHARED, job->fd,
                    static_cast<off_t>(job->window_offset));
  if (data == MAP_FAILED) {
    *error = std::string("mmap: ") + std::strerror(errno);
    return false;
  }
  madvise(data, job->window_length, MADV_SEQUENTIAL);
  job->window = data;
  return true;
}

// Feeds the next step (kHashStepBytes or what is left) of the file to its
// context, opening the file first where no thread has yet.
bool HashStep(const Crypto& c, HashJob* job, std::string* error) {
  if (job->fd < 0 && !OpenJob(c, job, error)) return false;
  if (job->left() == 0) return true;
  if (!MapWindow(job, error)) return false;
  const uint64_t in_window = job->window_offset + job->window_length - job->done;
  const size_t length = static_cast<size_t>(std::min(kHashStepBytes, in_window));
  const char* data = static_cast<const char*>(job->window) + (job->done - job->window_offset);
  sigjmp_buf jump;
  if (sigsetjmp(jump, 1) != 0) {  // 1: the handler's blocked SIGBUS is unblocked again
    tls_sigbus_jump = nullptr;
    *error = "the file shrank while it was hashed";
    return false;
  }
  tls_sigbus_jump = &jump;
  bool ok = true;
  for (size_t at = 0; ok && at < length; at += kHashPageBytes) {
    if (at + kTouchAheadBytes < in_window) __builtin_prefetch(data + at + kTouchAheadBytes);
    ok = c.update(job->ctx, data + at, std::min(kHashPageBytes, length - at)) == 1;
  }
  tls_sigbus_jump = nullptr;
  if (!ok) *error = "EVP_DigestUpdate failed";
  job->done += length;
  return ok;
}

// The sha256 hex of a file hashed to its end; "" with *error set. A file
// whose size changed while it was hashed is an error, not the digest of a part.
std::string FinishJob(const Crypto& c, HashJob* job, std::string* error) {
  unsigned char digest[32];
  unsigned int digest_size = 0;
  struct stat after;
  std::string hex;
  if (c.final(job->ctx, digest, &digest_size) != 1 || digest_size != sizeof digest)
    *error = "libcrypto's SHA-256 failed";
  else if (fstat(job->fd, &after) != 0 || static_cast<uint64_t>(after.st_size) != job->size)
    *error = "the file changed size while it was hashed";
  else
    hex = Hex(digest, sizeof digest);
  return hex;
}

// The unfinished file a free thread hashes next: the one with the most bytes
// left that no thread holds (ties: the earlier one); nullptr when none.
HashJob* MostLeft(std::vector<HashJob>& jobs) {
  HashJob* best = nullptr;
  for (HashJob& job : jobs)
    if (!job.busy && !job.finished && (best == nullptr || job.left() > best->left())) best = &job;
  return best;
}

// Runs `work` on `workers` threads (this one included). Where a thread
// cannot start (a glibc before 2.34 without -pthread), fewer do the work.
void RunWorkers(const std::function<void()>& work, int workers) {
  std::vector<std::thread> pool;
  for (int i = 1; i < workers; ++i) {
    try {
      pool.emplace_back(work);
    } catch (const std::system_error&) {
      break;
    }
  }
  work();
  for (std::thread& t : pool) t.join();
}

// Hashes `paths` on `workers` threads in the order the comment above
// explains. Exit status as the contract says.
int HashFiles(const std::vector<const char*>& paths, int workers) {
  Crypto crypto;
  std::string error;
  if (!LoadCrypto(&crypto, &error)) {
    std::fprintf(stderr, "fleet-probe: --sha256: %s\n", error.c_str());
    return 3;
  }
  CatchSigbus();
  std::vector<HashJob> jobs(paths.size());
  for (size_t i = 0; i < paths.size(); ++i) {
    struct stat st;
    jobs[i].path = paths[i];
    if (stat(paths[i], &st) == 0 && S_ISREG(st.st_mode)) jobs[i].size = st.st_size;
  }
  std::stable_sort(jobs.begin(), jobs.end(),
                   [](const HashJob& a, const HashJob& b) { return a.size > b.size; });
  const int threads = std::max(1, std::min<int>(workers, static_cast<int>(paths.size())));
  const size_t keep_while_unfinished_over = 2 * static_cast<size_t>(threads);
  size_t unfinished = jobs.size();
  std::mutex mu;  // the jobs' busy/finished, `unfinished`, stdout
  bool failed = false;
  auto work = [&] {
    HashJob* job = nullptr;
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(mu);
        if (job != nullptr) job->busy = false;
        if (job == nullptr || unfinished <= keep_while_unfinished_over) job = MostLeft(jobs);
        if (job == nullptr) return;
        job->busy = true;
      }
      std::string why;
      const bool ok = HashStep(crypto, job, &why);
      if (ok && job->left() > 0) continue;
      const std::string hex = ok ? FinishJob(crypto, job, &why) : "";
      ReleaseJob(crypto, job);
      std::lock_guard<std::mutex> lock(mu);
      job->finished = true;
      --unfinished;
      if (hex.empty()) {
        std::fprintf(stderr, "fleet-probe: %s: %s\n", job->path, why.c_str());
        failed = true;
      } else if (std::printf("%s  %s\n", hex.c_str(), job->path) < 0 || std::fflush(stdout) != 0) {
        failed = true;
      }
      job = nullptr;
    }
  };
  RunWorkers(work, threads);
  return failed ? 1 : 0;
}

// argv after --sha256: [--threads N] [--] FILE...
int Sha256Main(int argc, char** argv) {
  long workers = sysconf(_SC_NPROCESSORS_ONLN);
  int i = 0;
  for (; i < argc && argv[i][0] == '-'; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    char* end = nullptr;
    if (arg == "--threads" && i + 1 < argc) workers = std::strtol(argv[++i], &end, 10);
    if (end == nullptr || *end != '\0' || workers < 1) {
      std::fprintf(stderr, "fleet-probe: --sha256: bad argument '%s'\n", argv[i]);
      return 2;
    }
  }
  return HashFiles(std::vector<const char*>(argv + i, argv + argc),
                   static_cast<int>(std::min<long>(std::max<long>(workers, 1), 1024)));
}

// ---------------------------------------------------------------------------

std::string Render(const Report& report, bool pretty) {
  JsonWriter w(pretty);
  w.BeginObject();
  w.Key("probe_version");
  w.Uint(kProbeVersion);
  w.Key("host");
  w.BeginObject();
  w.Key("mem_total_bytes");
  w.OptUint(report.host.mem_total_bytes);
  w.Key("mem_available_bytes");
  w.OptUint(report.host.mem_available_bytes);
  w.Key("mem_free_bytes");
  w.OptUint(report.host.mem_free_bytes);
  w.Key("swap_free_bytes");
  w.OptUint(report.host.swap_free_bytes);
  w.EndObject();
  for (const auto& [key, lib] : {std::pair<const char*, const LibraryReport*>{"cuda", &report.cuda},
                                 {"nvml", &report.nvml}}) {
    w.Key(key);
    w.BeginObject();
    w.Key("available");
    w.Bool(lib->available);
    w.Key("driver_version");
    w.OptString(lib->driver_version);
    w.Key("error");
    w.OptString(lib->error);
    w.EndObject();
  }
  w.Key("cuda_context");
  w.Bool(report.cuda_context);
  w.Key("cuda_context_refused");
  w.OptString(report.cuda_context_refused);
  w.Key("elapsed_ns");
  w.Uint(report.elapsed_ns);
  w.Key("gpus");
  w.BeginArray();
  for (const GpuReport& gpu : report.gpus) {
    w.BeginObject();
    w.Key("index");
    w.Uint(static_cast<uint64_t>(gpu.index));
    w.Key("name");
    w.OptString(gpu.name);
    w.Key("uuid");
    w.OptString(gpu.uuid);
    w.Key("compute_capability");
    w.OptString(gpu.compute_capability);
    w.Key("memory_total_bytes");
    w.OptUint(gpu.memory_total_bytes);
    w.Key("memory_free_bytes");
    w.OptUint(gpu.memory_free_bytes);
    w.Key("memory_free_source");
    w.OptString(gpu.memory_free_source);
    w.Key("memory_reclaimable_bytes");
    w.OptUint(gpu.memory_reclaimable_bytes);
    w.Key("unified_memory");
    w.OptBool(gpu.unified_memory);
    w.Key("processes");
    if (gpu.processes) {
      w.BeginArray();
      for (const ProcessReport& p : *gpu.processes) {
        w.BeginObject();
        w.Key("pid");
        w.Uint(p.pid);
        w.Key("used_bytes");
        w.OptUint(p.used_bytes);
        w.EndObject();
      }
      w.EndArray();
    } else {
      w.Null();
    }
    w.Key("errors");
    w.BeginArray();
    for (const std::string& e : gpu.errors) w.String(e);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  return w.Finish();
}

// ---------------------------------------------------------------------------
// --api: an engine's API over its unix socket.

// Sends all of [data, data + size) on the socket `fd`; false on an error
// (MSG_NOSIGNAL: a closed peer is an error, not a SIGPIPE).
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// The status and the Content-Length (-1: none) of an HTTP answer's head
// (what precedes its blank line); false when it is not HTTP/1.x or uses a
// transfer coding this reader does not undo.
bool ParseHttpHead(std::string head, int* status, long long* length) {
  if (head.compare(0, 7, "HTTP/1.") != 0 || head.size() < 12) return false;
  char* end = nullptr;
  *status = static_cast<int>(std::strtol(head.c_str() + 9, &end, 10));
  if (end != head.c_str() + 12 || *status < 100 || *status > 999) return false;
  for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (head.find("\r\ntransfer-encoding:") != std::string::npos) return false;
  *length = -1;
  const size_t at = head.find("\r\ncontent-length:");
  if (at == std::string::npos) return true;
  *length = std::strtoll(head.c_str() + at + 17, &end, 10);
  return *length >= 0 && (*end == '\0' || *end == '\r' || *end == ' ');
}

// Reads one HTTP answer from `fd`: its status and body. The body ends at its
// Content-Length when the head gives one (a server that keeps the
// connection open is not waited for), else at the end of the stream. False
// when the stream ends before that, fails, or is not an answer this reader
// takes (ParseHttpHead).
bool ReadHttpAnswer(int fd, int* status, std::string* body) {
  std::string in;
  size_t body_at = std::string::npos;
  long long length = -1;
  char buf[65536];
  while (body_at == std::string::npos || length < 0 ||
         in.size() - body_at < static_cast<unsigned long long>(length)) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return false;
    if (n == 0) {  // the end of the stream: the end of the body only without a length
      if (body_at == std::string::npos || length >= 0) return false;
      break;
    }
    in.append(buf, static_cast<size_t>(n));
    const size_t blank = body_at == std::string::npos ? in.find("\r\n\r\n") : std::string::npos;
    if (blank != std::string::npos) {
      if (!ParseHttpHead(in.substr(0, blank), status, &length)) return false;
      body_at = blank + 4;
    }
  }
  *body = in.substr(body_at, length >= 0 ? static_cast<size_t>(length) : std::string::npos);
  return true;
}

// `GET path` on the unix socket `socket_path`: the answer's status and body,
// or false when there was none (connect, write or read failed; ReadHttpAnswer).
bool HttpGet(const char* socket_path, const std::string& path, int* status, std::string* body) {
  sockaddr_un addr{};
  if (std::strlen(socket_path) >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, socket_path);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // HTTP/1.0: one answer per connection, never a chunked one (which Go's
  // servers, docker's and podman's, send only to HTTP/1.1 clients).
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
  const bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  WriteAll(fd, request.data(), request.size()) && ReadHttpAnswer(fd, status, body);
  close(fd);
  return ok;
}

// Ends the process by SIGALRM after `seconds`, whatever SIGALRM's
// disposition and mask were inherited as (`timeout` set its own too).
void ArmDeadline(unsigned seconds) {
  signal(SIGALRM, SIG_DFL);
  sigset_t alarm_only;
  sigemptyset(&alarm_only);
  sigaddset(&alarm_only, SIGALRM);
  sigprocmask(SIG_UNBLOCK, &alarm_only, nullptr);
  alarm(seconds);
}

// What --api read: its exit code, and whether every PATH answered 200 with
// the first body a JSON list that is empty ("[]": no container listed).
struct ApiRead {
  int rc = 0;
  bool all_200 = true;
  bool first_empty_list = false;
};

// argv after --api: SOCKET PATH...
ApiRead ReadApi(int argc, char** argv) {
  ApiRead read;
  if (argc < 2) {
    std::fputs("fleet-probe: --api needs SOCKET and at least one PATH\n", stderr);
    read.rc = 2;
    return read;
  }
  ArmDeadline(10);  // curl --max-time 10, as the script had it
  std::string out;
  for (int i = 1; i < argc && read.rc == 0; ++i) {  // no more GETs after one went unanswered
    int status = 0;
    std::string body;
    if (!HttpGet(argv[0], argv[i], &status, &body)) {
      status = 0;
      body.clear();
      read.rc = 7;
    }
    read.all_200 = read.all_200 && status == 200;
    if (i == 1) read.first_empty_list = body.rfind("[]", 0) == 0;
    char code[8];
    std::snprintf(code, sizeof(code), "%03d", status);
    out += body + "\n@api=" + code + "\n";
  }
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
    read.rc = 1;
  return read;
}

int ApiMain(int argc, char** argv) { return ReadApi(argc, argv).rc; }

// argv after --stat-within: SECONDS PATH
int StatWithinMain(int argc, char** argv) {
  char* end = nullptr;
  const long seconds = argc == 2 ? std::strtol(argv[0], &end, 10) : 0;
  if (argc != 2 || end == argv[0] || *end != '\0' || seconds < 1 || seconds > 3600) {
    std::fputs("fleet-probe: --stat-within needs SECONDS (1-3600) and one PATH\n", stderr);
    return 2;
  }
  // SIGCHLD and SIGALRM blocked before the fork, so that sigwaitinfo
  // cannot miss either (the deadline is alarm's: no clock read here);
  // SIGCHLD at its default action, so that an inherited SIG_IGN does not
  // reap the child before waitpid sees it.
  signal(SIGCHLD, SIG_DFL);
  signal(SIGALRM, SIG_DFL);
  sigset_t child_or_alarm;
  sigemptyset(&child_or_alarm);
  sigaddset(&child_or_alarm, SIGCHLD);
  sigaddset(&child_or_alarm, SIGALRM);
  sigprocmask(SIG_BLOCK, &child_or_alarm, nullptr);
  const pid_t pid = fork();
  if (pid < 0) {
    std::perror("fleet-probe: fork");
    return 1;
  }
  if (pid == 0) {
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0)
      for (int fd = 0; fd <= 2; ++fd) dup2(null, fd);
    struct stat st;
    _exit(stat(argv[1], &st) == 0 ? 0 : 1);
  }
  alarm(static_cast<unsigned>(seconds));
  for (;;) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid)
      return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    siginfo_t info;
    const int sig = sigwaitinfo(&child_or_alarm, &info);  // SIGCHLD or EINTR: look again
    if (sig == SIGALRM) break;
  }
  kill(pid, SIGKILL);  // not waited for: it may never leave the kernel
  return 124;
}

// The GPU facts document on stdout; its elapsed_ns counts from here (after
// --api-gpu's API read, which is not the GPU's).
int GpuMain(bool pretty, bool with_context) {
  const auto started = std::chrono::steady_clock::now();
  ArmDeadline(20);  // what `timeout 20` did around it
  Report report;
  ReadHostMemory(&report.host);
  // NVML before any context: its process list says whether one may be
  // created, and the probe's own context must not be on it.
  const std::optional<Cuda> cu = ProbeCuda(&report);
  ProbeNvml(&report);
  if (cu && with_context) {
    report.cuda_context_refused = GpuHolder(report);
    if (!report.cuda_context_refused) {
      for (GpuReport& gpu : report.gpus) ProbeGpuWithContext(*cu, &gpu, &report.cuda_context);
    }
  }
  FillFromHost(&report);
  report.elapsed_ns = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                std::chrono::steady_clock::now() - started)
                                                .count());

  const std::string json = Render(report, pretty);
  if (std::fwrite(json.data(), 1, json.size(), stdout) != json.size() || std::fflush(stdout) != 0) {
    std::perror("fleet-probe: writing stdout");
    return 1;
  }
  return 0;
}

// argv after --api-gpu: auto|always SOCKET PATH...
int ApiGpuMain(int argc, char** argv) {
  const std::string_view mode = argc > 0 ? argv[0] : "";
  if (mode != "auto" && mode != "always") {
    std::fputs("fleet-probe: --api-gpu needs auto or always, SOCKET and a PATH\n", stderr);
    return 2;
  }
  const ApiRead read = ReadApi(argc - 1, argv + 1);
  if (read.rc != 0 || !read.all_200) return read.rc;
  // The marker before the GPU run: a run that the deadline or a driver ends
  // still leaves the engine's answer whole, and an empty document after it.
  if (std::fputs("@gpu=", stdout) == EOF || std::fflush(stdout) != 0) return 1;
  return GpuMain(false, mode == "always" || read.first_empty_list);
}

constexpr char kUsage[] =
    "usage: fleet-probe [--pretty] [--no-context]\n"
    "       fleet-probe --sha256 [--threads N] [--] FILE...\n"
    "       fleet-probe --api SOCKET PATH...\n"
    "       fleet-probe --api-gpu auto|always SOCKET PATH...\n"
    "       fleet-probe --stat-within SECONDS PATH\n"
    "       fleet-probe --version\n"
    "Prints this node's host memory and GPU facts (CUDA driver, NVML) as one\n"
    "JSON document on stdout. Exit 0 when printed, even without a GPU.\n"
    "--no-context: create no CUDA context (free memory from NVML or, on\n"
    "unified memory, the host's MemFree). None is created either while any\n"
    "process holds a GPU.\n"
    "--sha256: prints \"<sha256 hex>  FILE\" per file, on N threads\n"
    "(default: the CPUs), largest first; exit 1 when a file could not be hashed, 3 when\n"
    "OpenSSL's libcrypto cannot be loaded.\n"
    "--api: GETs each PATH from the HTTP server on the unix socket SOCKET and\n"
    "prints its body and \"@api=<status>\" (000: no answer); exit 7 when one\n"
    "was not answered.\n"
    "--api-gpu: --api, then, when every PATH answered 200, \"@gpu=\" and the\n"
    "GPU facts (a context with always, or when the first answer is \"[]\").\n"
    "--stat-within: stat(2) of PATH (following links) within SECONDS: exit 0\n"
    "when found, 1 on an error, 124 when it did not answer in time.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--sha256") return Sha256Main(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--api") return ApiMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--api-gpu") return ApiGpuMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--stat-within")
    return StatWithinMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--version") {
    std::printf("fleet-probe (probe_version %d), built for %s\n", kProbeVersion, kBuiltFor);
    return 0;
  }
  bool pretty = false;
  bool with_context = true;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--pretty") {
      pretty = true;
    } else if (arg == "--no-context") {
      with_context = false;
    } else if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else {
      std::fprintf(stderr, "fleet-probe: unknown argument '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }
  return GpuMain(pretty, with_context);
}
