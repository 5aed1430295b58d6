#!/bin/sh
# The model probe's read-only look at one repo in a hub cache (the hot
# path: every plan, every node that holds or wants the model), one
# tab-separated record a line (ParseHubProbe reads them): the repo's layout
# and links, its refs, snapshots and top-level files, the wanted snapshot's
# entries and sizes, unfinished blobs, the staging lock, and the free space
# of the cache's filesystem and of each other store ("dfstore").
# Embedded in fleet at build time (kHubProbeScript) and run inside the
# probe's shell (in a subshell of its own: it ends with exit), after one
# assignment per value and the stores as positional parameters, all quoted
# once by fleet:
#   c  the hub cache folder     d  the repo's folder name (models--org--name)
#   r  the revision ("" when b) b  a branch: the snapshot refs/<b> names
#   q  the installed fleet-probe (kInstalledProbe, under $HOME)
#   "$@"  NAME PATH pairs: the other stores the node mounts
# A hung network mount (the store) must fail the probe, not hang the plan:
# every command that touches the cache runs under timeout (-k: a process
# stuck in an NFS wait gets SIGKILL too), and the cache is first stat'ed
# under it, so that the shell's own tests ([ -d ], globs, read) never touch
# a mount that does not answer. Such a cache is an error naming it. That
# first stat is the installed fleet-probe's --stat-within where it knows it
# (one process where timeout and stat were two, on every plan: issue 48);
# one installed before it knew the flag exits 2, and timeout's stat answers.
: "${c?}" "${d?}" "${r?}" "${b?}" "${q?}"
to=
ft=
command -v timeout >/dev/null 2>&1 && to='timeout -k 5 10' && ft='timeout -k 5 120'
sr=2; [ ! -x "$q" ] || { "$q" --stat-within 10 "$c" >/dev/null 2>&1; sr=$?; }
case $sr in 2 | 126 | 127) sr=0; [ -z "$to" ] || { $to stat -L -- "$c" >/dev/null 2>&1; sr=$?; } ;; esac
if [ "$sr" -eq 124 ] || [ "$sr" -eq 137 ]; then
  printf 'err\t%s does not answer within 10 s (a hung network mount?)\n' "$c"; exit 0
fi
if [ -L "$c/$d" ]; then printf 'repolink\t%s\n' "$($to readlink -- "$c/$d")"; fi
m=
if [ -d "$c/$d" ]; then m="$c/$d"; printf 'layout\thub\n'
elif [ -d "$c/../$d" ]; then m="$c/../$d"; printf 'layout\tlegacy\n'
fi
if [ -n "$m" ]; then
  if [ -d "$m/refs" ]; then
    $ft find "$m/refs" -type f -printf '%P\n' 2>/dev/null | while IFS= read -r f; do
      v=; IFS= read -r v < "$m/refs/$f" || :; printf 'ref\t%s\t%s\n' "$f" "$v"; done
  fi
  for x in "$m"/snapshots/*; do [ -d "$x" ] && printf 'snap\t%s\n' "${x##*/}"; done
  for x in "$m"/* "$m"/.[!.]*; do [ -f "$x" ] && printf 'top\t%s\n' "${x##*/}"; done
  if [ -n "$b" ]; then
    # A floating revision: the snapshot refs/<branch> names.
    v=; [ -f "$m/refs/$b" ] && { IFS= read -r v < "$m/refs/$b" || :; }
    printf 'resolved\t%s\n' "$v"
    case $v in *[!0-9a-f]*) v= ;; esac
    [ ${#v} -eq 40 ] || v=
    r=$v
  fi
  s="$m/snapshots/$r"
  if [ -n "$r" ] && [ -f "$m/.fleet-staged/$r" ]; then printf 'stagedmark\t1\n'; fi
  if [ -n "$r" ] && [ -d "$s" ]; then
    printf 'snapshot\t1\n'
    # The listing is framed by tabs and newlines: a name holding one is
    # reported, never misread.
    tn=$(printf '*[\t\n]*')
    $ft find -H "$s" -mindepth 1 \( -name "$tn" -printf 'badname\t1\n' \) -o \
      \( ! -type d -printf 'e\t%y\t%Y\t%P\t%l\n' \) 2>/dev/null
    case $? in
      0) ;;
      124) printf 'err\tlisting %s timed out (a hung network mount?)\n' "$s" ;;
      *) printf 'err\tcannot list %s (GNU find with -printf is needed)\n' "$s" ;;
    esac
    $ft find -L "$s" -mindepth 1 ! -name "$tn" -type f -printf 's\t%s\t%P\n' 2>/dev/null
    [ $? -ne 124 ] || printf 'err\treading sizes under %s timed out (a hung network mount?)\n' "$s"
  fi
  i=$($ft find "$m/blobs" -maxdepth 1 -name '*.incomplete' -printf 'inc\t%s\t%T@\t%f\n' 2>/dev/null)
  if [ -n "$i" ]; then printf '%s\n' "$i"; printf 'now\t%s\n' "$(date +%s)"; fi
fi
l="$c/.fleet-staging-$d.lock"
if [ -d "$l" ]; then
  o=; [ -r "$l/owner" ] && { IFS= read -r o < "$l/owner" || :; }
  printf 'lock\t%s\n' "$o"
  p=${o%% *}
  case $p in ''|*[!0-9]*) ;; *) [ -d "/proc/$p" ] && printf 'lockalive\t1\n';; esac
fi
p=$c
while [ ! -e "$p" ]; do case $p in */*) p=${p%/*}; [ -n "$p" ] || p=/;; *) break;; esac; done
$to df -Pk "$p" 2>/dev/null | { read -r dfx; read -r dfx dfx dfx dfa dfx dfm && printf 'df\t%s\t%s\t%s\n' "$dfa" "$dfm" "$p"; }
# shellcheck disable=SC2034 # dfx: df's fields not read
while [ $# -ge 2 ]; do
  $to df -Pk "$2" 2>/dev/null | {
    read -r dfx
    read -r dfx dfx dfx dfa dfx dfm && printf 'dfstore\t%s\t%s\t%s\n' "$1" "$dfa" "$dfm"
  }
  shift 2
done
exit 0
