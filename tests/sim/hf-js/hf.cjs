#!/usr/bin/env node
// A second hub CLI for simulated nodes: the `hf download` command line that
// fleet runs, with a real Hub client behind it, npm's @huggingface/hub
// (installed here by scripts/install-deps.sh from package-lock.json), where
// tests/sim/hf is the project's own stand-in. Its snapshotDownload writes
// the hub cache (blobs/<etag>, snapshots/<commit>/<path> links) by its own
// reading of the Hub's API: paths-info, ranged resolve/ requests. That is
// what fleet's completeness check and the stand-in Hub are held against.
//
//   hf download [--revision REV] REPO [--cache-dir DIR] [--token TOKEN]
//
// The token as huggingface_hub reads it: HF_TOKEN, else the file
// HF_TOKEN_PATH names, else ~/.cache/huggingface/token. Logs its arguments
// and where the token came from (never the token) to /srv/sim/hf.log, as
// tests/sim/hf does, marked "js".
"use strict";
const fs = require("fs");
const os = require("os");
const path = require("path");

function log(line) {
  if (fs.existsSync("/srv/sim")) fs.appendFileSync("/srv/sim/hf.log", `${process.pid} js ${line}\n`);
}

function token() {
  if (process.env.HF_TOKEN) return [process.env.HF_TOKEN, "HF_TOKEN"];
  const file =
    process.env.HF_TOKEN_PATH || path.join(os.homedir(), ".cache", "huggingface", "token");
  if (fs.existsSync(file)) {
    return [fs.readFileSync(file, "utf8").trim(), process.env.HF_TOKEN_PATH ? "HF_TOKEN_PATH" : "file"];
  }
  return ["", "none"];
}

async function main(argv) {
  if (argv[0] !== "download") {
    console.error("hf (@huggingface/hub): only `hf download`");
    return 2;
  }
  let revision = "main";
  let repo = null;
  let cacheDir = path.join(os.homedir(), ".cache", "huggingface", "hub");
  let tok = null;
  const args = argv.slice(1);
  while (args.length) {
    const a = args.shift();
    if (a === "--revision") revision = args.shift();
    else if (a === "--cache-dir") cacheDir = args.shift();
    else if (a === "--token") tok = args.shift();
    else if (!a.startsWith("-")) repo = a;
  }
  let source = "argv";
  if (tok === null) [tok, source] = token();
  const endpoint = (process.env.HF_ENDPOINT || "https://huggingface.co").replace(/\/+$/, "");
  log(`download ${repo}@${revision} endpoint=${endpoint} token=${source}`);
  if (!["127.0.0.1", "localhost", "[::1]"].includes(new URL(endpoint).hostname)) {
    console.error(`hf (@huggingface/hub): HF_ENDPOINT ${endpoint} is not on loopback: the tests never reach the internet`);
    return 1;
  }
  const { snapshotDownload } = await import("@huggingface/hub");
  // The library reports each file on console.debug; huggingface_hub's CLI
  // prints only the snapshot's path on stdout.
  console.debug = () => {};
  try {
    const snapshot = await snapshotDownload({
      repo, revision, cacheDir, hubUrl: endpoint, ...(tok ? { accessToken: tok } : {}),
    });
    console.log(snapshot);
    return 0;
  } catch (e) {
    // Its errors carry the URL and the Hub's status, never the token.
    console.error(`hf (@huggingface/hub): ${e.statusCode ? `HTTP ${e.statusCode} ` : ""}${e.message}`);
    return 1;
  }
}

main(process.argv.slice(2)).then((rc) => process.exit(rc));
