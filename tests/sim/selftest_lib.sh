# Shared by the fleet-sim self-tests (fleet_sim_test.sh, fleet_sim_net_test.sh):
# the skip unless root with every tool, and the tally of checks. Source it.

# selftest_require TOOL...: exits 77 (skipped) unless root and every TOOL is found.
selftest_require() {
	if [[ $EUID -ne 0 ]]; then
		echo "SKIP: fleet-sim needs root"
		exit 77
	fi
	local tool
	for tool in "$@"; do
		command -v "$tool" >/dev/null || {
			echo "SKIP: $tool not installed"
			exit 77
		}
	done
}

PASS=0
FAIL=0
ok() {
	PASS=$((PASS + 1))
	printf 'ok   %s\n' "$1"
}
not_ok() {
	FAIL=$((FAIL + 1))
	printf 'FAIL %s\n' "$1"
	[[ -z ${2-} ]] || printf '     %s\n' "$2"
}
check_eq() { # check_eq DESCRIPTION WANT GOT
	if [[ $2 == "$3" ]]; then ok "$1"; else not_ok "$1" "want '$2', got '$3'"; fi
}
