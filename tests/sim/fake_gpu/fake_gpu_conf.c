/* Reads fleet-sim's fake GPU config (see fake_gpu.h and tests/sim/README.md).
 *
 *   # key = value, one a line; '#' starts a comment
 *   profile = gb10            # or h200, or none (no GPU): sets every default
 *   free_bytes = 103401336832 # then any key overrides the profile's value
 *
 * Keys: profile name uuid compute_capability integrated multiprocessors
 * total_bytes free_bytes unlock_gain_bytes page_cache_bytes nvml_memory (supported|unsupported)
 * processes (unsupported | empty | PID:BYTES|PID:na,...) driver_version
 * cuda_version sysfs cu_init_error context_log. An unknown key or a bad value makes the
 * whole config invalid: the libraries then fail to initialise and say why on
 * stderr, rather than simulate something nobody asked for. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fake_gpu.h"

#define GIB (1024ULL * 1024 * 1024)
#define MIB (1024ULL * 1024)

static void set_text(char *dst, size_t size, const char *src) { snprintf(dst, size, "%s", src); }

static int parse_u64(const char *s, unsigned long long *out) {
  char *end = NULL;
  if (!isdigit((unsigned char)*s)) return 0;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno != 0 || *end != '\0') return 0;
  *out = v;
  return 1;
}

static int parse_int(const char *s, int *out) {
  unsigned long long v = 0;
  if (!parse_u64(s, &v) || v > 0x7fffffff) return 0;
  *out = (int)v;
  return 1;
}

static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = tolower(c);
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

/* "GPU-5b3e8f2a-91c4-4d7e-b0a6-3f1c2d9e8a47" or the same without "GPU-". */
static int parse_uuid(const char *s, struct fake_gpu *gpu) {
  int n = 0;
  if (strncmp(s, "GPU-", 4) == 0) s += 4;
  for (; *s != '\0'; ++s) {
    if (*s == '-') continue;
    const int hi = hex_value((unsigned char)s[0]);
    const int lo = s[1] != '\0' ? hex_value((unsigned char)s[1]) : -1;
    if (hi < 0 || lo < 0 || n == 16) return 0;
    gpu->uuid[n++] = (unsigned char)(hi << 4 | lo);
    ++s;
  }
  if (n != 16) return 0;
  char *t = gpu->uuid_text;
  t += sprintf(t, "GPU-");
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) *t++ = '-';
    t += sprintf(t, "%02x", gpu->uuid[i]);
  }
  return 1;
}

/* "unsupported", "" / "empty" / "none", or "PID:BYTES|PID:na,..." */
static int parse_processes(const char *s, struct fake_gpu *gpu) {
  gpu->process_count = 0;
  gpu->processes_supported = 1;
  if (strcmp(s, "unsupported") == 0) {
    gpu->processes_supported = 0;
    return 1;
  }
  if (*s == '\0' || strcmp(s, "empty") == 0 || strcmp(s, "none") == 0) return 1;
  char buf[2048];
  set_text(buf, sizeof buf, s);
  char *save = NULL;
  for (char *item = strtok_r(buf, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
    while (isspace((unsigned char)*item)) ++item;
    char *colon = strchr(item, ':');
    if (colon == NULL || gpu->process_count == FAKE_GPU_MAX_PROCESSES) return 0;
    *colon = '\0';
    char *used = colon + 1;
    for (char *e = used + strlen(used); e > used && isspace((unsigned char)e[-1]);) *--e = '\0';
    struct fake_gpu_process *p = &gpu->processes[gpu->process_count];
    unsigned long long pid = 0;
    if (!parse_u64(item, &pid) || pid == 0 || pid > 0xffffffffULL) return 0;
    p->pid = (unsigned int)pid;
    if (strcmp(used, "na") == 0) {
      p->used_known = 0;
      p->used_bytes = 0;
    } else if (parse_u64(used, &p->used_bytes)) {
      p->used_known = 1;
    } else {
      return 0;
    }
    ++gpu->process_count;
  }
  return 1;
}

static void profile_defaults(struct fake_gpu *gpu, const char *profile) {
  memset(gpu, 0, sizeof *gpu);
  set_text(gpu->profile, sizeof gpu->profile, profile);
  set_text(gpu->driver_version, sizeof gpu->driver_version, "580.95.05");
  gpu->cuda_version = 13000;
  set_text(gpu->sysfs, sizeof gpu->sysfs, "/srv/sys");
  gpu->processes_supported = 1;
  if (strcmp(profile, "gb10") == 0) {
    /* DGX Spark: unified memory, so NVML (and nvidia-smi) report no memory
     * figures; cuMemGetInfo answers, and the display holds ~2 GiB until the
     * nvidia_drm unlock (modeset=1 fbdev=0). */
    set_text(gpu->name, sizeof gpu->name, "NVIDIA GB10");
    parse_uuid("GPU-5b3e8f2a-91c4-4d7e-b0a6-3f1c2d9e8a47", gpu);
    gpu->cc_major = 12;
    gpu->cc_minor = 1;
    gpu->integrated = 1;
    gpu->multiprocessors = 48;
    gpu->total_bytes = 128526893056ULL; /* 119.7 GiB */
    gpu->free_bytes = 103401336832ULL;  /* 96.3 GiB */
    gpu->unlock_gain_bytes = 2 * GIB;
    gpu->nvml_memory_supported = 0;
  } else if (strcmp(profile, "h200") == 0) {
    set_text(gpu->name, sizeof gpu->name, "NVIDIA H200");
    parse_uuid("GPU-0c7d41e9-6a2b-4f83-9e15-d24b7a0c6f31", gpu);
    gpu->cc_major = 9;
    gpu->cc_minor = 0;
    gpu->integrated = 0;
    gpu->multiprocessors = 132;
    gpu->total_bytes = 143771 * MIB;
    gpu->free_bytes = 143000 * MIB;
    gpu->unlock_gain_bytes = 0;
    gpu->nvml_memory_supported = 1;
  }
}

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) ++s;
  for (char *e = s + strlen(s); e > s && isspace((unsigned char)e[-1]);) *--e = '\0';
  return s;
}

