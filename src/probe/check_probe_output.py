#!/usr/bin/env python3
"""Runs fleet-probe and checks its contract: exit 0 and one JSON document.

Where no GPU is usable (this build machine, CI) it must say "gpus": [] and
give the reason in cuda.error; elsewhere each GPU must carry every field.
`--api SOCKET PATH...` must print what `curl -w '\n@api=%{http_code}\n'`
prints for the same answers of an HTTP server on a unix socket.
`--stat-within SECONDS PATH` must answer as `timeout SECONDS stat -L`.
Usage: check_probe_output.py PATH_TO_FLEET_PROBE
"""
import http.server
import json
import os
import socketserver
import subprocess
import sys
import tempfile
import threading
import time

GPU_KEYS = {"index", "name", "uuid", "compute_capability", "memory_total_bytes",
            "memory_free_bytes", "memory_free_source", "unified_memory", "processes",
            "errors"}


def run(probe, *args):
    proc = subprocess.run([probe, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout)  # raises on anything but one JSON document


class Engine(http.server.BaseHTTPRequestHandler):
    """An engine's API as the probe meets it: /containers/json a list, /gone a
    404; /big 200 KB in several writes; /noclen a body without its length (the
    end of the stream ends it); /short a body that ends before its length;
    /open one whose connection stays open after it."""

    def do_GET(self):
        path = self.path.split("?")[0]
        body = {"/containers/json": b'[{"Names":["/fleet-a"]}]\n', "/big": b"x" * 200000,
                "/noclen": b"[]", "/short": b"[1,2]", "/open": b"[]"}.get(path, b"{}")
        self.send_response(404 if body == b"{}" else 200)
        if path != "/noclen":
            self.send_header("Content-Length", str(len(body) + (95 if path == "/short" else 0)))
        self.end_headers()
        for i in range(0, len(body), 30000):
            self.wfile.write(body[i:i + 30000])
            self.wfile.flush()
        if path == "/open":
            time.sleep(5)

    def log_message(self, *args):
        pass


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    block_on_close = False

    def get_request(self):  # BaseHTTPRequestHandler wants a (host, port) address
        request, _ = super().get_request()
        return request, ("local", 0)


def api(probe, sock, *paths):
    return subprocess.run([probe, "--api", sock, *paths], capture_output=True, text=True,
                          timeout=30)


def check_api(probe):
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "engine.sock")
        server = UnixServer(sock, Engine)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        path = "/containers/json?filters=%7B%22label%22%3A%5B%22fleet.deployment%22%5D%7D"
        got = api(probe, sock, path, "/gone", "/noclen")
        assert got.returncode == 0, got
        assert got.stdout == ('[{"Names":["/fleet-a"]}]\n\n@api=200\n{}\n@api=404\n'
                              '[]\n@api=200\n'), got.stdout
        big = api(probe, sock, "/big")
        assert big.returncode == 0 and big.stdout == "x" * 200000 + "\n@api=200\n", big.returncode
        short = api(probe, sock, "/short", "/gone")
        assert short.returncode == 7 and short.stdout == "\n@api=000\n", short  # /gone not asked
        started = time.monotonic()
        still_open = api(probe, sock, "/open")
        assert still_open.returncode == 0 and still_open.stdout == "[]\n@api=200\n", still_open
        assert time.monotonic() - started < 3, "waited for the engine to close the connection"
        server.shutdown()
        none = api(probe, os.path.join(d, "none.sock"), "/x")
        assert none.returncode == 7 and none.stdout == "\n@api=000\n", none
        usage = api(probe, sock)
        assert usage.returncode == 2 and usage.stdout == "", usage
        # --api-gpu: the same answers, then "@gpu=" and the GPU document,
        # only when every answer was a 200.
        server = UnixServer(sock + "2", Engine)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        both = subprocess.run([probe, "--api-gpu", "auto", sock + "2", path, "/noclen"],
                              capture_output=True, text=True, timeout=60)
        head, marker, doc = both.stdout.partition("@gpu=")
        assert both.returncode == 0 and marker, both
        assert head == '[{"Names":["/fleet-a"]}]\n\n@api=200\n[]\n@api=200\n', head
        gpu = json.loads(doc)
        assert gpu["cuda_context"] is False and isinstance(gpu["gpus"], list), gpu
        for args, rc in ((["auto", sock + "2", path, "/gone"], 0),
                         (["auto", sock + "2", "/short"], 7),
                         (["auto", os.path.join(d, "none.sock"), "/x"], 7)):
            got = subprocess.run([probe, "--api-gpu", *args], capture_output=True, text=True,
                                 timeout=60)
            assert got.returncode == rc and "@gpu=" not in got.stdout, (args, got)
        for args in ([], ["sometimes", sock + "2", path], ["always", sock + "2"]):
            got = subprocess.run([probe, "--api-gpu", *args], capture_output=True, text=True,
                                 timeout=60)
            assert got.returncode == 2 and got.stdout == "", (args, got)
        server.shutdown()


