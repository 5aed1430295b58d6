#!/usr/bin/env python3
"""Runs fleet-probe and checks its contract: exit 0 and one JSON document.

Where no GPU is usable (this build machine, CI) it must say "gpus": [] and
give the reason in cuda.error; elsewhere each GPU must carry every field.
`--api SOCKET PATH...` must print what `curl -w '\n@api=%{http_code}\n'`
prints for the same answers of an HTTP server on a unix socket.
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

GPU_KEYS = {"index", "name", "uuid", "compute_capability", "memory_total_bytes",
            "memory_free_bytes", "memory_free_source", "unified_memory", "processes",
            "errors"}


def run(probe, *args):
    proc = subprocess.run([probe, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout)  # raises on anything but one JSON document


class Engine(http.server.BaseHTTPRequestHandler):
    """/containers/json answers a list, /gone a 404 with a body."""

    def do_GET(self):
        body = b'[{"Names":["/fleet-a"]}]\n' if self.path.startswith("/containers/json?") else b"{}"
        self.send_response(200 if body != b"{}" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    def get_request(self):  # BaseHTTPRequestHandler wants a (host, port) address
        request, _ = super().get_request()
        return request, ("local", 0)


def check_api(probe):
    with tempfile.TemporaryDirectory() as d:
        sock = os.path.join(d, "engine.sock")
        server = UnixServer(sock, Engine)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        path = "/containers/json?filters=%7B%22label%22%3A%5B%22fleet.deployment%22%5D%7D"
        got = subprocess.run([probe, "--api", sock, path, "/gone"], capture_output=True,
                             text=True, timeout=30)
        server.shutdown()
        assert got.returncode == 0, got
        assert got.stdout == '[{"Names":["/fleet-a"]}]\n\n@api=200\n{}\n@api=404\n', got.stdout
        none = subprocess.run([probe, "--api", os.path.join(d, "none.sock"), "/x"],
                              capture_output=True, text=True, timeout=30)
        assert none.returncode == 7 and none.stdout == "\n@api=000\n", none
        usage = subprocess.run([probe, "--api", sock], capture_output=True, text=True)
        assert usage.returncode == 2 and usage.stdout == "", usage


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
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
