#!/usr/bin/env python3
"""Hugging Face Hub stand-in for the tests: the Hub's API paths fleet and the
hub CLI use, on loopback, python3 standard library only. Never the internet.

  hub_server.py --repos REPOS.json --dir DIR [--port 0] [--page-size 50]

REPOS.json: {"org/name": {"revision": "<40 hex>", "branch": "main",
  "gated": false, "files": [{"path": "config.json", "size": 712}, ...]
  or "root": "/path/to/a/folder of real files"}, ...}. Files listed with
sizes only (a 636 GB repo) are listed, never served; those of a root are
served with the ids the Hub gives them (git blob sha1, LFS sha256 for
*.safetensors and *.bin).

  GET  /api/whoami-v2                                 the token check: 200 or 401
  GET  /api/models/ORG/NAME[/revision/REV]            model info: sha, siblings (sizes with ?blobs=true)
  GET  /api/models/ORG/NAME/tree/REV[?recursive=true] files, paginated (Link: <...>; rel="next")
  POST /api/models/ORG/NAME/paths-info/REV           the entries of the paths asked for (a
                                                      JSON or form body: paths, expand), as the
                                                      tree lists them; what the JS client asks
  GET|HEAD /ORG/NAME/resolve/REV/PATH                 a file's bytes (X-Repo-Commit, ETag,
                                                      X-Linked-Etag and X-Linked-Size for LFS)

A gated repo answers 401 without `Authorization: Bearer TOKEN` (TOKEN from
DIR/hub_token, 0600) and 403 with another token. Test hooks:
DIR/hub_delay (seconds) delays every resolve/ answer; DIR/hub_down makes
every answer a 503. Writes DIR/hub.port and DIR/hub.pid once it listens;
logs one line per request to DIR/hub.log (method, path, status, and
whether a token came: never the token).
"""

