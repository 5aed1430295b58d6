#!/bin/sh
# The node's identity, the first lines of the node facts probe:
#   hostname= machine_id= boot_id= arch= kernel=
# The UTS name (what `hostname` prints), the machine and the release as
# uname gives them, read by the shell's own `read` from /proc: every
# process costs a plan a few ms on the node (uname where /proc lacks them).
# Embedded in fleet at build time (kNodeIdentityScript) and run inside the
# node facts probe's own shell; takes no values. Defines $nfh $nfm $nfb
# $nfa $nfk.
nfh=
nfm=
nfb=
nfa=
nfk=
{ read -r nfh </proc/sys/kernel/hostname; } 2>/dev/null
[ -n "$nfh" ] || nfh=$(uname -n)
{ read -r nfm </etc/machine-id; } 2>/dev/null
{ read -r nfb </proc/sys/kernel/random/boot_id; } 2>/dev/null
{ read -r nfa </proc/sys/kernel/arch; } 2>/dev/null
[ -n "$nfa" ] || nfa=$(uname -m)
{ read -r nfk </proc/sys/kernel/osrelease; } 2>/dev/null
[ -n "$nfk" ] || nfk=$(uname -r)
printf 'hostname=%s\nmachine_id=%s\nboot_id=%s\narch=%s\nkernel=%s\n' "$nfh" "$nfm" "$nfb" "$nfa" "$nfk"
