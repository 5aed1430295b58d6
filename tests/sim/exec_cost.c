/* fleet-sim --exec-cost MS: a node where starting a process is slow.
 *
 * On some machines of the lab's kind a process start (`sh -c true`) costs
 * 3-4 ms where it costs ~0.9 ms here, and a plan's node side is a few
 * process starts. This library stands in for that machine: preloaded
 * (LD_PRELOAD, set by fleet-sim in the node's sshd environment and in its
 * sessions' through sshd's SetEnv), it burns FLEET_SIM_EXEC_COST_MS of CPU
 * time in every dynamically linked process the node starts, before main,
 * as a slow loader and page faults would: sshd's re-exec per connection,
 * the session's shell, every command the shell runs, podman and its
 * conmon.
 *
 * A static binary (the release's fleet-probe) is not loaded through ld.so
 * and would skip the constructor, which would flatter it: on a slow
 * machine its start is slow too. So execve() is wrapped: when the target
 * is a static ELF (no PT_INTERP), the caller burns the same time just
 * before the exec, in the process that becomes the static program. What
 * Go starts with raw syscalls (podman starting conmon) pays in conmon's
 * own constructor, conmon being dynamic.
 *
 * Accounting: where /srv/sim/exec.log exists (FLEET_SIM_EXEC_LOG: another
 * file), every start appends one line "PID PPID EXE" (O_APPEND, one
 * write), so a test or bench counts the processes a plan runs on the node.
 *
 * Only libc; built by fleet-sim with ${CC:-cc} -shared -fPIC -ldl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The accounting file: FLEET_SIM_EXEC_LOG (a test's), else the node's. */
static const char* LogPath(void) {
  const char* p = getenv("FLEET_SIM_EXEC_LOG");
  return p != NULL && *p != '\0' ? p : "/srv/sim/exec.log";
}

static double CpuMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* Spins until this thread has used FLEET_SIM_EXEC_COST_MS more CPU time:
 * CPU, not sleep, so that on busy cores it costs what a slow start costs. */
static void Burn(void) {
  const char* v = getenv("FLEET_SIM_EXEC_COST_MS");
  if (v == NULL || *v == '\0') return;
  const double ms = atof(v);
  if (!(ms > 0)) return;
  const double until = CpuMs() + ms;
  volatile unsigned x = 0;
  while (CpuMs() < until)
    for (int i = 0; i < 1000; i++) x += i;
}

static void Log(const char* exe) {
  const char* path = LogPath();
  if (access(path, W_OK) != 0) return;
  char line[PATH_MAX + 64];
  const int n = snprintf(line, sizeof line, "%d %d %s\n", (int)getpid(), (int)getppid(), exe);
  const int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return;
  if (n > 0) (void)!write(fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
  close(fd);
}

__attribute__((constructor)) static void OnStart(void) {
  Burn();
  char exe[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = '\0';
  Log(exe);
}

/* 1 when `path` is an ELF executable without an interpreter (static). */
static int IsStaticElf(const char* path) {
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  int is_static = 0;
  Elf64_Ehdr eh;
  if (read(fd, &eh, sizeof eh) == (ssize_t)sizeof eh && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
    is_static = 1;
    for (int i = 0; i < eh.e_phnum; i++) {
      Elf64_Phdr ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (Elf64_Off)i * sizeof ph)) !=
          (ssize_t)sizeof ph) {
        is_static = 0;
        break;
      }
      if (ph.p_type == PT_INTERP) {
        is_static = 0;
        break;
      }
    }
  }
  close(fd);
  return is_static;
}

int execve(const char* path, char* const argv[], char* const envp[]) {
  static int (*real)(const char*, char* const[], char* const[]);
  if (real == NULL) real = (int (*)(const char*, char* const[], char* const[]))dlsym(RTLD_NEXT, "execve");
  if (IsStaticElf(path)) {
    Burn();
    Log(path);
  }
  return real(path, argv, envp);
}