def stat_within(probe, *args, ns=None):
    argv = [probe, "--stat-within", *args]
    if ns is not None:  # inside the mount namespace of process ns
        argv = ["nsenter", "-t", str(ns), "-m", "--", *argv]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


def check_stat_within(probe):
    probe = os.path.abspath(probe)  # nsenter runs it from the namespace's root
    """--stat-within: timeout -k 5 N stat -L's answers in one process; a hung
    mount (tests/sim/hang_fs.py, where this runs as root with FUSE) gives
    124 at the deadline, not a wait for the kernel."""
    with tempfile.TemporaryDirectory() as d:
        os.symlink(d, os.path.join(d, "link"))
        os.symlink(os.path.join(d, "none"), os.path.join(d, "dangling"))
        for path, rc in ((d, 0), (os.path.join(d, "link"), 0), (os.path.join(d, "none"), 1),
                         (os.path.join(d, "dangling"), 1)):  # -L: the link's target
            got = stat_within(probe, "10", path)
            assert got.returncode == rc and got.stdout == "", (path, got)
        for bad in ((), ("10",), ("0", d), ("x", d), ("10", d, d)):
            got = stat_within(probe, *bad)
            assert got.returncode == 2 and got.stdout == "", (bad, got)
        hang_fs = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                               "sim", "hang_fs.py")
        if os.geteuid() != 0 or not os.path.exists("/dev/fuse"):
            print("--stat-within on a hung mount: not checked (needs root and /dev/fuse)")
            return
        mnt = os.path.join(d, "dead")
        os.mkdir(mnt)
        fs = subprocess.Popen(["unshare", "-m", "--propagation", "private", "--", sys.executable,
                               hang_fs, mnt], stdout=subprocess.PIPE, text=True)
        try:
            assert fs.stdout.readline().startswith("mounted"), "hang_fs.py did not mount"
            started = time.monotonic()
            got = stat_within(probe, "1", os.path.join(mnt, "x"), ns=fs.pid)
            took = time.monotonic() - started
            assert got.returncode == 124 and got.stdout == "", got
            assert 0.9 < took < 5, "a 1 s deadline took %.1f s" % took
        finally:
            fs.kill()
            fs.wait()


def main():
    probe = sys.argv[1]
    doc = run(probe)
    assert doc["probe_version"] == 1, doc
    for key in ("mem_total_bytes", "mem_available_bytes", "swap_free_bytes"):
        assert doc["host"][key] is None or doc["host"][key] >= 0, doc["host"]
    for lib in ("cuda", "nvml"):
        assert isinstance(doc[lib]["available"], bool), doc[lib]
    assert isinstance(doc["gpus"], list), doc
    if not doc["gpus"]:
        assert isinstance(doc["cuda"]["error"], str) and doc["cuda"]["error"], doc["cuda"]
    for gpu in doc["gpus"]:
        assert set(gpu) == GPU_KEYS, gpu
    assert isinstance(doc["cuda_context"], bool), doc
    no_context = run(probe, "--no-context")
    assert no_context["cuda_context"] is False, no_context
    pretty = run(probe, "--pretty")
    assert pretty["gpus"] == doc["gpus"] and pretty["cuda"] == doc["cuda"], pretty
    bad = subprocess.run([probe, "--no-such-flag"], capture_output=True, text=True)
    assert bad.returncode == 2 and bad.stdout == "", bad
    assert isinstance(doc["elapsed_ns"], int) and 0 <= doc["elapsed_ns"] < 20e9, doc
    check_api(probe)
    check_stat_within(probe)
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
