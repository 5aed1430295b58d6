#!/usr/bin/env python3
"""Pushes a REPRODUCIBLE small image to a plain-HTTP registry and prints its
manifest digest: the same inputs give the same bytes, hence the same
digests, on every run (unlike `podman import`, which stamps the time).

The image: one gzip layer (a tar with fixed mtimes and owners) holding the
host's busybox-static at /bin/busybox, /bin/sh -> busybox and a file
/etc/fleet-test-image naming the image; a Docker schema 2 manifest. Pushed
with the registry HTTP API (monolithic blob uploads). Standard library only.

  pushimage.py --registry 127.0.0.1:5000 --repo fleet/bb --tag v1 [--busybox /bin/busybox]
"""
import argparse
import gzip
import hashlib
import io
import json
import platform
import tarfile
import urllib.parse
import urllib.request


def layer_tar(busybox, label):
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        def add(name, kind, data=b"", mode=0o644, link=""):
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.linkname = kind, mode, 0, link
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)
        add("bin", tarfile.DIRTYPE, mode=0o755)
        add("etc", tarfile.DIRTYPE, mode=0o755)
        add("bin/busybox", tarfile.REGTYPE, open(busybox, "rb").read(), 0o755)
        add("bin/sh", tarfile.SYMTYPE, mode=0o777, link="busybox")
        add("etc/fleet-test-image", tarfile.REGTYPE, (label + "\n").encode())
    return out.getvalue()


def digest(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def request(method, url, data=None, headers=None):
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as resp:
        return resp


def push_blob(base, repo, data):
    resp = request("POST", "%s/v2/%s/blobs/uploads/" % (base, repo), b"")
    location = urllib.parse.urljoin(base, resp.headers["Location"])
    sep = "&" if "?" in location else "?"
    request("PUT", location + sep + "digest=" + digest(data), data,
            {"Content-Type": "application/octet-stream"})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--registry", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--busybox", default="/bin/busybox")
    args = ap.parse_args()
    base = "http://" + args.registry
    tar = layer_tar(args.busybox, "%s:%s" % (args.repo, args.tag))
    layer = gzip.compress(tar, mtime=0)
    arch = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())
    config = json.dumps({
        "architecture": arch, "os": "linux", "created": "1970-01-01T00:00:00Z",
        "config": {"Cmd": ["/bin/sh"],
                   "Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]},
        "rootfs": {"type": "layers", "diff_ids": [digest(tar)]},
    }, sort_keys=True, separators=(",", ":")).encode()
    manifest = json.dumps({
        "schemaVersion": 2,
        "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
        "config": {"mediaType": "application/vnd.docker.container.image.v1+json",
                   "size": len(config), "digest": digest(config)},
        "layers": [{"mediaType": "application/vnd.docker.image.rootfs.diff.tar.gzip",
                    "size": len(layer), "digest": digest(layer)}],
    }, sort_keys=True, separators=(",", ":")).encode()
    push_blob(base, args.repo, layer)
    push_blob(base, args.repo, config)
    request("PUT", "%s/v2/%s/manifests/%s" % (base, args.repo, args.tag), manifest,
            {"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"})
    print(digest(manifest))


if __name__ == "__main__":
    main()
