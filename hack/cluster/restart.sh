#!/usr/bin/env bash
# Crash one component of the running local cluster and start it again, as a node's supervisor
# would: SIGKILL (no shutdown of any kind), DOWN seconds of nothing, then the very command line
# up.sh started it with (same data dir, certificates, ports and flags; its log goes on in
# logs/NAME.log). Returns once it is back: for kube-apiserver, once it answers /readyz.
#
# Usage: restart.sh NAME [DOWN]   NAME: kube-apiserver, etcd, kube-controller-manager,
#                                 kube-scheduler or kwok; DOWN: seconds, default 0
# Environment: T9KJOBS_CLUSTER_DIR, T9KJOBS_UP_TIMEOUT (180).
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
D="$T9KJOBS_CLUSTER_DIR"
NAME=${1:?usage: restart.sh NAME [DOWN]}
DOWN=${2:-0}
TIMEOUT="${T9KJOBS_UP_TIMEOUT:-180}"
[[ -f "$D/pids/$NAME.cmd" ]] || cluster_die "no $NAME started by up.sh at $D (no pids/$NAME.cmd)"

if pid=$(cluster_pid "$NAME"); then
	kill -KILL "$pid"
	while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
	cluster_log "killed $NAME (pid $pid)"
fi
sleep "$DOWN"
mapfile -d '' command <"$D/pids/$NAME.cmd"
cluster_start "$NAME" "${command[@]}"
if [[ $NAME == kube-apiserver ]]; then
	BIN=$(sed -n 's/^BIN_DIR=//p' "$D/cluster.env")
	deadline=$((SECONDS + TIMEOUT))
	until "$BIN/kubectl" --kubeconfig "$D/kubeconfig" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; do
		cluster_pid "$NAME" >/dev/null || cluster_exited "$NAME" "on restart"
		((SECONDS < deadline)) || cluster_die "timed out after ${TIMEOUT}s waiting for $NAME"
		sleep 0.2
	done
	cluster_log "ready: $NAME"
fi
