#!/usr/bin/env python3
"""fleet-probe against fleet-sim's fake CUDA driver and NVML (this folder).

Runs each given fleet-probe build with LD_LIBRARY_PATH at the fake
libcuda.so.1 / libnvidia-ml.so.1 and a fake GPU config per case, and checks
the JSON figure by figure: the gb10 and h200 profiles, the free memory that
follows the simulated nvidia_drm parameters (display RAM unlock), NVML's
process list (unified-memory "N/A" figures, NOT_SUPPORTED, a list longer than
the probe's first buffer), and a driver without a GPU or with a broken config.
Also calls nvmlDeviceGetMemoryInfo directly (NOT_SUPPORTED on GB10, as the
nvidia-smi stand-in's [N/A]).

Usage: fake_gpu_test.py FLEET_PROBE [FLEET_PROBE...] FAKE_LIB_DIR
"""
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile

MIB = 1 << 20
GIB = 1 << 30
GB10_UUID = "GPU-5b3e8f2a-91c4-4d7e-b0a6-3f1c2d9e8a47"
GB10_TOTAL = 128526893056
GB10_FREE = 103401336832
GB10_GAIN = 2 * GIB
H200_UUID = "GPU-0c7d41e9-6a2b-4f83-9e15-d24b7a0c6f31"
H200_TOTAL = 143771 * MIB
H200_FREE = 143000 * MIB

failures = []


def check(cond, what, doc=None):
    if not cond:
        failures.append(what + ("" if doc is None else "\n    " + json.dumps(doc)))


class Node:
    """A node's fake GPU config and its sysfs nvidia_drm parameters."""

    def __init__(self, top, name):
        self.dir = os.path.join(top, name)
        self.sysfs = os.path.join(self.dir, "sys")
        self.conf = os.path.join(self.dir, "fake-gpu.conf")
        os.makedirs(self.dir)
        self.set_drm("N", "Y")

    def params(self):
        return os.path.join(self.sysfs, "module", "nvidia_drm", "parameters")

    def set_drm(self, modeset, fbdev):
        """(None, None): the module is unloaded (no parameters dir)."""
        shutil.rmtree(self.params(), ignore_errors=True)
        if modeset is None:
            return
        os.makedirs(self.params())
        for name, value in (("modeset", modeset), ("fbdev", fbdev)):
            with open(os.path.join(self.params(), name), "w") as f:
                f.write(value + "\n")

    def write_conf(self, text, sysfs=True):
        with open(self.conf, "w") as f:
            f.write(text)
            if sysfs:
                f.write("\nsysfs = %s\n" % self.sysfs)


