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
// - `fleet-probe --podman-store PATH...` prints what --api prints for the
//   same PATHs (ServingContainersApiPath()'s label-filtered /containers/json
//   and /images/json) on a podman node where no API service runs, read from
//   podman's own storage instead of two `podman` starts (each with its
//   `conmon --version`; ~20 ms of a plan's node side where a start costs
//   3.4 ms, issue 48): c/storage's overlay-images/images.json and libpod's
//   BoltDB bolt_state.db (read-only, under bolt's shared flock), with a
//   container "running" only when its process is alive, conmon's child, and
//   conmon wrote no exit file (the DB keeps "running" for a container killed
//   behind podman's back until a podman command syncs it). Whenever it is
//   not sure to read what podman would (a storage.conf or containers.conf
//   setting it does not understand, SQLite's db.sql, a busy or damaged DB, a
//   nameless or incomplete image, a process it cannot read) it exits 3 with
//   the reason on stderr, and the CLI answers. `--podman-store-gpu
//   auto|always PATH...` is that, then "@gpu=" and the GPU facts, as
//   --api-gpu.
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
#include <sys/file.h>
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
#include <utility>
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

// --api-gpu's and --podman-store-gpu's end, once every PATH was answered:
// "@gpu=" and the GPU facts, with a context for `mode` "always", or for
// "auto" when the first answer was "[]" (no fleet serve runs). The marker
// comes before the GPU run: a run that the deadline or a driver ends still
// leaves the listing whole, and an empty document after it.
int GpuAfterListing(std::string_view mode, bool first_empty) {
  if (std::fputs("@gpu=", stdout) == EOF || std::fflush(stdout) != 0) return 1;
  return GpuMain(false, mode == "always" || first_empty);
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
  return GpuAfterListing(mode, read.first_empty_list);
}

// --podman-store: a podman node's running fleet serves and its images read
// from podman's own storage, where no `podman system service` answers: one
// process instead of two podman starts (each with its `conmon --version`),
// the last ~20 ms of a converged plan's node side (issue 48). It prints what
// --api prints for the same PATHs, so the controller parses one format. It
// only answers when it is sure it reads what podman would: any setting,
// file or state it does not know is exit 3 ("use the CLI"), the reason on
// stderr.

// A JSON value, enough for podman's and c/storage's records.
struct JsonValue {
  enum Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = kNull;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<JsonValue> items;
  std::vector<std::pair<std::string, JsonValue>> members;

