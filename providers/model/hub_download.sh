#!/bin/sh
# Downloads a model from the Hugging Face Hub on the node, with the node's
# own hub CLI. Embedded in fleet at build time (kHubDownloadScript) and run
# as `sh -c SCRIPT fleet-hub-download CACHE REPO_DIR CLI ENDPOINT TOKEN CMD...`
# (every argument quoted once by fleet):
#   CACHE     the hub cache folder (made if missing)
#   REPO_DIR  models--org--name: names the log, CACHE/.fleet-download-REPO_DIR.log
#   CLI       the hub CLI's path from the manifest (hub.cli); "" searches
#             ~/.local/bin/hf, /usr/local/bin/hf, then PATH (a login's PATH
#             often lacks ~/.local/bin, where `uv tool install` puts it)
#   ENDPOINT  the Hub to download from (HF_ENDPOINT); "" leaves the node's
#   TOKEN     1: the Hub token is the first line of standard input; 0: none
#   CMD...    the download command; a first word `hf` is the hub CLI found above
# The token goes into a 0600 file of a 0700 folder that HF_TOKEN_PATH names,
# removed when the script ends: never on a command line or in the log.
# Exit 127 with "fleet: ... not found" when the tool is missing; else the
# download's status, with the log's tail on stderr when it failed.
c=$1 d=$2 cli=$3 endpoint=$4 token=$5
shift 5
mkdir -p -- "$c" || exit 1
log="$c/.fleet-download-$d.log"
if [ "$1" = hf ]; then
  found=
  if [ -n "$cli" ]; then
    tried=$cli
    [ -x "$cli" ] && found=$cli
  else
    tried="$HOME/.local/bin/hf, /usr/local/bin/hf, PATH ($PATH)"
    for p in "$HOME/.local/bin/hf" /usr/local/bin/hf; do
      if [ -x "$p" ]; then
        found=$p
        break
      fi
    done
    [ -n "$found" ] || found=$(command -v hf 2>/dev/null) || found=
  fi
  if [ -z "$found" ]; then
    echo "fleet: hf not found (tried $tried)" >&2
    exit 127
  fi
  shift
  set -- "$found" "$@"
elif ! command -v -- "$1" >/dev/null 2>&1; then
  echo "fleet: $1 not found on PATH ($PATH)" >&2
  exit 127
fi
if [ -n "$endpoint" ]; then
  HF_ENDPOINT=$endpoint
  export HF_ENDPOINT
fi
if [ "$token" = 1 ]; then
  tokdir=$(mktemp -d) || exit 1
  trap 'rm -rf -- "$tokdir"' EXIT
  trap 'exit 143' HUP INT TERM
  (
    umask 077
    IFS= read -r t || [ -n "$t" ]
    printf '%s' "$t" >"$tokdir/token"
  ) || exit 1
  HF_TOKEN_PATH=$tokdir/token
  export HF_TOKEN_PATH
  # huggingface_hub reads HF_TOKEN before HF_TOKEN_PATH: the manifest's wins.
  unset HF_TOKEN HUGGING_FACE_HUB_TOKEN
fi
HF_HUB_DISABLE_PROGRESS_BARS=1 "$@" >"$log" 2>&1 </dev/null
rc=$?
[ $rc -eq 0 ] || tail -n 15 -- "$log" >&2
exit $rc
