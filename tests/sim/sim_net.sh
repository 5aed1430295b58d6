# shellcheck shell=bash
# sim_net.sh: the two networks of `fleet-sim start --net lan+fabric`, sourced
# by fleet-sim (which provides die, say, DIR, NAMES, NODE, load_node,
# random_token).
#
# A DGX Spark lab has a LAN that the controller (a laptop) reaches over SSH,
# and a RoCE fabric between the nodes. Here:
#
#   controller (root netns) ── bridge FSxxxxl (LANPFX.1/24) ── veth ── node netns: lan0 LANPFX.(10+i)
#                                tc tbf LAN_RATE on both ends of every LAN veth
#   fabric switch netns FSxxxxf: bridge br0 ── veth ── node netns: enp1s0f1np1 10.77.0.(10+i)/24
#                                tc tbf FABRIC_RATE on both ends of every fabric veth (--fabric-rate)
#
# The fabric has no address the controller can reach: a byte between two
# nodes' fabric addresses never crosses the controller's stack. The LAN
# bridge's own counters (/sys/class/net/FSxxxxl/statistics/{rx,tx}_bytes)
# count exactly what the controller sent and received (`fleet-sim net-stats`).
#
# With --fabric-rate each node's fabric link is a full-duplex link of RATE
# each way, as a switch port is: tbf on the node's netdev (what the node
# sends) and on the switch's end of its veth (what the node receives). A
# source sending to N targets at once pushes N streams through its one
# egress, which binds; each target receives at RATE/N.
#
# State in DIR/sim.env: net, net_tag, lan_prefix, fabric_prefix, lan_rate,
# fabric_rate (empty: not shaped).
# Per node in node.env: addr (its LAN address), fabric_addr, netns.

NET_FABRIC_PREFIX=10.77.0
NET_FABRIC_IF=enp1s0f1np1 # the name a DGX Spark gives its ConnectX-7 port 1
NET_FABRIC_HCA=rocep1s0f1
NET_LAN_IF=lan0

net_validate() { # net_validate MODE
	[[ $1 == loopback || $1 == lan+fabric ]] || die "--net: loopback or lan+fabric, not '$1'"
	[[ $1 == loopback ]] && return 0
	command -v ip >/dev/null || die "--net lan+fabric: ip (iproute2) not found"
	command -v tc >/dev/null || die "--net lan+fabric: tc (iproute2) not found"
	command -v nsenter >/dev/null || die "--net lan+fabric: nsenter (util-linux) not found"
	((${#NAMES[@]} <= 200)) || die "--net lan+fabric: at most 200 nodes"
}

# net_rate_bits RATE: RATE as tc writes it (200mbit, 1gbit, 1.5gbit, 10mbps,
# 100kibit) in bits per second, or nonzero status if it is not one.
net_rate_bits() {
	local r=${1,,} num unit mult
	[[ $r =~ ^([0-9]+(\.[0-9]+)?)([kmgt]?i?)(bit|bps)$ ]] || return 1
	num=${BASH_REMATCH[1]} unit=${BASH_REMATCH[3]}
	case $unit in
	'') mult=1 ;; k) mult=1000 ;; m) mult=1000000 ;; g) mult=1000000000 ;; t) mult=1000000000000 ;;
	ki) mult=1024 ;; mi) mult=1048576 ;; gi) mult=1073741824 ;; ti) mult=1099511627776 ;;
	*) return 1 ;;
	esac
	[[ ${BASH_REMATCH[4]} == bps ]] && mult=$((mult * 8))
	awk -v n="$num" -v m="$mult" 'BEGIN { b = n * m; if (b < 8000) exit 1; printf "%.0f\n", b }'
}

# net_validate_fabric_rate MODE RATE: --fabric-rate needs the fabric and a
# rate tc takes (1kbit at least).
net_validate_fabric_rate() {
	[[ -z $2 ]] && return 0
	[[ $1 == lan+fabric ]] || die "--fabric-rate needs the fabric: add --net lan+fabric (the loopback sim has no fabric to shape)"
	net_rate_bits "$2" >/dev/null || die "--fabric-rate: a rate as tc writes it (e.g. 400mbit, 1gbit), not '$2'"
}

