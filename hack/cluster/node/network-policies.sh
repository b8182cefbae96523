#!/usr/bin/env bash
# The real node's NetworkPolicy engine, kube-network-policies (docs/cluster.md, "NetworkPolicy
# enforcement"), on the real-node cluster at $T9KJOBS_CLUSTER_DIR:
#   network-policies.sh start    build it when missing (cached: kube-network-policies/build.sh),
#                                start it in the node's network and mount namespaces, return
#                                once it answers its queue (it polices the pods from then on)
#   network-policies.sh stop     stop it (its queue rules go with it)
#   network-policies.sh status   exit 0 when it runs
# up.sh starts it with the node when T9KJOBS_NETWORK_POLICIES=1; tests that need it start it
# themselves (tests/real/test_network_policy.py). down.sh stops it with the node.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
D="$T9KJOBS_CLUSTER_DIR"
NAME=kube-network-policies
# Its way to the API server: from the node's network namespace, the API server's 127.0.0.1 is
# out of reach; this socat, in the host's, forwards a unix socket there (TLS passes through).
PROXY=kube-network-policies-apiserver
SOCKET="$D/node/kube-network-policies-apiserver.sock"
QUEUE=100
TIMEOUT="${T9KJOBS_UP_TIMEOUT:-180}"

env_value() { sed -n "s/^$1=//p" "$D/cluster.env" 2>/dev/null | tail -n 1; }
# stop_one NAME: SIGTERM, SIGKILL after 10 s; only a pid of ours (cluster_pid).
stop_one() {
	local pid
	if pid=$(cluster_pid "$1"); then
		kill -TERM "$pid" 2>/dev/null || true
		for _ in $(seq 100); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
		cluster_log "stopped $1 (pid $pid)"
	fi
	rm -f "$D/pids/$1.pid" "$D/pids/$1.cmd"
}
# The engine first: its connections through the proxy end with it, and so do the proxy's forks.
stop_all() {
	stop_one "$NAME"
	stop_one "$PROXY"
	rm -f "$SOCKET"
	if [[ -f "$D/cluster.env" ]]; then sed -i '/^NETWORK_POLICIES=/d' "$D/cluster.env"; fi
}
# The queue has a listener: the engine's caches are synced and it gives verdicts.
queue_bound() { "${IN_NODE_NET[@]}" awk -v q="$QUEUE" '$1 == q { found = 1 } END { exit !found }' /proc/net/netfilter/nfnetlink_queue; }
running() { cluster_pid "$NAME" >/dev/null; }

case "${1:-}" in
start)
	if running; then
		cluster_log "$NAME already runs (pid $(cluster_pid "$NAME"))"
		exit 0
	fi
	[[ $(env_value MODE) == real ]] || cluster_die "no real-node cluster runs at $D (T9KJOBS_NODES=real make cluster-up)"
	holder=$(cat "$D/pids/node-mounts.pid" 2>/dev/null) || holder=""
	[[ -n "$holder" ]] && tr '\0' ' ' <"/proc/$holder/cmdline" 2>/dev/null | grep -qF -- "$D" ||
		cluster_die "the node's namespaces are not held at $D (is the node up?)"
	[[ $(readlink "/proc/$holder/ns/net") != "$(readlink /proc/self/ns/net)" ]] ||
		cluster_die "the node at $D has no network namespace of its own: restart it with this checkout's up.sh"
	IN_NODE_NET=(nsenter --net="/proc/$holder/ns/net" --)
	[[ -f "$D/$NAME.kubeconfig" ]] || cluster_die "no $D/$NAME.kubeconfig: the node was started by an older node/start.sh"
	calls=$("${IN_NODE_NET[@]}" cat /proc/sys/net/bridge/bridge-nf-call-iptables 2>/dev/null) || calls=""
	[[ $calls == 1 ]] || cluster_die "bridged packets skip netfilter in the node's network namespace (net.bridge.bridge-nf-call-iptables is '${calls:-absent}' there): the engine would see nothing"
	build="$(dirname "${BASH_SOURCE[0]}")/kube-network-policies/build.sh"
	if ! BIN=$("$build" --check 2>/dev/null); then
		BIN=$(cluster_step "build: NetworkPolicy engine (kube-network-policies) from Go modules" "$build")
	fi
	stop_one "$PROXY" # a leftover of an engine that died
	rm -f "$SOCKET"
	cluster_start "$PROXY" socat -lf "$D/logs/$PROXY.socat.log" \
		"UNIX-LISTEN:$SOCKET,fork,mode=600" "TCP:127.0.0.1:$(env_value APISERVER_PORT)"
	for _ in $(seq 50); do [[ -S $SOCKET ]] && break; sleep 0.1; done
	# In the node's mount namespace too, so that down.sh's sweep of it ends the engine with
	# the node; in its network namespace, where its rules live and die. --fail-open: should the
	# engine stop answering, the pods' packets pass instead of being dropped for every later
	# pod of the cluster; a test that expects a refusal then fails, never passes by accident.
	# --v=2: a line per packet it judges (pods, verdict): a new connection's first packet only.
	cluster_start "$NAME" nsenter --mount="/proc/$holder/ns/mnt" --net="/proc/$holder/ns/net" -- \
		"$BIN/kube-network-policies" \
		--kubeconfig="$D/$NAME.kubeconfig" \
		--apiserver-socket="$SOCKET" \
		--hostname-override="$(env_value NODE_NAME)" \
		--node-ip="$(env_value NODE_IP)" \
		--pod-cidr="$(env_value NODE_SUBNET)" \
		--nfqueue-id="$QUEUE" \
		--fail-open \
		--v=2
	deadline=$((SECONDS + TIMEOUT))
	until queue_bound; do
		if ! running; then
			stop_all
			cluster_exited "$NAME"
		fi
		if ((SECONDS >= deadline)); then
			stop_all
			cluster_die "timed out after ${TIMEOUT}s waiting for $NAME's queue $QUEUE (see $D/logs/$NAME.log)"
		fi
		sleep 0.5
	done
	grep -q '^NETWORK_POLICIES=' "$D/cluster.env" || echo "NETWORK_POLICIES=$NAME" >>"$D/cluster.env"
	cluster_log "ready: $NAME polices the pods of the node (log: $D/logs/$NAME.log)"
	;;
stop)
	stop_all
	;;
status)
	if running; then
		echo "$NAME: running (pid $(cluster_pid "$NAME"))"
	else
		echo "$NAME: not running"
		exit 1
	fi
	;;
*)
	echo "usage: $0 start|stop|status" >&2
	exit 2
	;;
esac
