#!/bin/sh
# What keeps an idle node on (src/engine/idle_policy.h): a person's
# interactive SSH session and a GPU process fleet did not start. Read-only.
# Embedded in fleet at build time (kIdleBlockersScript) and run as
# `sh -c SCRIPT fleet-idle-blockers` (no arguments). Prints one line each:
#   session USER@pts/N   an sshd session with a terminal (fleet's own
#                        sessions have none: "USER@notty")
#   gpu PID NAME         a compute process on the GPU outside any container
#                        (fleet's serves run in containers)
ps -eo args= 2>/dev/null | sed -n 's/^sshd: \([^ ]*@pts\/[0-9][0-9]*\).*/session \1/p'
if command -v nvidia-smi >/dev/null 2>&1; then
	nvidia-smi --query-compute-apps=pid,process_name --format=csv,noheader 2>/dev/null |
		while IFS=', ' read -r pid name; do
			case $pid in '' | *[!0-9]*) continue ;; esac
			if grep -qE 'libpod|docker|containerd|crio' "/proc/$pid/cgroup" 2>/dev/null; then
				continue
			fi
			echo "gpu $pid $name"
		done
fi
exit 0