/* Applies one key; 0 when the key or its value is bad. */
static int apply_key(struct fake_gpu *gpu, const char *key, const char *value) {
  if (strcmp(key, "name") == 0) {
    if (*value == '\0' || strlen(value) >= sizeof gpu->name) return 0;
    set_text(gpu->name, sizeof gpu->name, value);
    return 1;
  }
  if (strcmp(key, "uuid") == 0) return parse_uuid(value, gpu);
  if (strcmp(key, "compute_capability") == 0) {
    char extra;
    return sscanf(value, "%d.%d%c", &gpu->cc_major, &gpu->cc_minor, &extra) == 2 &&
           gpu->cc_major >= 0 && gpu->cc_minor >= 0;
  }
  if (strcmp(key, "integrated") == 0) {
    if (strcmp(value, "0") != 0 && strcmp(value, "1") != 0) return 0;
    gpu->integrated = value[0] == '1';
    return 1;
  }
  if (strcmp(key, "multiprocessors") == 0) return parse_int(value, &gpu->multiprocessors);
  if (strcmp(key, "total_bytes") == 0) return parse_u64(value, &gpu->total_bytes);
  if (strcmp(key, "free_bytes") == 0) return parse_u64(value, &gpu->free_bytes);
  if (strcmp(key, "unlock_gain_bytes") == 0) return parse_u64(value, &gpu->unlock_gain_bytes);
  if (strcmp(key, "page_cache_bytes") == 0) return parse_u64(value, &gpu->page_cache_bytes);
  if (strcmp(key, "nvml_memory") == 0) {
    if (strcmp(value, "supported") == 0) {
      gpu->nvml_memory_supported = 1;
    } else if (strcmp(value, "unsupported") == 0) {
      gpu->nvml_memory_supported = 0;
    } else {
      return 0;
    }
    return 1;
  }
  if (strcmp(key, "processes") == 0) return parse_processes(value, gpu);
  if (strcmp(key, "driver_version") == 0) {
    if (*value == '\0' || strlen(value) >= sizeof gpu->driver_version) return 0;
    set_text(gpu->driver_version, sizeof gpu->driver_version, value);
    return 1;
  }
  if (strcmp(key, "cuda_version") == 0) return parse_int(value, &gpu->cuda_version);
  if (strcmp(key, "sysfs") == 0) {
    if (value[0] != '/' || strlen(value) >= sizeof gpu->sysfs) return 0;
    set_text(gpu->sysfs, sizeof gpu->sysfs, value);
    return 1;
  }
  if (strcmp(key, "cu_init_error") == 0) return parse_int(value, &gpu->cu_init_error);
  if (strcmp(key, "context_log") == 0) {
    if ((value[0] != '/' && value[0] != '\0') || strlen(value) >= sizeof gpu->context_log) return 0;
    set_text(gpu->context_log, sizeof gpu->context_log, value);
    return 1;
  }
  return 0;
}