def meminfo_text(total, free, page_cache):
    """A /proc/meminfo for a unified-memory node whose fake GPU has `free`
    bytes available of which `page_cache` is clean page cache: the figures
    fleet-sim's node gets from /srv/sim/meminfo (bind-mounted over
    /proc/meminfo), in the kernel's kB."""
    kb = lambda b: "%d kB" % (b // 1024)
    return ("MemTotal:       %s\nMemFree:        %s\nMemAvailable:   %s\n"
            "Buffers:        0 kB\nCached:         %s\nShmem:          0 kB\n"
            "SwapFree:       0 kB\n" % (kb(total), kb(free - page_cache), kb(free),
                                         kb(page_cache)))


def run_probe(probe, libdir, conf, *args, meminfo=None, env_extra=None):
    """meminfo: the text the probe reads as /proc/meminfo, bind-mounted over
    it in a mount namespace of its own (as fleet-sim's node does)."""
    env = dict(os.environ, LD_LIBRARY_PATH=libdir, FLEET_FAKE_GPU=conf, **(env_extra or {}))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    argv = [probe, *args]
    if meminfo is not None:
        path = conf + ".meminfo"
        with open(path, "w") as f:
            f.write(meminfo)
        argv = ["unshare", "-rm", "sh", "-c",
                'mount --bind "$0" /proc/meminfo && exec "$@"', path, *argv]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == 0, f"{probe}: exit {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout), proc.stderr


def one_gpu(doc, what):
    check(doc["cuda"] == {"available": True, "driver_version": "13.0", "error": None},
          what + ": cuda section", doc["cuda"])
    check(doc["nvml"] == {"available": True, "driver_version": "580.95.05", "error": None},
          what + ": nvml section", doc["nvml"])
    check(len(doc["gpus"]) == 1, what + ": one GPU", doc["gpus"])
    return doc["gpus"][0] if doc["gpus"] else {}


def test_probe(probe, libdir, top):
    tag = os.path.basename(probe)
    gb10 = Node(top, tag + "-gb10")
    gb10.write_conf("# a DGX Spark\nprofile = gb10\n")

    # GB10 at the DGX default (modeset=N fbdev=Y): the display holds its share.
    doc, _ = run_probe(probe, libdir, gb10.conf,
                       meminfo=meminfo_text(GB10_TOTAL, GB10_FREE, 5 * GIB))
    gpu = one_gpu(doc, tag + " gb10")
    want = {"index": 0, "name": "NVIDIA GB10", "uuid": GB10_UUID, "compute_capability": "12.1",
            "memory_total_bytes": GB10_TOTAL, "memory_free_bytes": GB10_FREE,
            "memory_free_source": "cuMemGetInfo", "memory_reclaimable_bytes": 5 * GIB,
            "unified_memory": True, "processes": [], "errors": []}
    check(gpu == want, tag + " gb10 at N/Y: exact GPU object", gpu)
    print(f"{tag} gb10 N/Y: free {gpu.get('memory_free_bytes')} of {gpu.get('memory_total_bytes')}")

    # Unlocked (modeset=Y fbdev=N): free rises by exactly the configured gain.
    gb10.set_drm("Y", "N")
    doc, _ = run_probe(probe, libdir, gb10.conf)
    unlocked = one_gpu(doc, tag + " gb10 unlocked")
    check(unlocked.get("memory_free_bytes") == GB10_FREE + GB10_GAIN,
          tag + " gb10 unlocked: free = base + 2 GiB", unlocked)
    check(unlocked.get("memory_total_bytes") == GB10_TOTAL, tag + " gb10 unlocked: total", unlocked)
    print(f"{tag} gb10 Y/N: free {unlocked.get('memory_free_bytes')} "
          f"(gain {unlocked.get('memory_free_bytes', 0) - gpu.get('memory_free_bytes', 0)})")

    # modeset=Y alone (fbdev still Y) frees nothing; an unloaded module holds nothing.
    gb10.set_drm("Y", "Y")
    doc, _ = run_probe(probe, libdir, gb10.conf, "--pretty")
    check(one_gpu(doc, tag)["memory_free_bytes"] == GB10_FREE, tag + " gb10 Y/Y: base free", doc)
    gb10.set_drm(None, None)
    doc, _ = run_probe(probe, libdir, gb10.conf)
    check(one_gpu(doc, tag)["memory_free_bytes"] == GB10_FREE + GB10_GAIN,
          tag + " gb10 nvidia_drm unloaded: CUDA works, display memory free", doc)
    gb10.set_drm("N", "Y")

    # Configured figures, a gain other than the default, and the GB10's NVML
    # process list: unified memory reports no per-process memory (null).
    gb10.write_conf("profile = gb10\nfree_bytes = 100000000000\nunlock_gain_bytes = 3221225472\n"
                    "uuid = GPU-11111111-2222-3333-4444-555555555555\n")
    doc, _ = run_probe(probe, libdir, gb10.conf)
    gpu = one_gpu(doc, tag + " gb10 configured")
    check(gpu.get("memory_free_bytes") == 100000000000, tag + " configured free", gpu)
    check(gpu.get("uuid") == "GPU-11111111-2222-3333-4444-555555555555", tag + " uuid", gpu)
    gb10.write_conf("profile = gb10\nprocesses = 4242:na, 77:1048576\n")
    doc, _ = run_probe(probe, libdir, gb10.conf)
    gpu = one_gpu(doc, tag + " gb10 processes")
    check(gpu.get("processes") == [{"pid": 4242, "used_bytes": None},
                                   {"pid": 77, "used_bytes": 1048576}],
          tag + " processes (N/A memory is null)", gpu)
    gb10.write_conf("profile = gb10\nfree_bytes = 100000000000\nunlock_gain_bytes = 3221225472\n")
    gb10.set_drm("Y", "N")
    doc, _ = run_probe(probe, libdir, gb10.conf)
    check(one_gpu(doc, tag)["memory_free_bytes"] == 100000000000 + 3 * GIB,
          tag + " configured gain 3 GiB", doc)
    gb10.set_drm("N", "Y")

    # More processes than the probe's first buffer (16): INSUFFICIENT_SIZE, retry.
    pids = [1000 + i for i in range(40)]
    gb10.write_conf("profile = gb10\nprocesses = " + ",".join("%d:na" % p for p in pids) + "\n")
    doc, _ = run_probe(probe, libdir, gb10.conf, "--no-context")
    gpu = one_gpu(doc, tag + " 40 processes")
    check([p["pid"] for p in gpu.get("processes") or []] == pids, tag + " 40 processes listed", gpu)

    # NVML cannot list processes: null, and the reason in the GPU's errors.
    gb10.write_conf("profile = gb10\nprocesses = unsupported\n")
    doc, _ = run_probe(probe, libdir, gb10.conf)
    gpu = one_gpu(doc, tag + " processes unsupported")
    check(gpu.get("processes") is None and
          gpu.get("errors") == ["nvmlDeviceGetComputeRunningProcesses_v3: Not Supported"],
          tag + " processes NOT_SUPPORTED", gpu)
    check(gpu.get("memory_free_bytes") == GB10_FREE, tag + " free unaffected by NVML", gpu)

    # H200: discrete, the figures of the config; the display state changes nothing.
    h200 = Node(top, tag + "-h200")
    h200.write_conf("profile = h200\n")
    for drm in (("N", "Y"), ("Y", "N")):
        h200.set_drm(*drm)
        doc, _ = run_probe(probe, libdir, h200.conf)
        gpu = one_gpu(doc, tag + " h200")
        want = {"index": 0, "name": "NVIDIA H200", "uuid": H200_UUID, "compute_capability": "9.0",
                "memory_total_bytes": H200_TOTAL, "memory_free_bytes": H200_FREE,
                "memory_free_source": "cuMemGetInfo", "memory_reclaimable_bytes": None,
                "unified_memory": False, "processes": [], "errors": []}
        check(gpu == want, tag + " h200 at %s/%s: exact GPU object" % drm, gpu)
    print(f"{tag} h200: free {gpu.get('memory_free_bytes')} of {gpu.get('memory_total_bytes')}")
    h200.write_conf("profile = h200\nfree_bytes = %d\nprocesses = 31337:%d\n" %
                    (100000 * MIB, 40000 * MIB))
    doc, _ = run_probe(probe, libdir, h200.conf)
    gpu = one_gpu(doc, tag + " h200 configured")
    # A process holds the GPU: no context, so NVML's free figure.
    check(gpu.get("memory_free_bytes") == 100000 * MIB and gpu.get("memory_free_source") == "nvml",
          tag + " h200 configured free", gpu)
    check(gpu.get("processes") == [{"pid": 31337, "used_bytes": 40000 * MIB}],
          tag + " h200 process memory", gpu)

    test_no_context(probe, libdir, top, tag)
    test_page_cache(probe, libdir, top, tag)
    test_gpu_holders(probe, libdir, top, tag)

    # A driver without a GPU (no config, profile none): as on a real machine.
    for conf in (os.path.join(top, "missing.conf"), "none"):
        if conf == "none":
            conf = os.path.join(top, "none.conf")
            with open(conf, "w") as f:
                f.write("profile = none\n")
        doc, _ = run_probe(probe, libdir, conf)
        check(doc["gpus"] == [] and doc["cuda"] == {
            "available": False, "driver_version": "13.0",
            "error": "cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)"},
            tag + " no GPU: cuda section", doc)
        check(doc["nvml"] == {"available": False, "driver_version": None,
                              "error": "nvmlInit_v2: Driver Not Loaded"},
              tag + " no GPU: nvml section", doc)

    # A broken config fails initialisation and says why on stderr.
    bad = Node(top, tag + "-bad")
    bad.write_conf("profile = gb10\nfree_byte = 1\n")
    doc, err = run_probe(probe, libdir, bad.conf)
    check(doc["gpus"] == [] and doc["cuda"]["error"] == "cuInit: CUDA_ERROR_UNKNOWN (unknown error)",
          tag + " bad config: cuInit fails", doc)
    check("bad key or value: free_byte = 1" in err, tag + " bad config: said on stderr: " + err)
    bad.write_conf("profile = h200\nfree_bytes = %d\n" % (H200_TOTAL + 1))
    doc, err = run_probe(probe, libdir, bad.conf)
    check(doc["gpus"] == [] and "exceeds total_bytes" in err, tag + " free > total refused", doc)

    # cuInit failing as a broken driver does.
    bad.write_conf("profile = gb10\ncu_init_error = 304\n")
    doc, _ = run_probe(probe, libdir, bad.conf)
    check(doc["gpus"] == [] and doc["cuda"]["error"] ==
          "cuInit: CUDA_ERROR_OPERATING_SYSTEM (OS call failed or operation not supported on this OS)",
          tag + " cu_init_error", doc)


def context_lines(log):
    try:
        with open(log) as f:
            return f.read().splitlines()
    except FileNotFoundError:
        return []


def test_no_context(probe, libdir, top, tag):
    """--no-context creates no CUDA context (the fake driver's context_log
    stays empty) and says where the free figure came from: the host's
    MemFree on a GB10, NVML on an H200. Without it, one context."""
    for profile in ("gb10", "h200"):
        node = Node(top, tag + "-ctx-" + profile)
        log = os.path.join(node.dir, "contexts.log")
        node.write_conf("profile = %s\ncontext_log = %s\n" % (profile, log))
        doc, _ = run_probe(probe, libdir, node.conf, "--no-context")
        gpu = one_gpu(doc, tag + " %s --no-context" % profile)
        check(doc.get("cuda_context") is False, tag + " --no-context: cuda_context false", doc)
        check(context_lines(log) == [], tag + " --no-context created a context: %s" %
              context_lines(log))
        if profile == "gb10":
            check(gpu.get("memory_free_source") == "host MemFree" and
                  gpu.get("memory_free_bytes") == doc["host"]["mem_free_bytes"] and
                  gpu.get("memory_reclaimable_bytes") == doc["host"]["mem_available_bytes"] -
                  doc["host"]["mem_free_bytes"],
                  tag + " gb10 --no-context: free from MemFree, reclaimable the rest", gpu)
        else:
            check(gpu.get("memory_free_source") == "nvml" and
                  gpu.get("memory_free_bytes") == H200_FREE,
                  tag + " h200 --no-context: free from NVML", gpu)
        check(gpu.get("memory_total_bytes") == (GB10_TOTAL if profile == "gb10" else H200_TOTAL),
              tag + " %s --no-context: total from cuDeviceTotalMem" % profile, gpu)
        doc, _ = run_probe(probe, libdir, node.conf)
        check(doc.get("cuda_context") is True, tag + " with context: cuda_context true", doc)
        lines = context_lines(log)
        check(len(lines) == 1 and "cuDevicePrimaryCtxRetain device=0" in lines[0],
              tag + " %s: one context recorded, got %s" % (profile, lines))
    print(f"{tag} --no-context: no context created; with context: one")


def test_page_cache(probe, libdir, top, tag):
    """A GB10 whose free memory is mostly page cache (a model just staged):
    the fake cuMemGetInfo counts the cache as used, as GB10's does, and the
    probe gives the same free figure and the same reclaimable figure with a
    context and without one. The cache (60 GiB) is far from the default 0,
    so a probe that still took MemAvailable without a context, or a fake
    that ignored the key, fails here."""
    node = Node(top, tag + "-cache")
    cache = 60 * GIB
    node.write_conf("profile = gb10\npage_cache_bytes = %d\n" % cache)
    mi = meminfo_text(GB10_TOTAL, GB10_FREE, cache)
    with_ctx, _ = run_probe(probe, libdir, node.conf, meminfo=mi)
    without, _ = run_probe(probe, libdir, node.conf, "--no-context", meminfo=mi)
    a, b = one_gpu(with_ctx, tag + " cache"), one_gpu(without, tag + " cache --no-context")
    check(with_ctx.get("cuda_context") is True and a.get("memory_free_source") == "cuMemGetInfo",
          tag + " cache: a context was created", with_ctx)
    check(b.get("memory_free_source") == "host MemFree", tag + " cache: MemFree without", b)
    # meminfo is in kB: MemFree rounds the byte figure down to a KiB.
    want_free = (GB10_FREE - cache) // 1024 * 1024
    for what, gpu in (("with context", a), ("without context", b)):
        check(abs(gpu.get("memory_free_bytes", 0) - want_free) < 1024,
              tag + " cache %s: free = available - page cache" % what, gpu)
        check(gpu.get("memory_reclaimable_bytes") == cache,
              tag + " cache %s: reclaimable = the page cache" % what, gpu)
    print(f"{tag} page cache 60 GiB: free {a.get('memory_free_bytes')} (context) / "
          f"{b.get('memory_free_bytes')} (MemFree), reclaimable {b.get('memory_reclaimable_bytes')}")
    # The fake refuses what cannot be: more cache than free memory, or a
    # page cache on a discrete GPU.
    for bad in ("profile = gb10\npage_cache_bytes = %d\n" % (GB10_FREE + 1),
                "profile = h200\npage_cache_bytes = 1\n"):
        node.write_conf(bad)
        doc, err = run_probe(probe, libdir, node.conf)
        check(doc["gpus"] == [] and "page_cache_bytes" in err, tag + " bad page cache refused",
              doc)


def test_gpu_holders(probe, libdir, top, tag):
    """No CUDA context while any process holds the GPU, though none was
    refused by the command line: one on NVML's list, or, where NVML cannot
    list, one with /dev/nvidia<N> open (a /proc of the test's making)."""
    node = Node(top, tag + "-holders")
    log = os.path.join(node.dir, "contexts.log")
    node.write_conf("profile = gb10\nprocesses = 4242:na\ncontext_log = %s\n" % log)
    doc, _ = run_probe(probe, libdir, node.conf)
    check(doc.get("cuda_context") is False and "4242" in (doc.get("cuda_context_refused") or ""),
          tag + " NVML lists a process: no context, and why", doc)
    check(context_lines(log) == [], tag + " holder: a context was created")
    check(one_gpu(doc, tag)["memory_free_source"] == "host MemFree",
          tag + " holder: free from MemFree", doc)

    proc = os.path.join(node.dir, "proc")
    fds = os.path.join(proc, "5151", "fd")
    os.makedirs(fds)
    os.symlink("/dev/nvidiactl", os.path.join(fds, "3"))
    node.write_conf("profile = gb10\nprocesses = unsupported\ncontext_log = %s\n" % log)
    env = {"FLEET_PROBE_PROC": proc}
    doc, _ = run_probe(probe, libdir, node.conf, env_extra=env)
    check(doc.get("cuda_context") is True and doc.get("cuda_context_refused") is None,
          tag + " only /dev/nvidiactl open: a context (not a GPU holder)", doc)
    os.symlink("/dev/nvidia0", os.path.join(fds, "4"))
    doc, _ = run_probe(probe, libdir, node.conf, env_extra=env)
    check(doc.get("cuda_context") is False and "5151" in (doc.get("cuda_context_refused") or ""),
          tag + " /dev/nvidia0 held, NVML cannot list: no context", doc)
    check(len(context_lines(log)) == 1, tag + " holders: exactly the one allowed context, got %s"
          % context_lines(log))
    print(f"{tag} GPU holders: {doc.get('cuda_context_refused')}")


class NvmlMemory(ctypes.Structure):
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong),
                ("used", ctypes.c_ulonglong)]