  const JsonValue* Find(std::string_view key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : s_(text) {}
  // The whole text as one value; false on anything else.
  bool ReadDocument(JsonValue* v) {
    if (!Value(v, 0)) return false;
    Space();
    return i_ == s_.size();
  }

 private:
  void Space() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\n' || s_[i_] == '\r' || s_[i_] == '\t'))
      ++i_;
  }
  bool Literal(std::string_view word) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    return true;
  }
  static void PutUtf8(uint32_t c, std::string* out) {
    if (c < 0x80) {
      *out += static_cast<char>(c);
    } else if (c < 0x800) {
      *out += static_cast<char>(0xC0 | (c >> 6));
      *out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      *out += static_cast<char>(0xE0 | (c >> 12));
      *out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      *out += static_cast<char>(0xF0 | (c >> 18));
      *out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      *out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      *out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  bool Hex4(uint32_t* c) {
    if (i_ + 4 > s_.size()) return false;
    *c = 0;
    for (int k = 0; k < 4; ++k) {
      const char h = s_[i_++];
      *c <<= 4;
      if (h >= '0' && h <= '9')
        *c |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        *c |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        *c |= static_cast<uint32_t>(h - 'A' + 10);
      else
        return false;
    }
    return true;
  }
  bool String(std::string* out) {
    if (!Literal("\"")) return false;
    while (i_ < s_.size()) {
      const char c = s_[i_++];
      if (c == '"') return true;
      if (static_cast<unsigned char>(c) < 0x20) return false;
      if (c != '\\') {
        *out += c;
        continue;
      }
      if (i_ >= s_.size()) return false;
      const char e = s_[i_++];
      switch (e) {
        case '"':
          *out += '"';
          break;
        case '\\':
          *out += '\\';
          break;
        case '/':
          *out += '/';
          break;
        case 'b':
          *out += '\b';
          break;
        case 'f':
          *out += '\f';
          break;
        case 'n':
          *out += '\n';
          break;
        case 'r':
          *out += '\r';
          break;
        case 't':
          *out += '\t';
          break;
        case 'u': {
          uint32_t c1 = 0;
          if (!Hex4(&c1)) return false;
          if (c1 >= 0xD800 && c1 < 0xDC00) {
            uint32_t c2 = 0;
            if (!Literal("\\u") || !Hex4(&c2) || c2 < 0xDC00 || c2 >= 0xE000) return false;
            c1 = 0x10000 + ((c1 - 0xD800) << 10) + (c2 - 0xDC00);
          }
          PutUtf8(c1, out);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }
  bool Value(JsonValue* v, int depth) {
    if (depth > 64) return false;
    Space();
    if (i_ >= s_.size()) return false;
    const char c = s_[i_];
    if (c == '{') {
      ++i_;
      v->kind = JsonValue::kObject;
      Space();
      if (Literal("}")) return true;
      for (;;) {
        Space();
        std::string key;
        if (!String(&key)) return false;
        Space();
        if (!Literal(":")) return false;
        v->members.emplace_back(std::move(key), JsonValue());
        if (!Value(&v->members.back().second, depth + 1)) return false;
        Space();
        if (Literal("}")) return true;
        if (!Literal(",")) return false;
      }
    }
    if (c == '[') {
      ++i_;
      v->kind = JsonValue::kArray;
      Space();
      if (Literal("]")) return true;
      for (;;) {
        v->items.emplace_back();
        if (!Value(&v->items.back(), depth + 1)) return false;
        Space();
        if (Literal("]")) return true;
        if (!Literal(",")) return false;
      }
    }
    if (c == '"') {
      v->kind = JsonValue::kString;
      return String(&v->text);
    }
    if (Literal("true") || Literal("false")) {
      v->kind = JsonValue::kBool;
      v->boolean = s_[i_ - 1] == 'e' && s_[i_ - 2] == 'u';
      return true;
    }
    if (Literal("null")) return true;
    const size_t start = i_;
    while (i_ < s_.size() && std::strchr("+-0123456789.eE", s_[i_]) != nullptr) ++i_;
    if (i_ == start) return false;
    const std::string number(s_.substr(start, i_ - start));
    char* end = nullptr;
    v->kind = JsonValue::kNumber;
    v->number = std::strtod(number.c_str(), &end);
    return end == number.c_str() + number.size();
  }

  std::string_view s_;
  size_t i_ = 0;
};

// A bbolt database (libpod's bolt_state.db), read-only, from its bytes: the
// meta page with the highest transaction among the valid two (magic, version
// 2, FNV-64a checksum), then branch and leaf pages down from its root
// bucket; nested buckets, inline (in their parent's value) or not. Every
// offset is checked against the file: a damaged or half-understood file is
// an error, never a guess.
class BoltDb {
 public:
  // A bucket: its root page, or (root 0) the page inline in its value.
  struct Bucket {
    uint64_t root = 0;
    std::string_view inline_page;
  };
  using Visit = std::function<bool(std::string_view key, std::string_view value, bool bucket)>;

  bool Open(std::string_view bytes, std::string* why) {
    data_ = bytes;
    const std::optional<Meta> m0 = ReadMeta(0, kMinPage, why);
    if (!m0) return false;
    page_size_ = m0->page_size;
    // Meta 1 may be torn (a commit cut short): meta 0 is then the last
    // committed state, as bolt reads it.
    std::string why1;
    const std::optional<Meta> m1 = ReadMeta(page_size_, page_size_, &why1);
    const Meta& m = m1 && m1->txid > m0->txid ? *m1 : *m0;
    high_water_ = m.pgid;
    root_.root = m.root;
    return true;
  }
  const Bucket& Root() const { return root_; }

  // Each key of `bucket` in order; stops early (false) when `visit` says so
  // or on a damaged page (`why` set).
  bool ForEach(const Bucket& bucket, const Visit& visit, std::string* why) const {
    if (bucket.root == 0) return WalkPage(bucket.inline_page, visit, 0, why);
    std::string_view page;
    if (!PageAt(bucket.root, &page, why)) return false;
    return WalkPage(page, visit, 0, why);
  }
  // The value under `key` (a bucket's when `bucket`), or nullopt.
  std::optional<std::string_view> Get(const Bucket& b, std::string_view key, bool bucket,
                                      std::string* why) const {
    std::optional<std::string_view> found;
    ForEach(
        b,
        [&](std::string_view k, std::string_view v, bool is_bucket) {
          if (k != key || is_bucket != bucket) return true;
          found = v;
          return false;
        },
        why);
    return found;
  }
  // The bucket a bucket value describes; false when it is not one.
  bool BucketOf(std::string_view value, Bucket* out, std::string* why) const {
    if (value.size() < 16) {
      *why = "a bucket value shorter than its header";
      return false;
    }
    out->root = U64(value, 0);
    out->inline_page = out->root == 0 ? value.substr(16) : std::string_view();
    if (out->root == 0 && out->inline_page.size() < kPageHeader) {
      *why = "an inline bucket without its page";
      return false;
    }
    return true;
  }

 private:
  static constexpr size_t kPageHeader = 16;
  static constexpr size_t kMinPage = 512;
  static constexpr uint16_t kBranch = 0x01, kLeaf = 0x02, kMeta = 0x04;
  static constexpr uint32_t kMagic = 0xED0CDAED;
  struct Meta {
    uint32_t page_size = 0;
    uint64_t root = 0, pgid = 0, txid = 0;
  };

  static uint16_t U16(std::string_view s, size_t at) {
    uint16_t v;
    std::memcpy(&v, s.data() + at, 2);
    return v;
  }
  static uint32_t U32(std::string_view s, size_t at) {
    uint32_t v;
    std::memcpy(&v, s.data() + at, 4);
    return v;
  }
  static uint64_t U64(std::string_view s, size_t at) {
    uint64_t v;
    std::memcpy(&v, s.data() + at, 8);
    return v;
  }

  std::optional<Meta> ReadMeta(size_t at, size_t min_size, std::string* why) const {
    // meta: magic, version, page size, flags, root {pgid, sequence},
    // freelist, pgid, txid, checksum (FNV-64a of what precedes it).
    constexpr size_t kSum = 56;
    if (data_.size() < at + kPageHeader + kSum + 8 || data_.size() < at + min_size) {
      *why = "the file is shorter than its meta pages";
      return std::nullopt;
    }
    const std::string_view page = data_.substr(at);
    const std::string_view meta = page.substr(kPageHeader);
    if ((U16(page, 8) & kMeta) == 0 || U32(meta, 0) != kMagic || U32(meta, 4) != 2) {
      *why = "not a bolt meta page (magic, version 2)";
      return std::nullopt;
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t k = 0; k < kSum; ++k) {
      h ^= static_cast<unsigned char>(meta[k]);
      h *= 0x100000001b3ULL;
    }
    if (h != U64(meta, kSum)) {
      *why = "a meta page's checksum does not match";
      return std::nullopt;
    }
    Meta m;
    m.page_size = U32(meta, 8);
    m.root = U64(meta, 16);
    m.pgid = U64(meta, 40);
    m.txid = U64(meta, 48);
    if (m.page_size < kMinPage || m.page_size > (1u << 20) ||
        (m.page_size & (m.page_size - 1)) != 0) {
      *why = "a meta page with an odd page size";
      return std::nullopt;
    }
    return m;
  }

  bool PageAt(uint64_t id, std::string_view* page, std::string* why) const {
    if (id < 2 || id >= high_water_ || id > data_.size() / page_size_) {
      *why = "a page id outside the file";
      return false;
    }
    const size_t at = static_cast<size_t>(id) * page_size_;
    if (data_.size() < at + page_size_ || U64(data_, at) != id) {
      *why = "a page that is not where its id says";
      return false;
    }
    const uint64_t span = (uint64_t{U32(data_, at + 12)} + 1) * page_size_;
    if (span > data_.size() - at) {
      *why = "a page's overflow past the end of the file";
      return false;
    }
    *page = data_.substr(at, static_cast<size_t>(span));
    return true;
  }

  bool WalkPage(std::string_view page, const Visit& visit, int depth, std::string* why) const {
    if (depth > 32 || page.size() < kPageHeader) {
      *why = depth > 32 ? "branch pages nested too deep" : "a short page";
      return false;
    }
    const uint16_t flags = U16(page, 8);
    const size_t count = U16(page, 10);
    if (page.size() < kPageHeader + count * 16) {
      *why = "a page's elements past its end";
      return false;
    }
    for (size_t k = 0; k < count; ++k) {
      const size_t elem = kPageHeader + k * 16;
      if (flags & kBranch) {
        std::string_view child;
        if (!PageAt(U64(page, elem + 8), &child, why)) return false;
        if (!WalkPage(child, visit, depth + 1, why)) return false;
      } else if (flags & kLeaf) {
        const uint32_t leaf_flags = U32(page, elem);
        const uint64_t pos = elem + uint64_t{U32(page, elem + 4)};
        const uint64_t ksize = U32(page, elem + 8), vsize = U32(page, elem + 12);
        if (pos + ksize + vsize > page.size()) {
          *why = "a leaf element past its page";
          return false;
        }
        const std::string_view key = page.substr(static_cast<size_t>(pos), ksize);
        const std::string_view value = page.substr(static_cast<size_t>(pos + ksize), vsize);
        if (!visit(key, value, (leaf_flags & 0x01) != 0)) return false;
      } else {
        *why = "a page that is neither branch nor leaf";
        return false;
      }
    }
    return true;
  }

  std::string_view data_;
  size_t page_size_ = 0;
  uint64_t high_water_ = 0;
  Bucket root_;
};

// Where podman keeps its storage and its state, derived the way podman 4
// does (no `podman info`: that is the podman start this saves), and why
// not when a setting the probe does not understand may move them.
struct PodmanPaths {
  std::string graph_root;  // c/storage: overlay-images/images.json
  std::string libpod;      // libpod's static dir: bolt_state.db
};

bool ReadFd(int fd, std::string* out, int* err) {
  out->clear();
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      *err = errno;
      return false;
    }
    if (n == 0) return true;
    out->append(buf, static_cast<size_t>(n));
  }
}

bool ReadWholeFile(const std::string& path, std::string* out, int* err) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = errno;
    return false;
  }
  const bool ok = ReadFd(fd, out, err);
  close(fd);
  return ok;
}