import argparse
import hashlib
import hmac
import json
import os
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def git_blob_id(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def is_lfs(path):
    return path.endswith((".safetensors", ".bin", ".gguf"))


class Repo:
    def __init__(self, rid, spec):
        self.id = rid
        self.revision = spec["revision"]
        self.branch = spec.get("branch", "main")
        self.gated = bool(spec.get("gated", False))
        self.root = spec.get("root")
        self.files = {}  # path -> {"size", "oid", "lfs_oid" or None}
        if self.root:
            for dirpath, _, names in os.walk(self.root):
                for n in names:
                    full = os.path.join(dirpath, n)
                    rel = os.path.relpath(full, self.root)
                    data = open(full, "rb").read()
                    lfs = hashlib.sha256(data).hexdigest() if is_lfs(rel) else None
                    self.files[rel] = {"size": len(data), "oid": git_blob_id(data), "lfs": lfs}
        for f in spec.get("files", []):
            fake = hashlib.sha256(f["path"].encode()).hexdigest()
            self.files[f["path"]] = {"size": int(f["size"]), "oid": fake[:40],
                                     "lfs": fake if is_lfs(f["path"]) else None}

    def resolve(self, rev):
        return self.revision if rev in (self.revision, self.branch) else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fleet-hub-stand-in"

    def log_message(self, *args):
        pass

    def log(self, status):
        auth = "token" if self.headers.get("Authorization") else "no-token"
        with self.server.log_lock, open(self.server.log_path, "a") as f:
            f.write("%s %s %s %d %s\n" % (time.strftime("%H:%M:%S"), self.command, self.path,
                                          status, auth))

    def answer(self, status, body=b"", ctype="application/json", headers=None):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.log(status)

    def token_ok(self):
        got = self.headers.get("Authorization", "")
        want = "Bearer " + self.server.token
        return bool(self.server.token) and hmac.compare_digest(got.encode(), want.encode())

    def gate(self, repo):
        """False when the request may read `repo`; True once it was refused."""
        if not repo.gated or self.token_ok():
            return False
        if self.headers.get("Authorization"):
            self.answer(403, {"error": "Access to model %s is restricted and you are not "
                                              "in the authorized list." % repo.id},
                               headers={"X-Error-Code": "GatedRepo"})
            return True
        self.answer(401, {"error": "Access to model %s is restricted. You must have "
                                          "access to it and be authenticated to access it." % repo.id},
                    headers={"X-Error-Code": "GatedRepo"})
        return True

    def do_HEAD(self):
        self.do_GET()

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if os.path.exists(os.path.join(self.server.dir, "hub_down")):
            return self.answer(503, {"error": "down for a test"})
        parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(self.path).path.split("/")[1:]]
        if parts[:2] != ["api", "models"] or len(parts) < 6 or parts[4] != "paths-info":
            return self.answer(404, {"error": "not found"})
        repo = self.server.repos.get(parts[2] + "/" + parts[3])
        if repo is None:
            return self.answer(404, {"error": "Repository not found"},
                               headers={"X-Error-Code": "RepoNotFound"})
        if self.gate(repo):
            return
        sha = repo.resolve(parts[5])
        if sha is None:
            return self.answer(404, {"error": "Invalid rev id: " + parts[5]},
                               headers={"X-Error-Code": "RevisionNotFound"})
        # huggingface_hub (Python) posts a form, @huggingface/hub (JS) JSON.
        if self.headers.get("Content-Type", "").startswith("application/json"):
            asked = json.loads(body or b"{}")
            paths, expand = asked.get("paths") or [], bool(asked.get("expand"))
        else:
            form = urllib.parse.parse_qs(body.decode())
            paths = form.get("paths", [])
            expand = form.get("expand", ["false"])[0] in ("true", "1", "True")
        entries = []
        for path in paths:
            f = repo.files.get(path)
            if f is None:
                continue  # the Hub leaves out a path it does not hold
            e = {"type": "file", "oid": f["oid"], "size": f["size"], "path": path}
            if f["lfs"]:
                e["lfs"] = {"oid": f["lfs"], "size": f["size"], "pointerSize": 134}
            if expand:
                e["lastCommit"] = {"id": sha, "title": "stand-in", "date": "2026-01-01T00:00:00.000Z"}
            entries.append(e)
        return self.answer(200, entries)

    def do_GET(self):
        if os.path.exists(os.path.join(self.server.dir, "hub_down")):
            return self.answer(503, {"error": "down for a test"})
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        if parts[:2] == ["api", "whoami-v2"]:
            if self.token_ok():
                return self.answer(200, {"type": "user", "name": "fleet-test"})
            return self.answer(401, {"error": "Invalid credentials in Authorization header"})
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = self.server.repos.get(parts[2] + "/" + parts[3])
            if repo is None:
                return self.answer(401 if not self.token_ok() else 404,
                                   {"error": "Repository not found"},
                                   headers={"X-Error-Code": "RepoNotFound"})
            if self.gate(repo):
                return
            rest = parts[4:]
            if not rest or rest[0] == "revision":
                return self.model_info(repo, rest[1] if len(rest) > 1 else repo.branch, query)
            if rest[0] == "tree" and len(rest) >= 2:
                return self.tree(repo, rest[1], "/".join(rest[2:]), query)
            return self.answer(404, {"error": "not found"})
        if len(parts) >= 5 and parts[2] == "resolve":
            repo = self.server.repos.get(parts[0] + "/" + parts[1])
            if repo is None:
                return self.answer(404, {"error": "Repository not found"},
                                   headers={"X-Error-Code": "RepoNotFound"})
            if self.gate(repo):
                return
            return self.resolve(repo, parts[3], "/".join(parts[4:]))
        return self.answer(404, {"error": "not found"})

    def model_info(self, repo, rev, query):
        sha = repo.resolve(rev)
        if sha is None:
            return self.answer(404, {"error": "Invalid rev id: " + rev},
                               headers={"X-Error-Code": "RevisionNotFound"})
        blobs = query.get("blobs", ["false"])[0] in ("true", "1", "True")
        siblings = []
        for path, f in sorted(repo.files.items()):
            s = {"rfilename": path}
            if blobs:
                s.update(size=f["size"], blobId=f["oid"])
                if f["lfs"]:
                    s["lfs"] = {"sha256": f["lfs"], "size": f["size"], "pointerSize": 134}
            siblings.append(s)
        return self.answer(200, {"id": repo.id, "modelId": repo.id, "sha": sha,
                                 "gated": "manual" if repo.gated else False,
                                 "private": False, "siblings": siblings})

    def tree(self, repo, rev, prefix, query):
        if repo.resolve(rev) is None:
            return self.answer(404, {"error": "Invalid rev id: " + rev},
                               headers={"X-Error-Code": "RevisionNotFound"})
        recursive = query.get("recursive", ["false"])[0] in ("true", "1", "True")
        entries, dirs = [], set()
        for path, f in sorted(repo.files.items()):
            if prefix and not path.startswith(prefix.rstrip("/") + "/"):
                continue
            rel = path[len(prefix.rstrip("/")) + 1:] if prefix else path
            if "/" in rel:
                d = (prefix.rstrip("/") + "/" if prefix else "") + rel.split("/")[0]
                if d not in dirs:
                    dirs.add(d)
                    entries.append({"type": "directory", "oid": hashlib.sha1(d.encode()).hexdigest(),
                                    "size": 0, "path": d})
                if not recursive:
                    continue
            e = {"type": "file", "oid": f["oid"], "size": f["size"], "path": path}
            if f["lfs"]:
                e["lfs"] = {"oid": f["lfs"], "size": f["size"], "pointerSize": 134}
            entries.append(e)
        start = int(query.get("cursor", ["0"])[0] or 0)
        page = entries[start:start + self.server.page_size]
        headers = {}
        if start + self.server.page_size < len(entries):
            q = dict((k, v[0]) for k, v in query.items())
            q["cursor"] = str(start + self.server.page_size)
            host = self.headers.get("Host", "127.0.0.1")
            nxt = "http://%s%s?%s" % (host, urllib.parse.urlsplit(self.path).path,
                                      urllib.parse.urlencode(q))
            headers["Link"] = '<%s>; rel="next"' % nxt
        return self.answer(200, page, headers=headers)

    def resolve(self, repo, rev, path):
        sha = repo.resolve(rev)
        f = repo.files.get(path)
        if sha is None or f is None:
            return self.answer(404, {"error": "Entry not found"},
                               headers={"X-Error-Code": "EntryNotFound"})
        if not repo.root:
            return self.answer(404, {"error": "listed with sizes only: no bytes here"})
        delay = os.path.join(self.server.dir, "hub_delay")
        if os.path.exists(delay):
            time.sleep(float(open(delay).read().strip() or 0))
        data = open(os.path.join(repo.root, path), "rb").read()
        headers = {"X-Repo-Commit": sha, "ETag": '"%s"' % f["oid"], "Accept-Ranges": "bytes"}
        if f["lfs"]:
            headers.update({"X-Linked-Etag": '"%s"' % f["lfs"], "X-Linked-Size": str(f["size"])})
        # A byte range, as the Hub's CDN serves one (RFC 9110, one range):
        # the JS client reads a file's size from a bytes=0-0 answer's
        # Content-Range before it downloads.
        asked = self.headers.get("Range", "")
        if asked.startswith("bytes=") and "," not in asked:
            first, _, last = asked[len("bytes="):].partition("-")
            if first.isdigit() and (last.isdigit() or last == ""):
                lo, hi = int(first), min(int(last) if last else len(data) - 1, len(data) - 1)
                if lo >= len(data) or lo > hi:
                    return self.answer(416, b"", headers={"Content-Range": "bytes */%d" % len(data)})
                headers["Content-Range"] = "bytes %d-%d/%d" % (lo, hi, len(data))
                return self.answer(206, data[lo:hi + 1], ctype="application/octet-stream",
                                   headers=headers)
        return self.answer(200, data, ctype="application/octet-stream", headers=headers)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repos", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--page-size", type=int, default=50)
    args = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    srv.daemon_threads = True
    srv.dir = args.dir
    srv.page_size = args.page_size
    srv.log_path = os.path.join(args.dir, "hub.log")
    srv.log_lock = threading.Lock()
    tok = os.path.join(args.dir, "hub_token")
    srv.token = open(tok).read().strip() if os.path.exists(tok) else ""
    srv.repos = {rid: Repo(rid, spec) for rid, spec in json.load(open(args.repos)).items()}
    for name, value in (("hub.pid", os.getpid()), ("hub.port", srv.server_address[1])):
        tmp = os.path.join(args.dir, name + ".tmp")
        with open(tmp, "w") as f:
            f.write("%d\n" % value)
        os.replace(tmp, os.path.join(args.dir, name))
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