# net_fabric_tbf RATE: the tbf options of a fabric link at RATE: a bucket of
# 10 ms at that rate (128 KiB at least: a jumbo frame, a TSO burst) so that
# a test's few MB are not sent as one burst, a queue of 50 ms.
net_fabric_tbf() {
	local bits burst
	bits=$(net_rate_bits "$1") || return 1
	burst=$((bits / 8 / 100))
	((burst >= 131072)) || burst=131072
	printf 'tbf rate %s burst %s latency 50ms\n' "$1" "$burst"
}

# net_plan MODE RATE [FABRIC_RATE]: picks the tag and the LAN subnet (under
# the global lock), appends them to sim.env. Loopback: just net=loopback.
net_plan() {
	local mode=$1 rate=$2 fabric_rate=${3-} tag a b try used
	printf 'net=%s\n' "$mode" >>"$DIR/sim.env"
	[[ $mode == lan+fabric ]] || return 0
	used=$(ip -4 -o addr show | awk '{print $4}')
	for ((try = 0; try < 100; try++)); do
		a=$((100 + SRANDOM % 100))
		b=$((SRANDOM % 256))
		[[ $used != *"10.$a.$b."* ]] && break
	done
	random_token tag 4
	printf 'net_tag=fs%s\nlan_prefix=10.%s.%s\nfabric_prefix=%s\nlan_rate=%s\nfabric_rate=%s\n' \
		"$tag" "$a" "$b" "$NET_FABRIC_PREFIX" "$rate" "$fabric_rate" >>"$DIR/sim.env"
}

net_on() { [[ ${SIM[net]-loopback} == lan+fabric ]]; }

# net_describe: one line on the two networks (start and status print it).
net_describe() {
	printf 'lan+fabric: LAN %s.0/24 at %s, fabric %s.0/24 %s' "${SIM[lan_prefix]}" "${SIM[lan_rate]}" \
		"${SIM[fabric_prefix]}" "$([[ -n ${SIM[fabric_rate]-} ]] && echo "at ${SIM[fabric_rate]} each way per node (tc tbf)" || echo "not shaped")"
}

# net_assign: each node's addresses and netns into its node.env (after net_plan).
net_assign() {
	local i=0 name
	load_sim
	net_on || {
		for name in "${NAMES[@]}"; do printf 'addr=127.0.0.1\n' >>"$DIR/nodes/$name/node.env"; done
		return 0
	}
	for name in "${NAMES[@]}"; do
		i=$((i + 1))
		printf 'addr=%s.%s\nfabric_addr=%s.%s\nnetns=%s\nnet_index=%s\n' \
			"${SIM[lan_prefix]}" "$((10 + i))" "${SIM[fabric_prefix]}" "$((10 + i))" \
			"${SIM[net_tag]}n$i" "$i" >>"$DIR/nodes/$name/node.env"
	done
}

net_listen_addr() { printf '%s' "${NODE[addr]:-127.0.0.1}"; } # NODE loaded

# net_node_prefix NAME ARRAY: the command words that put a node's init in its netns
net_node_prefix() {
	local -n _pre=$2
	_pre=()
	load_node "$1"
	[[ -n ${NODE[netns]-} ]] && _pre=(nsenter "--net=/run/netns/${NODE[netns]}")
	return 0
}

