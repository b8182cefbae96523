#!/usr/bin/env bash
# Exit 0 when the cluster at $T9KJOBS_CLUSTER_DIR is running (every process alive and the
# API server ready), 1 otherwise. Prints a short summary.
set -uo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
D="$T9KJOBS_CLUSTER_DIR"
[[ -f "$D/cluster.env" ]] || { echo "not running (no $D/cluster.env)"; exit 1; }
BIN_DIR=$(sed -n 's/^BIN_DIR=//p' "$D/cluster.env")
MODE=$(sed -n 's/^MODE=//p' "$D/cluster.env")
if [[ $MODE == real ]]; then
	node_procs=(node-mounts containerd kubelet coredns)
else
	node_procs=(kwok)
fi
grep -qx 'KUEUE=1' "$D/cluster.env" && node_procs+=(kueue)
rc=0
for name in etcd kube-apiserver kube-controller-manager kube-scheduler "${node_procs[@]}"; do
	pid=$(cat "$D/pids/$name.pid" 2>/dev/null) || pid=
	if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
		echo "$name: running (pid $pid)"
	else
		echo "$name: not running"
		rc=1
	fi
done
if [[ $rc == 0 ]] && "$BIN_DIR/kubectl" --kubeconfig "$D/kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
	echo "kube-apiserver: ready ($(sed -n 's/^APISERVER_URL=//p' "$D/cluster.env"))"
else
	[[ $rc == 0 ]] && echo "kube-apiserver: not ready"
	rc=1
fi
exit $rc
