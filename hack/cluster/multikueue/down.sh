#!/usr/bin/env bash
# Undo multikueue/up.sh: the manager's MultiKueue objects (queues, AdmissionCheck,
# MultiKueueConfig, MultiKueueCluster, the worker's kubeconfig Secret) are deleted while its
# API server answers, then the worker cluster is stopped and its state removed (down.sh); a
# worker that ran before up.sh keeps running, without what up.sh put there.
# The manager's own down.sh runs this first. Environment: as multikueue/up.sh.
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"
M="$T9KJOBS_CLUSTER_DIR"
W="${T9KJOBS_WORKER_DIR:-$(sed -n 's/^MULTIKUEUE_WORKER_DIR=//p' "$M/cluster.env" 2>/dev/null | tail -n1)}"
W="${W:-$M/worker}"
NAME="${T9KJOBS_WORKER_NAME:-worker}"
BIN=$(sed -n 's/^BIN_DIR=//p' "$M/cluster.env" 2>/dev/null) || BIN=
# A worker that ran before multikueue/up.sh (MULTIKUEUE_WORKER_STARTED=0) keeps running: only
# what up.sh put there goes.
STARTED=$(sed -n 's/^MULTIKUEUE_WORKER_STARTED=//p' "$M/cluster.env" 2>/dev/null | tail -n1) || STARTED=
STARTED="${STARTED:-1}"
if [[ -x "$BIN/kubectl" && -f "$M/kubeconfig" ]]; then
	"$BIN/kubectl" --kubeconfig "$M/kubeconfig" --request-timeout=10s delete --ignore-not-found \
		-n default localqueue.kueue.x-k8s.io/multikueue >/dev/null 2>&1 || true
	"$BIN/kubectl" --kubeconfig "$M/kubeconfig" --request-timeout=10s delete --ignore-not-found \
		clusterqueue.kueue.x-k8s.io/multikueue admissioncheck.kueue.x-k8s.io/multikueue \
		multikueueconfig.kueue.x-k8s.io/multikueue "multikueuecluster.kueue.x-k8s.io/$NAME" \
		resourceflavor.kueue.x-k8s.io/multikueue-manager >/dev/null 2>&1 || true
	"$BIN/kubectl" --kubeconfig "$M/kubeconfig" --request-timeout=10s delete --ignore-not-found \
		-n kueue-system "secret/multikueue-$NAME" >/dev/null 2>&1 || true
	[[ -f "$M/cluster.env" ]] && sed -i '/^MULTIKUEUE_WORKER/d' "$M/cluster.env"
fi
if [[ -d "$W" && $STARTED == 1 ]]; then
	T9KJOBS_CLUSTER_DIR="$W" bash "$CLUSTER_HACK_DIR/down.sh" "$@"
elif [[ -x "$BIN/kubectl" && -f "$W/kubeconfig" ]]; then
	WK=("$BIN/kubectl" --kubeconfig "$W/kubeconfig" --request-timeout=10s)
	"${WK[@]}" delete --ignore-not-found -n default localqueue.kueue.x-k8s.io/multikueue >/dev/null 2>&1 || true
	"${WK[@]}" delete --ignore-not-found clusterqueue.kueue.x-k8s.io/multikueue \
		resourceflavor.kueue.x-k8s.io/multikueue-worker clusterrolebinding/t9kjobs-multikueue-worker \
		clusterrole/t9kjobs-multikueue-worker >/dev/null 2>&1 || true
	"${WK[@]}" delete --ignore-not-found -n kueue-system serviceaccount/multikueue >/dev/null 2>&1 || true
	rm -f "$W/multikueue.kubeconfig"
fi