std::string Trimmed(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// A TOML file of podman's, line by line: each "key = value" with the
// [section] it is in ("" before any). A line that is neither (an array
// continued on the next line) is reported as the key "" so that a caller
// that must understand every line can refuse it. false: the file is there
// but unreadable; a missing file is no lines.
bool TomlLines(const std::string& path,
               std::vector<std::pair<std::string, std::pair<std::string, std::string>>>* lines,
               std::string* why) {
  std::string text;
  int err = 0;
  lines->clear();
  if (!ReadWholeFile(path, &text, &err)) {
    if (err == ENOENT || err == ENOTDIR) return true;
    *why = path + ": " + std::strerror(err);
    return false;
  }
  std::string section;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = Trimmed(std::string_view(text).substr(start, end - start));
    start = end + 1;
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = Trimmed(std::string_view(line).substr(1, line.find(']') - 1));
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) {
      lines->push_back({section, {"", line}});
      continue;
    }
    std::string value = Trimmed(std::string_view(line).substr(eq + 1));
    const size_t hash = value.find(" #");
    if (hash != std::string::npos) value = Trimmed(std::string_view(value).substr(0, hash));
    lines->push_back({section, {Trimmed(std::string_view(line).substr(0, eq)), value}});
  }
  return true;
}

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] == '/' ? std::string(v) : fallback;
}

