#!/usr/bin/env bash
# Stop every process that up.sh started (from the pid files in $T9KJOBS_CLUSTER_DIR/pids)
# and remove the cluster state: etcd data, certificates, kubeconfigs, pid files.
# logs/ is kept for post-mortems (up.sh starts it afresh); --purge removes the whole dir.
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
D="$T9KJOBS_CLUSTER_DIR"
purge=0
[[ "${1:-}" == "--purge" ]] && purge=1
[[ -d "$D" ]] || exit 0
if [[ -z "${T9KJOBS_DOWN_NOLOCK:-}" ]]; then
	exec 8>"$D/.lock"
	flock 8
fi

# stop NAME: SIGTERM, then SIGKILL after 15 s; only a pid of ours (cluster_pid).
stop() {
	local name=$1 f="$D/pids/$1.pid" pid i
	[[ -f "$f" ]] || return 0
	if pid=$(cluster_pid "$name"); then
		kill -TERM "$pid" 2>/dev/null || true
		for i in $(seq 150); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$pid" 2>/dev/null; then
			cluster_log "$name (pid $pid) ignored SIGTERM: killing it"
			kill -KILL "$pid" 2>/dev/null || true
			sleep 0.2
		fi
		cluster_log "stopped $name (pid $pid)"
	fi
	rm -f "$f" "$D/pids/$name.cmd"
}
# A MultiKueue worker first (multikueue/up.sh), while this API server answers.
if [[ -d "$D/worker" ]] || grep -q '^MULTIKUEUE_WORKER_DIR=' "$D/cluster.env" 2>/dev/null; then
	T9KJOBS_CLUSTER_DIR="$D" bash "$CLUSTER_HACK_DIR/multikueue/down.sh"
fi
# Kueue first: its webhooks are removed while the API server still answers (kueue/stop.sh).
# shellcheck source=kueue/stop.sh
source "$CLUSTER_HACK_DIR/kueue/stop.sh"
# The real node next (node/start.sh), while the API server still answers kubelet.
if [[ -d "$D/node" ]]; then
	# shellcheck source=node/stop.sh
	source "$CLUSTER_HACK_DIR/node/stop.sh"
fi
# Reverse start order; etcd last so the others shut down cleanly.
for name in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop "$name"
done

rm -rf "$D/etcd-data" "$D/pki" "$D/pids" "$D/kwok-home" "$D/kwok-logs" "$D/cluster.env" "$D/nodes.yaml" \
	"$D"/*.kubeconfig "$D/kubeconfig"
if [[ $purge == 1 ]]; then
	rm -rf "$D"
fi
cluster_log "cluster at $D is down"
