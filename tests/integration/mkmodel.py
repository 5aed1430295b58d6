#!/usr/bin/env python3
"""Writes a small REAL model into a Hugging Face hub cache, as huggingface_hub
lays it out: blobs named by content hash (sha256 for LFS files, git's blob
sha1 for the others), snapshots/<rev>/ of RELATIVE symlinks, refs/main.

The model: N .safetensors shards with real headers (8-byte little-endian
length, JSON with dtype/shape/data_offsets, the data), the index mapping
every tensor to its shard, a config, a tokenizer file and a nested draft
shard (draft/model.safetensors). Standard library only.

  mkmodel.py --cache /srv/hf/hub --repo org/tiny --revision <40 hex>
             [--shards 3] [--shard-kb 512] [--owner USER] [--legacy]
"""
import argparse
import hashlib
import json
import os
import struct


def safetensors(prefix, n_tensors, total_bytes, seed):
    header, off = {}, 0
    per = max(4, (total_bytes // n_tensors) // 4 * 4)
    for i in range(n_tensors):
        dtype, width = ("BF16", 2) if i % 2 else ("F32", 4)
        elements = per // width
        header["%s.%d.weight" % (prefix, i)] = {
            "dtype": dtype, "shape": [elements], "data_offsets": [off, off + elements * width]}
        off += elements * width
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)  # padded, as the reference writer does
    # Cheap, reproducible, not compressible-looking data.
    block = hashlib.sha256(("%s-%d" % (prefix, seed)).encode()).digest() * 2048
    data = (block * (off // len(block) + 1))[:off]
    return struct.pack("<Q", len(h)) + h + data, list(header.keys())[:-1]


def model_files(shards, shard_kb, seed):
    files, weight_map = {}, {}
    for s in range(1, shards + 1):
        name = "model-%05d-of-%05d.safetensors" % (s, shards)
        data, tensors = safetensors("layers.%d" % s, 6, shard_kb * 1024, seed + s)
        files[name] = data
        for t in tensors:
            weight_map[t] = name
    files["model.safetensors.index.json"] = json.dumps(
        {"metadata": {"total_size": sum(len(v) for v in files.values())},
         "weight_map": weight_map}, indent=2).encode()
    files["config.json"] = json.dumps(
        {"architectures": ["TinyForCausalLM"], "hidden_size": 64, "seed": seed}).encode()
    files["tokenizer.json"] = json.dumps({"version": "1.0", "model": {"vocab": {"a": 0}}}).encode()
    files["draft/model.safetensors"] = safetensors("draft", 2, 16 * 1024, seed)[0]
    return files


def blob_name(path, data):
    if path.endswith(".safetensors"):
        return hashlib.sha256(data).hexdigest()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def write(cache, repo, revision, files, legacy=False):
    d = "models--" + repo.replace("/", "--")
    m = os.path.join(os.path.dirname(cache.rstrip("/")) if legacy else cache, d)
    os.makedirs(os.path.join(m, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(m, "refs"), exist_ok=True)
    with open(os.path.join(m, "refs", "main"), "w") as f:
        f.write(revision)
    for path, data in files.items():
        blob = blob_name(path, data)
        with open(os.path.join(m, "blobs", blob), "wb") as f:
            f.write(data)
        link = os.path.join(m, "snapshots", revision, path)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        up = "../" * (2 + path.count("/"))
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(up + "blobs/" + blob, link)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cache", required=True)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--revision", required=True)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--shard-kb", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--owner", default="", help="chown the cache to this user")
    ap.add_argument("--legacy", action="store_true",
                    help="write the repo folder beside the cache (no hub/), as some hf versions do")
    a = ap.parse_args()
    m = write(a.cache, a.repo, a.revision, model_files(a.shards, a.shard_kb, a.seed), a.legacy)
    if a.owner:
        for root in (os.path.dirname(m), m):
            os.chown(root, *_ids(a.owner))
        for dirpath, dirnames, filenames in os.walk(m):
            for n in dirnames + filenames:
                os.lchown(os.path.join(dirpath, n), *_ids(a.owner))
    print(m)


def _ids(user):
    import pwd
    p = pwd.getpwnam(user)
    return p.pw_uid, p.pw_gid


if __name__ == "__main__":
    main()
