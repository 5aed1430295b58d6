#!/usr/bin/env python3
"""Runs fleet-probe and checks its contract: exit 0 and one JSON document.

Where no GPU is usable (this build machine, CI) it must say "gpus": [] and
give the reason in cuda.error; elsewhere each GPU must carry every field.
Usage: check_probe_output.py PATH_TO_FLEET_PROBE
"""
import json
import subprocess
import sys

GPU_KEYS = {"index", "name", "uuid", "compute_capability", "memory_total_bytes",
            "memory_free_bytes", "memory_free_source", "unified_memory", "processes",
            "errors"}


def run(probe, *args):
    proc = subprocess.run([probe, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr}"
    return json.loads(proc.stdout)  # raises on anything but one JSON document


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
    print(json.dumps(doc))


if __name__ == "__main__":
    main()