# net_up: bridges, namespaces, veths, addresses, rate limits.
net_up() {
	load_sim
	net_on || return 0
	local t=${SIM[net_tag]} name i ns fab="${SIM[net_tag]}f" ftbf=()
	if [[ -n ${SIM[fabric_rate]-} ]]; then
		read -r -a ftbf < <(net_fabric_tbf "${SIM[fabric_rate]}") || return 1
	fi
	ip link add "${t}l" type bridge
	ip addr add "${SIM[lan_prefix]}.1/24" dev "${t}l"
	ip link set "${t}l" up
	ip netns add "$fab"
	ip -n "$fab" link add br0 type bridge
	ip -n "$fab" link set br0 up
	ip -n "$fab" link set lo up
	for name in "${NAMES[@]}"; do
		load_node "$name"
		ns=${NODE[netns]} i=${NODE[net_index]}
		ip netns add "$ns"
		ip -n "$ns" link set lo up
		# LAN: host end on the controller's bridge, node end lan0
		ip link add "${t}l$i" type veth peer name "${t}m$i"
		ip link set "${t}m$i" netns "$ns"
		ip -n "$ns" link set "${t}m$i" name "$NET_LAN_IF"
		ip link set "${t}l$i" master "${t}l" up
		ip -n "$ns" addr add "${NODE[addr]}/24" dev "$NET_LAN_IF"
		ip -n "$ns" link set "$NET_LAN_IF" up
		tc qdisc replace dev "${t}l$i" root tbf rate "${SIM[lan_rate]}" burst 512k latency 100ms
		ip netns exec "$ns" tc qdisc replace dev "$NET_LAN_IF" root tbf rate "${SIM[lan_rate]}" burst 512k latency 100ms
		# fabric: switch end on br0 in the fabric netns, node end as the CX-7 netdev
		ip link add "${t}x$i" type veth peer name "${t}y$i"
		ip link set "${t}x$i" netns "$fab"
		ip -n "$fab" link set "${t}x$i" mtu 9000 master br0 up # both ends of a link: one MTU
		ip link set "${t}y$i" netns "$ns"
		ip -n "$ns" link set "${t}y$i" name "$NET_FABRIC_IF"
		ip -n "$ns" addr add "${NODE[fabric_addr]}/24" dev "$NET_FABRIC_IF"
		ip -n "$ns" link set "$NET_FABRIC_IF" mtu 9000 up
		if ((${#ftbf[@]})); then # --fabric-rate: what the node sends, what its switch port sends it
			ip netns exec "$ns" tc qdisc replace dev "$NET_FABRIC_IF" root "${ftbf[@]}" || return 1
			ip netns exec "$fab" tc qdisc replace dev "${t}x$i" root "${ftbf[@]}" || return 1
		fi
	done
	ip -n "$fab" link set br0 mtu 9000
	net_nat -A
}

# net_nat -A|-D: with --nat, every TCP connection the controller opens to
# the LAN leaves with another source port (MASQUERADE --random-fully), as
# through a laptop's NAT or a VPN: the nodes never see the controller's own
# ports. Nothing without --nat.
net_nat() {
	[[ ${SIM[nat]-0} == 1 ]] || return 0
	iptables -t nat "$1" POSTROUTING -o "${SIM[net_tag]}l" -p tcp -m comment --comment "fleet-sim ${SIM[net_tag]}" \
		-j MASQUERADE --to-ports 40000-49999 --random-fully
}

# net_fabric_port NAME up|down: the switch's end of the node's fabric link
# (down: frames to and from the node are dropped, without a word to either
# side). Nothing without the fabric.
net_fabric_port() {
	load_sim
	net_on || return 0
	load_node "$1"
	[[ -n ${NODE[net_index]-} ]] || return 0
	ip -n "${SIM[net_tag]}f" link set "${SIM[net_tag]}x${NODE[net_index]}" "$2" 2>/dev/null || true
}

# net_down: removes what net_up made (idempotent). The LAN veths' host ends
# are deleted by name first: deleting a netns frees the veths in it from a
# kernel work queue, and under load their root-side peers outlived `stop` by
# seconds (CI saw two left). Then it waits (5 s at most) until no link of
# the tag is left in the root netns.
net_down() {
	load_sim
	net_on || return 0
	local t=${SIM[net_tag]} name try
	net_nat -D 2>/dev/null || true
	for name in "${NAMES[@]}"; do
		[[ -f $DIR/nodes/$name/node.env ]] || continue
		load_node "$name"
		# (|| true: on a second stop they are gone, and fleet-sim runs under set -e)
		[[ -n ${NODE[net_index]-} ]] && { ip link del "${t}l${NODE[net_index]}" 2>/dev/null || true; }
		[[ -n ${NODE[netns]-} ]] && { ip netns del "${NODE[netns]}" 2>/dev/null || true; }
	done
	ip netns del "${t}f" 2>/dev/null || true
	ip link del "${t}l" 2>/dev/null || true
	for ((try = 0; try < 50; try++)); do
		ip -o link show | grep -q -- "$t" || break
		sleep 0.1
	done
	return 0
}

# net_write_ib_sysfs NAME: the fake /sys/class/infiniband of a node (in its
# node root, as /srv/sys/class/infiniband): port 1 of rocep1s0f1 ACTIVE at
# 200 Gb/s on the fabric netdev with RoCE v2 GID index 3 (the node's fabric
# IPv4, as ::ffff:a.b.c.d), and rocep1s0f0 with its port DOWN (an unplugged
# second port, as on many Sparks). Loopback sims get the same tree without
# addresses behind it: the probe then finds a port but no IPv4.
net_write_ib_sysfs() {
	local name=$1 ib="$DIR/nodes/$1/root/sys/class/infiniband" hca port gid4 ip o1 o2 o3 o4 dev
	load_node "$name"
	ip=${NODE[fabric_addr]:-}
	rm -rf -- "$ib"
	for hca in rocep1s0f0 "$NET_FABRIC_HCA"; do
		port="$ib/$hca/ports/1"
		mkdir -p -- "$port/gid_attrs/types" "$port/gid_attrs/ndevs" "$port/gids" "$ib/$hca/device/net"
		printf 'Ethernet\n' >"$port/link_layer"
		if [[ $hca == "$NET_FABRIC_HCA" ]]; then
			mkdir -p -- "$ib/$hca/device/net/$NET_FABRIC_IF"
			printf '4: ACTIVE\n' >"$port/state"
			printf '5: LinkUp\n' >"$port/phys_state"
			printf '200 Gb/sec (4X HDR)\n' >"$port/rate"
			dev=$NET_FABRIC_IF
		else
			mkdir -p -- "$ib/$hca/device/net/enp1s0f0np0"
			printf '1: DOWN\n' >"$port/state"
			printf '3: Disabled\n' >"$port/phys_state"
			printf '10 Gb/sec (1X QDR)\n' >"$port/rate"
			dev=enp1s0f0np0
		fi
		printf 'fe80:0000:0000:0000:5e00:00ff:fe00:0001\n' >"$port/gids/0"
		printf 'fe80:0000:0000:0000:5e00:00ff:fe00:0001\n' >"$port/gids/1"
		printf 'IB/RoCE v1\n' >"$port/gid_attrs/types/0"
		printf 'RoCE v2\n' >"$port/gid_attrs/types/1"
		printf '%s\n' "$dev" >"$port/gid_attrs/ndevs/0"
		printf '%s\n' "$dev" >"$port/gid_attrs/ndevs/1"
		if [[ $hca == "$NET_FABRIC_HCA" && -n $ip ]]; then
			IFS=. read -r o1 o2 o3 o4 <<<"$ip"
			printf -v gid4 '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$o1" "$o2" "$o3" "$o4"
			printf '%s\n' "$gid4" >"$port/gids/2"
			printf '%s\n' "$gid4" >"$port/gids/3"
			printf 'IB/RoCE v1\n' >"$port/gid_attrs/types/2"
			printf 'RoCE v2\n' >"$port/gid_attrs/types/3"
			printf '%s\n' "$dev" >"$port/gid_attrs/ndevs/2"
			printf '%s\n' "$dev" >"$port/gid_attrs/ndevs/3"
		fi
	done
}

# cmd_net_stats DIR: bytes the controller sent to and received from the LAN
# (the LAN bridge's own counters: frames to and from the controller's stack).
cmd_net_stats() {
	[[ $# -eq 1 ]] || die "usage: fleet-sim net-stats DIR"
	set_dir "$1"
	load_sim
	net_on || die "$DIR is a loopback sim (start --net lan+fabric)"
	local b="/sys/class/net/${SIM[net_tag]}l/statistics" rx tx
	read -r rx <"$b/rx_bytes"
	read -r tx <"$b/tx_bytes"
	printf 'controller_rx_bytes=%s\ncontroller_tx_bytes=%s\n' "$rx" "$tx"
}
