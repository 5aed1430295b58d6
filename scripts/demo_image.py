#!/usr/bin/env python3
"""Builds the demo's serving image and pushes it to a local registry.

The image is one layer: the machine's busybox-static and the stand-in
OpenAI engine (tests/sim/fake_engine, built static: it answers
/v1/models and /v1/chat/completions as vLLM would) at /bin/fake-engine,
with fixed file times and owners, and a config with no creation time, so
the same busybox and fake-engine build always give the same image digest:
the one examples/spark-lab/fleet.yaml pins. Pushed with the registry's HTTP
API (distribution v2), which keeps every digest as built.

    scripts/demo_image.py REGISTRY REPOSITORY TAG FAKE_ENGINE   # prints sha256:<manifest digest>

The demo's gateway image the same way: this machine's HAProxy (Debian's
haproxy) and the libraries it links, laid out as the official image
(haproxy at /usr/local/sbin):

    scripts/demo_image.py --haproxy REGISTRY REPOSITORY TAG
"""
import hashlib
import io
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tarfile
import urllib.request

BUSYBOX = "/bin/busybox"


def layer_tar(fake_engine):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        def add(name, kind, mode, data=b"", link=""):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, mode, 0
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.linkname = link
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
        add("bin", tarfile.DIRTYPE, 0o755)
        add("bin/busybox", tarfile.REGTYPE, 0o755, open(BUSYBOX, "rb").read())
        add("bin/fake-engine", tarfile.REGTYPE, 0o755, open(fake_engine, "rb").read())
        add("bin/sh", tarfile.SYMTYPE, 0o777, link="busybox")
        add("etc", tarfile.DIRTYPE, 0o755)
        add("etc/fleet-demo-image", tarfile.REGTYPE, 0o644, b"fleet spark-lab demo serve image\n")
    return buf.getvalue()


def haproxy_layer_tar():
    haproxy = shutil.which("haproxy") or sys.exit("demo_image: no haproxy (apt-get install haproxy)")
    libs = re.findall(r"(/\S+)", subprocess.run(["ldd", haproxy], capture_output=True, text=True,
                                                check=True).stdout)
    files = {"usr/local/sbin/haproxy": haproxy}
    for lib in libs:
        files[lib.lstrip("/")] = lib
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        dirs = sorted({os.path.dirname(n) for n in files} | {"tmp", "usr/local/etc/haproxy"})
        for d in sorted({"/".join(d.split("/")[:i + 1]) for d in dirs for i in range(d.count("/") + 1)}):
            info = tarfile.TarInfo(d)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if d == "tmp" else 0o755, 0
            tar.addfile(info)
        for name in sorted(files):
            data = open(os.path.realpath(files[name]), "rb").read()
            info = tarfile.TarInfo(name)
            info.mode, info.mtime, info.size = 0o755, 0, len(data)
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def sha(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers)


def push_blob(base, repo, data):
    digest = sha(data)
    status, _ = request("HEAD", "%s/v2/%s/blobs/%s" % (base, repo, digest))
    if status == 200:
        return digest
    status, headers = request("POST", "%s/v2/%s/blobs/uploads/" % (base, repo), data=b"")
    if status != 202:
        sys.exit("demo_image: upload to %s refused (HTTP %d)" % (base, status))
    loc = headers["Location"]
    if loc.startswith("/"):
        loc = base + loc
    loc += ("&" if "?" in loc else "?") + "digest=" + digest
    status, _ = request("PUT", loc, data=data, headers={"Content-Type": "application/octet-stream"})
    if status != 201:
        sys.exit("demo_image: blob %s not stored (HTTP %d)" % (digest, status))
    return digest


def main():
    if sys.argv[1] == "--haproxy":
        registry, repo, tag = sys.argv[2:5]
        layer = haproxy_layer_tar()
        image_config = {"Env": ["PATH=/usr/local/sbin:/usr/bin:/bin"],
                        "Cmd": ["haproxy", "-f", "/usr/local/etc/haproxy/haproxy.cfg"]}
    else:
        registry, repo, tag, fake_engine = sys.argv[1:5]
        layer = layer_tar(fake_engine)
        image_config = {"Env": ["PATH=/bin"], "Cmd": ["/bin/sh"]}
    base = "http://" + registry
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps({
        "architecture": arch, "os": "linux",
        "config": image_config,
        "rootfs": {"type": "layers", "diff_ids": [sha(layer)]},
    }, sort_keys=True, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                   "digest": push_blob(base, repo, config), "size": len(config)},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar",
                    "digest": push_blob(base, repo, layer), "size": len(layer)}],
    }, sort_keys=True, separators=(",", ":")).encode()
    status, _ = request("PUT", "%s/v2/%s/manifests/%s" % (base, repo, tag), data=manifest,
                        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    if status != 201:
        sys.exit("demo_image: manifest not stored (HTTP %d)" % status)
    print(sha(manifest))


if __name__ == "__main__":
    main()