// The storage.conf files c/storage reads for this user; each must hold
// only what the probe understands: the overlay driver and settings that
// move nothing it reads (a rootless user's storage ignores the system's
// graphroot and runroot; root's must be the default).
bool CheckStorageConf(const std::string& path, bool root, const std::string& graph_root,
                      std::string* why) {
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> lines;
  if (!TomlLines(path, &lines, why)) return false;
  for (const auto& [section, kv] : lines) {
    const std::string& key = kv.first;
    const std::string& value = kv.second;
    bool understood = false;
    if (section == "storage") {
      if (key == "driver") understood = value == "\"overlay\"" || value == "'overlay'";
      if (key == "runroot") understood = true;  // the probe reads nothing under it
      if (key == "graphroot")
        understood = !root || value == "\"" + graph_root + "\"" || value == "'" + graph_root + "'";
    } else if (section == "storage.options" || section.rfind("storage.options.", 0) == 0) {
      // Mount and ownership options: how layers mount, not where records are.
      static const char* const kHarmless[] = {"mountopt",
                                              "mount_program",
                                              "ignore_chown_errors",
                                              "size",
                                              "force_mask",
                                              "skip_mount_home",
                                              "remap_uids",
                                              "remap_gids",
                                              "remap_user",
                                              "remap_group",
                                              "root-auto-userns-user",
                                              "auto-userns-min-size",
                                              "auto-userns-max-size",
                                              "pull_options",
                                              "use_hard_links",
                                              "inodes"};
      for (const char* k : kHarmless) understood = understood || key == k;
      if (key == "additionalimagestores") understood = value == "[]" || value == "[ ]";
    }
    if (!understood) {
      *why = path + ": [" + section + "] " + (key.empty() ? kv.second : key) +
             " is a setting the probe does not read as podman would";
      return false;
    }
  }
  return true;
}

// containers.conf's [engine] settings that move libpod's state, choose its
// database or narrow what podman lists: any of them set (boltdb excepted)
// and the CLI answers.
bool CheckContainersConf(const std::string& path, std::string* why) {
  std::vector<std::pair<std::string, std::pair<std::string, std::string>>> lines;
  if (!TomlLines(path, &lines, why)) return false;
  for (const auto& [section, kv] : lines) {
    if (section != "engine") continue;
    const std::string& key = kv.first;
    if (key == "database_backend" && (kv.second == "\"boltdb\"" || kv.second == "'boltdb'"))
      continue;
    // namespace: podman then lists only that libpod namespace's containers.
    if (key == "static_dir" || key == "tmp_dir" || key == "database_backend" ||
        key == "namespace") {
      *why = path + ": [engine] " + key + " is set";
      return false;
    }
  }
  return true;
}

