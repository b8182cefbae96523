# Stop the real node and undo what node/start.sh did to the host: the NetworkPolicy engine,
# containers, shims, containerd, kubelet, CoreDNS, the node's namespaces (their mounts, the pods'
# network namespaces and the pods' bridge die with them), the pods' cgroups, the host's veth to
# the node. Sourced by down.sh before the control plane stops; uses its variables (D) and
# functions (stop). Safe to run on a half-started node.
# shellcheck shell=bash

N="$D/node"

# kill_cgroup_tree DIR: SIGKILL every process in DIR and below until none is left.
kill_cgroup_tree() {
	local dir=$1 i pids
	for i in $(seq 50); do
		[[ -d "$dir" ]] || return 0
		pids=$(find "$dir" -name cgroup.procs -exec cat {} + 2>/dev/null | sort -u) || true
		[[ -z "$pids" ]] && return 0
		# shellcheck disable=SC2086
		kill -KILL $pids 2>/dev/null || true
		sleep 0.2
	done
	cluster_log "processes still in $dir: $pids"
}
# The pods' cgroup tree in each hierarchy (kubelet's cgroupRoot; start.sh wrote it down).
cgroup_roots=()
if [[ -f "$N/cgroup-root" ]]; then
	for hier in /sys/fs/cgroup/*/; do
		cgroup_roots+=("${hier%/}$(cat "$N/cgroup-root")")
	done
fi

# network-policies.sh's engine (in the node's namespaces too), then its way to the API server
stop kube-network-policies
stop kube-network-policies-apiserver
stop kubelet
# Containers first (their processes sit in the pods' cgroups), then their shims, which live
# in the node's mount namespace like containerd.
for cg in "${cgroup_roots[@]}"; do kill_cgroup_tree "$cg"; done
# The node's mount namespace, from its holder: only when the pid is really our holder (its
# command line names $D) and its namespace is not ours (never the host's).
ns_link=""
holder=$(cat "$D/pids/node-mounts.pid" 2>/dev/null) || holder=""
if [[ -n "$holder" ]] && tr '\0' ' ' <"/proc/$holder/cmdline" 2>/dev/null | grep -qF -- "$D"; then
	ns_link=$(readlink "/proc/$holder/ns/mnt" 2>/dev/null) || ns_link=""
	[[ $ns_link == "$(readlink /proc/self/ns/mnt)" ]] && ns_link=""
fi
stop containerd
if [[ -n "$ns_link" ]]; then
	for p in /proc/[0-9]*; do
		[[ $(readlink "$p/ns/mnt" 2>/dev/null) == "$ns_link" ]] || continue
		[[ ${p#/proc/} == "$holder" ]] && continue
		kill -KILL "${p#/proc/}" 2>/dev/null || true
	done
fi
stop node-mounts # (it exits by itself once its sleep is killed above)
stop coredns
# socat's forks, one per connection, carry its command line ($D in it): none outlives it.
stop apiserver-proxy
pkill -KILL -f -- "$D/logs/apiserver-proxy.socat.log" 2>/dev/null || true

# Pods' cgroups: kubelet's tree below the root, then the levels start.sh created, deepest
# first (rmdir removes only empty ones: never a cgroup of anyone else).
for cg in "${cgroup_roots[@]}"; do
	if [[ -d "$cg" ]]; then
		find "$cg" -mindepth 1 -depth -type d -exec rmdir {} + 2>/dev/null || true
	fi
done
if [[ -f "$N/cgroups" ]]; then
	while read -r cg; do
		if [[ -d "$cg" ]] && ! rmdir "$cg" 2>/dev/null; then
			cluster_log "could not remove cgroup $cg"
		fi
	done < <(tac "$N/cgroups")
fi
if [[ -f "$N/bridge" ]]; then
	bridge=$(cat "$N/bridge")
	# The host's end of the veth to the node's network namespace (it goes with that namespace
	# too). A node started before the pods' bridge moved there had it on the host, with the
	# pods' veths: a straggler goes with it.
	for v in $(ip -o link show master "$bridge" 2>/dev/null | awk -F': ' '{ print $2 }' | cut -d@ -f1); do
		ip link del "$v" 2>/dev/null || true
	done
	ip link del "$bridge" 2>/dev/null || true
fi
rm -rf "$N"