enum fake_gpu_load fake_gpu_load(struct fake_gpu *gpu, const char *who) {
  const char *env = getenv("FLEET_FAKE_GPU");
  const char *path = env != NULL && *env != '\0' ? env : FAKE_GPU_DEFAULT_CONF;
  FILE *f = fopen(path, "r");
  if (f == NULL) {
    fprintf(stderr, "%s: no simulated GPU: cannot read %s: %s\n", who, path, strerror(errno));
    return FAKE_GPU_NONE;
  }
  /* Two passes: the profile sets the defaults, whatever line names it. */
  char line[4096];
  char profile[32] = "";
  int lineno = 0;
  while (fgets(line, sizeof line, f) != NULL) {
    char *hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char *eq = strchr(line, '=');
    if (eq == NULL) continue; /* judged in the second pass */
    *eq = '\0';
    if (strcmp(trim(line), "profile") == 0) set_text(profile, sizeof profile, trim(eq + 1));
  }
  if (strcmp(profile, "none") == 0) {
    fclose(f);
    return FAKE_GPU_NONE;
  }
  if (strcmp(profile, "gb10") != 0 && strcmp(profile, "h200") != 0) {
    fprintf(stderr, "%s: %s: profile must be gb10, h200 or none, not '%s'\n", who, path, profile);
    fclose(f);
    return FAKE_GPU_INVALID;
  }
  profile_defaults(gpu, profile);
  rewind(f);
  while (fgets(line, sizeof line, f) != NULL) {
    ++lineno;
    if (strchr(line, '\n') == NULL && !feof(f)) {
      fprintf(stderr, "%s: %s:%d: line too long\n", who, path, lineno);
      fclose(f);
      return FAKE_GPU_INVALID;
    }
    char *hash = strchr(line, '#');
    if (hash != NULL) *hash = '\0';
    char *text = trim(line);
    if (*text == '\0') continue;
    char *eq = strchr(text, '=');
    if (eq == NULL) {
      fprintf(stderr, "%s: %s:%d: expected key = value\n", who, path, lineno);
      fclose(f);
      return FAKE_GPU_INVALID;
    }
    *eq = '\0';
    char *key = trim(text);
    char *value = trim(eq + 1);
    if (strcmp(key, "profile") == 0) continue;
    if (!apply_key(gpu, key, value)) {
      fprintf(stderr, "%s: %s:%d: bad key or value: %s = %s\n", who, path, lineno, key, value);
      fclose(f);
      return FAKE_GPU_INVALID;
    }
  }
  fclose(f);
  if (gpu->free_bytes > gpu->total_bytes) {
    fprintf(stderr, "%s: %s: free_bytes %llu exceeds total_bytes %llu\n", who, path,
            gpu->free_bytes, gpu->total_bytes);
    return FAKE_GPU_INVALID;
  }
  if (gpu->page_cache_bytes > gpu->free_bytes) {
    fprintf(stderr, "%s: %s: page_cache_bytes %llu exceeds free_bytes %llu\n", who, path,
            gpu->page_cache_bytes, gpu->free_bytes);
    return FAKE_GPU_INVALID;
  }
  if (gpu->page_cache_bytes != 0 && !gpu->integrated) {
    fprintf(stderr,
            "%s: %s: page_cache_bytes needs integrated = 1 (a discrete GPU's memory "
            "holds no page cache)\n",
            who, path);
    return FAKE_GPU_INVALID;
  }
  return FAKE_GPU_OK;
}

/* The first character of a sysfs bool parameter file, or 0 if unreadable. */
static int read_param(const char *dir, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 0;
  const int c = fgetc(f);
  fclose(f);
  return c == EOF ? 0 : c;
}

unsigned long long fake_gpu_free_now(const struct fake_gpu *gpu) {
  char params[512];
  snprintf(params, sizeof params, "%s/module/nvidia_drm/parameters", gpu->sysfs);
  struct stat st;
  int display_released;
  if (stat(params, &st) != 0) {
    /* nvidia_drm not loaded: CUDA does not need it (nvidia.ko serves CUDA),
     * and without a display driver nothing holds display memory. */
    display_released = 1;
  } else {
    display_released = read_param(params, "modeset") == 'Y' && read_param(params, "fbdev") == 'N';
  }
  unsigned long long free = gpu->free_bytes;
  if (display_released) free += gpu->unlock_gain_bytes;
  if (free > gpu->total_bytes || free < gpu->free_bytes) free = gpu->total_bytes;
  return free;
}

unsigned long long fake_gpu_cuda_free_now(const struct fake_gpu *gpu) {
  const unsigned long long free = fake_gpu_free_now(gpu);
  if (!gpu->integrated) return free;
  return free > gpu->page_cache_bytes ? free - gpu->page_cache_bytes : 0;
}