// The *.conf files of a containers.conf.d folder (none when it is absent).
std::vector<std::string> ConfDir(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > 5 && name.compare(name.size() - 5, 5, ".conf") == 0)
      out.push_back(dir + "/" + name);
  }
  closedir(d);
  return out;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::optional<PodmanPaths> FindPodmanPaths(std::string* why) {
  for (const char* env : {"CONTAINERS_CONF", "CONTAINERS_CONF_OVERRIDE", "CONTAINERS_STORAGE_CONF",
                          "CONTAINERS_REGISTRIES_CONF"}) {
    if (env == std::string_view("CONTAINERS_REGISTRIES_CONF")) continue;  // names only
    if (std::getenv(env) != nullptr) {
      *why = std::string(env) + " is set";
      return std::nullopt;
    }
  }
  const bool root = getuid() == 0;
  const char* home = std::getenv("HOME");
  if (!root && (home == nullptr || home[0] != '/')) {
    *why = "no HOME";
    return std::nullopt;
  }
  const std::string config = root ? "" : EnvOr("XDG_CONFIG_HOME", std::string(home) + "/.config");
  PodmanPaths p;
  p.graph_root =
      root ? "/var/lib/containers/storage"
           : EnvOr("XDG_DATA_HOME", std::string(home) + "/.local/share") + "/containers/storage";
  std::vector<std::string> storage_confs = {"/usr/share/containers/storage.conf",
                                            "/etc/containers/storage.conf"};
  if (!root) storage_confs.push_back(config + "/containers/storage.conf");
  for (const std::string& f : storage_confs)
    if (!CheckStorageConf(f, root, p.graph_root, why)) return std::nullopt;
  std::vector<std::string> containers_confs = {"/usr/share/containers/containers.conf",
                                               "/etc/containers/containers.conf"};
  for (const std::string& f : ConfDir("/usr/share/containers/containers.conf.d"))
    containers_confs.push_back(f);
  for (const std::string& f : ConfDir("/etc/containers/containers.conf.d"))
    containers_confs.push_back(f);
  if (!root) {
    containers_confs.push_back("/etc/containers/containers.rootless.conf");
    for (const std::string& f : ConfDir("/etc/containers/containers.rootless.conf.d"))
      containers_confs.push_back(f);
    containers_confs.push_back(config + "/containers/containers.conf");
    for (const std::string& f : ConfDir(config + "/containers/containers.conf.d"))
      containers_confs.push_back(f);
  }
  for (const std::string& f : containers_confs)
    if (!CheckContainersConf(f, why)) return std::nullopt;
  p.libpod = p.graph_root + "/libpod";
  if (Exists(p.graph_root + "/db.sql") || Exists(p.libpod + "/db.sql")) {
    *why = "podman's state is in SQLite (db.sql), which the probe does not read";
    return std::nullopt;
  }
  return p;
}

// A process's state letter and parent from /proc/PID/stat; 'N' when there
// is no such process; false when /proc would not say.
bool ProcState(long pid, char* state, long* ppid) {
  std::string stat;
  int err = 0;
  if (!ReadWholeFile("/proc/" + std::to_string(pid) + "/stat", &stat, &err)) {
    if (err != ENOENT && err != ESRCH) return false;
    *state = 'N';
    return true;
  }
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 4 > stat.size()) return false;
  *state = stat[paren + 2];
  char* end = nullptr;
  *ppid = std::strtol(stat.c_str() + paren + 4, &end, 10);
  return end != stat.c_str() + paren + 4;
}

int64_t JsonInt(const JsonValue* v) {
  return v != nullptr && v->kind == JsonValue::kNumber ? static_cast<int64_t>(v->number) : -1;
}

// Whether podman would call this container running now. libpod's state
// says so until a podman command syncs it with the runtime: a container
// killed behind podman's back stays "running" there. So, as the runtime
// does: its process is alive (not a zombie) and still conmon's child, and
// conmon has written no exit file. false with `why` set: cannot tell.
bool RunningNow(const std::string& id, const JsonValue& state, const std::string& exits_dir,
                bool* running, std::string* why) {
  *running = false;
  if (JsonInt(state.Find("state")) != 3) return true;  // libpod's ContainerStateRunning
  const int64_t pid = JsonInt(state.Find("pid"));
  const int64_t conmon = JsonInt(state.Find("conmonPid"));
  if (pid <= 0 || conmon <= 0) {
    *why = "container " + id + " is running with no pid or conmon pid in its state";
    return false;
  }
  char st = 0;
  long ppid = 0;
  if (!ProcState(pid, &st, &ppid)) {
    *why = "cannot read the process of container " + id;
    return false;
  }
  if (st == 'N' || st == 'Z' || st == 'X') return true;  // gone: podman would find it exited
  if (ppid != conmon) {
    // Its pid is another process's now (reused), or a runtime the probe
    // does not know reparents it: the CLI decides.
    *why = "the process of container " + id + " is not its conmon's child";
    return false;
  }
  if (Exists(exits_dir + "/" + id)) return true;  // conmon saw it exit
  *running = true;
  return true;
}

// One key's string value, "" when absent or not a string.
std::string JsonText(const JsonValue* v) {
  return v != nullptr && v->kind == JsonValue::kString ? v->text : "";
}

