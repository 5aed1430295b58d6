#!/usr/bin/env python3
"""Checks `fleet-probe --sha256`, the hasher of fleet's deep verify.

Known vectors (empty file, "abc"), a file larger than the probe's 64 MiB
mapping window (against hashlib), several files on several threads, the
largest file first, files hashed in steps by more than one thread, files it
cannot hash (missing, a directory, a FIFO) named on stderr with exit 1 while
the others are still hashed, no file (exit 0: libcrypto loads), and bad
arguments (exit 2).
Usage: check_probe_sha256.py PATH_TO_FLEET_PROBE
"""
import hashlib
import os
import subprocess
import sys
import tempfile

EMPTY = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
WINDOW = 64 << 20


def run(probe, *args):
    return subprocess.run([probe, "--sha256", *args], capture_output=True, text=True, timeout=120)


def digests(stdout):
    """{path: hex} from "<hex>  <path>" lines; each path once."""
    out = {}
    for line in stdout.splitlines():
        hex_, sep, path = line.partition("  ")
        assert sep and len(hex_) == 64 and path not in out, line
        out[path] = hex_
    return out


def write(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


def main():
    probe = sys.argv[1]
    none = run(probe)
    assert none.returncode == 0 and none.stdout == "", none
    with tempfile.TemporaryDirectory() as d:
        empty = write(os.path.join(d, "empty"), b"")
        abc = write(os.path.join(d, "a b c"), b"abc")
        big_data = os.urandom(1 << 20) * (WINDOW // (1 << 20)) + b"tail past the window"
        big = write(os.path.join(d, "big"), big_data)
        want = {empty: EMPTY, abc: ABC, big: hashlib.sha256(big_data).hexdigest()}
        for threads in ("1", "3"):
            r = run(probe, "--threads", threads, "--", big, empty, abc)
            assert r.returncode == 0 and r.stderr == "", r
            assert digests(r.stdout) == want, (threads, r.stdout)
        # The largest file first, not the order given: on one thread, of 3
        # files (more than 2 x threads) the largest is hashed whole first.
        step = 8 << 20
        sized = {}
        for name, size in (("small", 1000), ("medium", 2 * step + 7), ("large", 3 * step + 5)):
            data = os.urandom(size)
            sized[write(os.path.join(d, name), data)] = hashlib.sha256(data).hexdigest()
        r = run(probe, "--threads", "1", *sized)
        assert r.returncode == 0 and r.stderr == "", r
        order = [line.partition("  ")[2] for line in r.stdout.splitlines()]
        assert order[0] == os.path.join(d, "large"), order
        assert digests(r.stdout) == sized, r.stdout
        # The last files go from thread to thread in 8 MiB steps (each
        # file's hash state with them): more files of several steps than
        # threads, each digest still the file's.
        for threads in ("2", "3"):
            r = run(probe, "--threads", threads, *sized, big)
            assert r.returncode == 0 and r.stderr == "", r
            assert digests(r.stdout) == {**sized, big: want[big]}, (threads, r.stdout)
        missing, fifo = os.path.join(d, "missing"), os.path.join(d, "fifo")
        os.mkfifo(fifo)
        failing = [(missing, "No such file"), (d, "not a regular file"),
                   (fifo, "not a regular file")]
        if os.geteuid() != 0:  # root reads a mode 000 file
            failing.append((write(os.path.join(d, "private"), b"x"), "Permission denied"))
            os.chmod(failing[-1][0], 0)
        r = run(probe, "--threads", "2", abc, *[path for path, _ in failing])
        assert r.returncode == 1, r
        assert digests(r.stdout) == {abc: ABC}, r.stdout
        for path, why in failing:
            assert f"fleet-probe: {path}: {why}" in r.stderr, (path, r.stderr)
    for bad in (["--threads"], ["--threads", "0"], ["--threads", "2x"], ["--frob", "x"]):
        r = run(probe, *bad)
        assert r.returncode == 2 and r.stdout == "", (bad, r)
    print("fleet-probe --sha256: ok")


if __name__ == "__main__":
    main()