def test_nvml_memory(libdir, top):
    """nvmlDeviceGetMemoryInfo: NOT_SUPPORTED on GB10, the figures on H200."""
    nvml = ctypes.CDLL(os.path.join(libdir, "libnvidia-ml.so.1"))
    nvml.nvmlErrorString.restype = ctypes.c_char_p
    for name in ("fake_gpu_load", "fake_gpu_free_now"):
        check(not hasattr(nvml, name), "internal symbol %s is exported" % name)
    node = Node(top, "nvml")
    for profile, want in (("gb10", 3), ("h200", 0)):
        node.write_conf("profile = %s\n" % profile)
        os.environ["FLEET_FAKE_GPU"] = node.conf
        check(nvml.nvmlInit_v2() == 0, "nvmlInit_v2 " + profile)
        dev = ctypes.c_void_p()
        uuid = GB10_UUID if profile == "gb10" else H200_UUID
        check(nvml.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(dev)) == 0,
              "handle by uuid " + profile)
        check(nvml.nvmlDeviceGetHandleByUUID(b"GPU-00000000-0000-0000-0000-000000000000",
                                             ctypes.byref(ctypes.c_void_p())) == 6,
              "unknown uuid: NOT_FOUND")
        mem = NvmlMemory()
        rc = nvml.nvmlDeviceGetMemoryInfo(dev, ctypes.byref(mem))
        check(rc == want, "nvmlDeviceGetMemoryInfo %s: rc %d (%s), want %d" %
              (profile, rc, nvml.nvmlErrorString(rc).decode(), want))
        if profile == "h200":
            check((mem.total, mem.free, mem.used) ==
                  (H200_TOTAL, H200_FREE, H200_TOTAL - H200_FREE), "h200 NVML memory")
        else:
            check(nvml.nvmlErrorString(rc) == b"Not Supported", "GB10 NVML memory: Not Supported")
        check(nvml.nvmlShutdown() == 0, "nvmlShutdown")
    check(nvml.nvmlShutdown() == 1, "nvmlShutdown twice: Uninitialized")


def test_sonames(libdir):
    readelf = shutil.which("readelf")
    if readelf is None:
        return
    for lib in ("libcuda.so.1", "libnvidia-ml.so.1"):
        out = subprocess.run([readelf, "-d", os.path.join(libdir, lib)], capture_output=True,
                             text=True, check=True).stdout
        check("Library soname: [%s]" % lib in out, lib + ": SONAME", out)


def main():
    *probes, libdir = sys.argv[1:]
    assert probes, __doc__
    top = tempfile.mkdtemp(prefix="fake-gpu-test.")
    try:
        test_sonames(libdir)
        for probe in probes:
            test_probe(probe, libdir, top)
        test_nvml_memory(libdir, top)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    if failures:
        sys.exit(1)
    print("PASS")


if __name__ == "__main__":
    main()