// libpod's database file, whole, read under a shared flock as bolt's
// readers hold it: a writer holds it exclusively for as long as it has the
// DB open (podman: per command), so the pages read are one commit's.
// Held by a writer now: the CLI answers (it waits its turn).
bool ReadBoltFile(const std::string& db_path, std::string* bytes, std::string* why) {
  const int fd = open(db_path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = db_path + ": " + std::strerror(errno);
    return false;
  }
  if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
    *why = db_path + ": busy (" + std::strerror(errno) + ")";
    close(fd);
    return false;
  }
  int err = 0;
  const bool ok = ReadFd(fd, bytes, &err);
  close(fd);
  if (!ok) *why = db_path + ": " + std::strerror(err);
  return ok;
}

// The running containers carrying label `label`, as /containers/json's
// answer ([{"Id":…,"Names":[…]}]) with a filter on that label.
bool PodmanServes(const PodmanPaths& p, const std::string& label, std::string* body,
                  std::string* why) {
  const std::string db_path = p.libpod + "/bolt_state.db";
  std::string bytes;
  if (!ReadBoltFile(db_path, &bytes, why)) return false;
  BoltDb db;
  if (!db.Open(bytes, why)) {
    *why = db_path + ": " + *why;
    return false;
  }
  // The runtime config podman checked its own against: the graph root must
  // be the one derived here, and its tmp dir holds conmon's exit files.
  BoltDb::Bucket config, ctrs;
  const auto config_value = db.Get(db.Root(), "runtime-config", true, why);
  const auto ctrs_value = db.Get(db.Root(), "ctr", true, why);
  if (!why->empty()) return false;
  if (!config_value || !db.BucketOf(*config_value, &config, why)) {
    *why = db_path + ": no runtime-config bucket";
    return false;
  }
  const auto graph_root = db.Get(config, "graph-root", false, why);
  const auto tmp_dir = db.Get(config, "tmp-dir", false, why);
  const auto static_dir = db.Get(config, "static-dir", false, why);
  const auto driver = db.Get(config, "graph-driver-name", false, why);  // "": the default
  if (!graph_root || *graph_root != p.graph_root || !static_dir ||
      *static_dir != p.graph_root + "/libpod" || !tmp_dir || tmp_dir->empty() ||
      (*tmp_dir)[0] != '/' || (driver && !driver->empty() && *driver != "overlay")) {
    *why = db_path + ": its runtime config is not the storage derived here";
    return false;
  }
  const std::string exits_dir = std::string(*tmp_dir) + "/exits";
  std::vector<std::pair<std::string, std::string>> found;  // id, name
  bool ok = true;
  if (ctrs_value) {
    if (!db.BucketOf(*ctrs_value, &ctrs, why)) return false;
    db.ForEach(
        ctrs,
        [&](std::string_view id, std::string_view value, bool bucket) {
          BoltDb::Bucket ctr;
          if (!bucket || !db.BucketOf(value, &ctr, why)) {
            ok = false;
            if (why->empty()) *why = "a container that is not a bucket";
            return false;
          }
          const auto config_json = db.Get(ctr, "config", false, why);
          const auto state_json = db.Get(ctr, "state", false, why);
          JsonValue c, s;
          if (!config_json || !state_json || !JsonReader(*config_json).ReadDocument(&c) ||
              !JsonReader(*state_json).ReadDocument(&s)) {
            *why = "container " + std::string(id) + ": its config or state is not JSON";
            ok = false;
            return false;
          }
          const JsonValue* labels = c.Find("labels");
          if (labels == nullptr || labels->Find(label) == nullptr) return true;
          bool running = false;
          if (!RunningNow(std::string(id), s, exits_dir, &running, why)) {
            ok = false;
            return false;
          }
          const std::string name = JsonText(c.Find("name"));
          if (running && !name.empty()) found.emplace_back(std::string(id), name);
          return true;
        },
        why);
  }
  if (!ok || !why->empty()) return false;
  JsonWriter w(false);
  w.BeginArray();
  for (const auto& [id, name] : found) {
    w.BeginObject();
    w.Key("Id");
    w.String(id);
    w.Key("Names");
    w.BeginArray();
    w.String(name);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  *body = w.Finish();
  body->pop_back();  // Finish's newline: --api's "\n@api=" follows
  return true;
}

// A stored name's repository, as reference.TrimNamed gives it; "" when the
// name is not the fully qualified form podman stores (then the CLI).
std::string RepositoryOf(const std::string& name) {
  const size_t slash = name.find('/');
  if (slash == std::string::npos) return "";
  const std::string host = name.substr(0, slash);
  if (host.find('.') == std::string::npos && host.find(':') == std::string::npos &&
      host != "localhost")
    return "";
  const size_t at = name.find('@');
  if (at != std::string::npos) return name.substr(0, at);
  const size_t colon = name.rfind(':');
  if (colon != std::string::npos && colon > name.rfind('/')) return name.substr(0, colon);
  return name;
}

// The file c/storage keeps an image's big-data item `key` in (its
// makeBigDataBaseName): the key itself when only [.0-9a-z], else "=" and
// its base64.
std::string BigDataFileName(const std::string& key) {
  bool plain = true;
  for (const char c : key)
    plain = plain && (c == '.' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'));
  if (plain) return key;
  static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out = "=";
  size_t i = 0;
  for (; i + 2 < key.size(); i += 3) {
    const uint32_t n = (uint32_t{static_cast<unsigned char>(key[i])} << 16) |
                       (uint32_t{static_cast<unsigned char>(key[i + 1])} << 8) |
                       static_cast<unsigned char>(key[i + 2]);
    for (int k = 3; k >= 0; --k) out += kB64[(n >> (6 * k)) & 63];
  }
  if (i < key.size()) {
    uint32_t n = uint32_t{static_cast<unsigned char>(key[i])} << 16;
    if (i + 1 < key.size()) n |= uint32_t{static_cast<unsigned char>(key[i + 1])} << 8;
    out += kB64[(n >> 18) & 63];
    out += kB64[(n >> 12) & 63];
    out += i + 1 < key.size() ? kB64[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

// c/storage's image records as /images/json's answer, with what `podman
// image ls` shows: RepoTags its names, RepoDigests each name's repository
// with each of the image's digests (sorted, as podman prints them).
bool PodmanImages(const PodmanPaths& p, std::string* body, std::string* why) {
  const std::string dir = p.graph_root + "/overlay-images";
  std::string text;
  int err = 0;
  if (!ReadWholeFile(dir + "/images.json", &text, &err)) {
    if (err != ENOENT || !Exists(dir)) {
      *why = dir + "/images.json: " + std::strerror(err);
      return false;
    }
    text = "[]";  // c/storage writes the file with its first image
  }
  JsonValue images;
  if (!JsonReader(text).ReadDocument(&images) || images.kind != JsonValue::kArray) {
    *why = dir + "/images.json is not a JSON list";
    return false;
  }
  // An image's top layer must be there: a `load` cut short leaves a record
  // without it, which podman's listing refuses (the CLI says which).
  std::string layers_text;
  JsonValue layers;
  if (!ReadWholeFile(p.graph_root + "/overlay-layers/layers.json", &layers_text, &err))
    layers_text = "[]";
  if (!JsonReader(layers_text).ReadDocument(&layers) || layers.kind != JsonValue::kArray) {
    *why = "overlay-layers/layers.json is not a JSON list";
    return false;
  }
  std::vector<std::string> layer_ids;
  for (const JsonValue& l : layers.items) layer_ids.push_back(JsonText(l.Find("id")));
  JsonWriter w(false);
  w.BeginArray();
  for (const JsonValue& image : images.items) {
    const std::string id = JsonText(image.Find("id"));
    const JsonValue* names = image.Find("names");
    const JsonValue* flags = image.Find("flags");
    const std::string layer = JsonText(image.Find("layer"));
    if (id.empty() || names == nullptr || names->kind != JsonValue::kArray ||
        names->items.empty()) {
      // A nameless image is listed or not as podman decides whether it is
      // an intermediate one (other images' parent): the CLI decides.
      *why = "image " + id + " has no name";
      return false;
    }
    if ((flags != nullptr && flags->Find("incomplete") != nullptr) ||
        (!layer.empty() &&
         std::find(layer_ids.begin(), layer_ids.end(), layer) == layer_ids.end())) {
      *why = "image " + id + " is incomplete";
      return false;
    }
    // Every big-data item (manifest, config, signatures) in its file: a
    // record that lost one (a `load` cut short) makes podman's listing fail
    // with the record's ID, which the plan names with its fix.
    if (const JsonValue* big = image.Find("big-data-names"); big != nullptr) {
      for (const JsonValue& key : big->items) {
        if (!Exists(dir + "/" + id + "/" + BigDataFileName(key.text))) {
          *why = "image " + id + " lacks its " + key.text + " (a broken record)";
          return false;
        }
      }
    }
    std::vector<std::string> digests;
    if (const JsonValue* ds = image.Find("digests"); ds != nullptr)
      for (const JsonValue& d : ds->items) digests.push_back(JsonText(&d));
    digests.push_back(JsonText(image.Find("digest")));
    std::vector<std::string> tags, repo_digests;
    for (const JsonValue& n : names->items) {
      const std::string name = JsonText(&n);
      const std::string repo = RepositoryOf(name);
      if (repo.empty()) {
        *why = "image " + id + " has a name the probe does not read: " + name;
        return false;
      }
      tags.push_back(name);
      for (const std::string& d : digests)
        if (!d.empty()) repo_digests.push_back(repo + "@" + d);
    }
    std::sort(repo_digests.begin(), repo_digests.end());
    repo_digests.erase(std::unique(repo_digests.begin(), repo_digests.end()), repo_digests.end());
    w.BeginObject();
    w.Key("Id");
    w.String("sha256:" + id);
    w.Key("RepoTags");
    w.BeginArray();
    for (const std::string& t : tags) w.String(t);
    w.EndArray();
    w.Key("RepoDigests");
    w.BeginArray();
    for (const std::string& d : repo_digests) w.String(d);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  *body = w.Finish();
  body->pop_back();  // Finish's newline: --api's "\n@api=" follows
  return true;
}

// The label of the API path ServingContainersApiPath() builds,
// /containers/json?filters={"label":["KEY"]} percent-encoded; "" for any
// other path.
std::string LabelFilterOf(std::string_view path) {
  std::string decoded;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '%' && i + 2 < path.size()) {
      decoded +=
          static_cast<char>(std::strtol(std::string(path.substr(i + 1, 2)).c_str(), nullptr, 16));
      i += 2;
    } else {
      decoded += path[i];
    }
  }
  const std::string prefix = "/containers/json?filters={\"label\":[\"", suffix = "\"]}";
  if (decoded.size() <= prefix.size() + suffix.size() || decoded.rfind(prefix, 0) != 0 ||
      decoded.compare(decoded.size() - suffix.size(), suffix.size(), suffix) != 0)
    return "";
  const std::string label =
      decoded.substr(prefix.size(), decoded.size() - prefix.size() - suffix.size());
  return label.find_first_of("\"=\\") == std::string::npos ? label : "";
}

// argv after --podman-store: PATH... (ServingContainersApiPath()'s, and
// /images/json). Prints what --api prints for them; `first_empty` as
// ApiRead's. Exit 0, 2 on a bad command line, 3 when the CLI must answer.
int ReadPodmanStore(int argc, char** argv, bool* first_empty) {
  if (argc < 1) {
    std::fputs("fleet-probe: --podman-store needs at least one PATH\n", stderr);
    return 2;
  }
  // As --api's: a read that hangs (a storage on a stuck mount) ends, and
  // the script's CLI answers.
  ArmDeadline(10);
  std::string why;
  const std::optional<PodmanPaths> paths = FindPodmanPaths(&why);
  std::string out;
  for (int i = 0; i < argc && paths; ++i) {
    std::string body;
    const std::string_view path = argv[i];
    const std::string label = LabelFilterOf(path);
    bool ok = false;
    if (!label.empty()) {
      ok = PodmanServes(*paths, label, &body, &why);
    } else if (path == "/images/json") {
      ok = PodmanImages(*paths, &body, &why);
    } else {
      why = "a path the probe does not answer: " + std::string(path);
    }
    if (!ok) break;
    if (i == 0) *first_empty = body == "[]";
    out += body + "\n@api=200\n";
    if (i + 1 == argc) {
      if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0)
        return 1;
      return 0;
    }
  }
  std::fprintf(stderr, "fleet-probe: --podman-store: %s: use the CLI\n", why.c_str());
  return 3;
}

int PodmanStoreMain(int argc, char** argv) {
  bool first_empty = false;
  return ReadPodmanStore(argc, argv, &first_empty);
}

// argv after --podman-store-gpu: auto|always PATH...
int PodmanStoreGpuMain(int argc, char** argv) {
  const std::string_view mode = argc > 0 ? argv[0] : "";
  if (mode != "auto" && mode != "always") {
    std::fputs("fleet-probe: --podman-store-gpu needs auto or always and a PATH\n", stderr);
    return 2;
  }
  bool first_empty = false;
  const int rc = ReadPodmanStore(argc - 1, argv + 1, &first_empty);
  if (rc != 0) return rc;
  return GpuAfterListing(mode, first_empty);
}

constexpr char kUsage[] =
    "usage: fleet-probe [--pretty] [--no-context]\n"
    "       fleet-probe --sha256 [--threads N] [--] FILE...\n"
    "       fleet-probe --api SOCKET PATH...\n"
    "       fleet-probe --api-gpu auto|always SOCKET PATH...\n"
    "       fleet-probe --podman-store PATH...\n"
    "       fleet-probe --podman-store-gpu auto|always PATH...\n"
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
    "--podman-store: what --api prints for the PATHs (the serves' and\n"
    "/images/json), read from podman's own storage; exit 3 when podman's CLI\n"
    "must answer instead (the reason on stderr).\n"
    "--podman-store-gpu: --podman-store, then \"@gpu=\" and the GPU facts.\n"
    "--stat-within: stat(2) of PATH (following links) within SECONDS: exit 0\n"
    "when found, 1 on an error, 124 when it did not answer in time.\n";

}  // namespace

#ifndef FLEET_PROBE_NO_MAIN  // fleet_probe_store_test.cc includes this file
int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--sha256") return Sha256Main(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--api") return ApiMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--api-gpu") return ApiGpuMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--podman-store")
    return PodmanStoreMain(argc - 2, argv + 2);
  if (argc > 1 && std::string_view(argv[1]) == "--podman-store-gpu")
    return PodmanStoreGpuMain(argc - 2, argv + 2);
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
#endif  // FLEET_PROBE_NO_MAIN
