# KWOK nodes: fake nodes whose pods KWOK drives through a simulated lifecycle (stages/).
# Sourced by up.sh (T9KJOBS_NODES=<number>) once the control plane is ready; uses its variables
# (D, BIN, KUBECTL, NODES, POD_CIDR) and functions (start, wait_for).
# shellcheck shell=bash

# The nodes' kubelet endpoint is kwok's server on 127.0.0.1:$P_KWOK (TLS by the cluster CA):
# it serves a log to the pods of $KWOK_LOG_NAMESPACE only, the lines of $KWOK_LOG_FILE, which
# a test or a benchmark appends to (the operator reads progress from logs; docs/cluster.md).
# kwok reads the file on every request; its first line must be in CRI form.
mkdir -p "$(dirname "$KWOK_LOG_FILE")"
[[ -s $KWOK_LOG_FILE ]] || echo "$(date -u +%Y-%m-%dT%H:%M:%S.%NZ) stdout F kwok: the log of a simulated pod" >"$KWOK_LOG_FILE"
cat >"$D/kwok-logs/logs.yaml" <<LOGS
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterLogs
metadata:
  name: t9kjobs-kwok-logs
spec:
  selector:
    matchNamespaces: [$KWOK_LOG_NAMESPACE]
  logs:
  - logsFile: $KWOK_LOG_FILE
LOGS

# HOME is pointed into the cluster dir so a ~/.kwok/kwok.yaml of the user is not loaded.
start kwok env HOME="$D/kwok-home" "$BIN/kwok" \
	--kubeconfig="$D/kwok.kubeconfig" \
	--config="$CLUSTER_HACK_DIR/stages/node.yaml" \
	--config="$CLUSTER_HACK_DIR/stages/pod.yaml" \
	--config="$D/kwok-logs/logs.yaml" \
	--manage-all-nodes=false \
	--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake \
	--node-ip=127.0.0.1 \
	--node-port="$P_KWOK" \
	--server-address="127.0.0.1:$P_KWOK" \
	--tls-cert-file="$D/pki/kwok-kubelet.crt" \
	--tls-private-key-file="$D/pki/kwok-kubelet.key" \
	--cidr="$POD_CIDR" \
	--node-lease-duration-seconds=40

# ---------------------------------------------------------------- fake nodes
{
	for i in $(seq 0 $((NODES - 1))); do
		cat <<EOF
---
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-$i
  annotations:
    kwok.x-k8s.io/node: fake
    node.alpha.kubernetes.io/ttl: "0"
  labels:
    type: kwok
    kubernetes.io/arch: amd64
    kubernetes.io/hostname: kwok-node-$i
    kubernetes.io/os: linux
    node.kubernetes.io/instance-type: kwok-gpu
status:
EOF
		for field in allocatable capacity; do
			cat <<EOF
  $field:
    cpu: "${T9KJOBS_NODE_CPU:-32}"
    memory: ${T9KJOBS_NODE_MEMORY:-256Gi}
    ephemeral-storage: 1Ti
    pods: "${T9KJOBS_NODE_PODS:-110}"
    nvidia.com/gpu: "${T9KJOBS_NODE_GPUS:-8}"
EOF
		done
	done
} >"$D/nodes.yaml"
# Created (with their status) by the admin. Retried: kube-apiserver may still be installing
# its bootstrap policy; nodes that already exist are fine.
create_nodes() {
	"${KUBECTL[@]}" create -f "$D/nodes.yaml" || true
	[[ $("${KUBECTL[@]}" get nodes -l type=kwok -o name | grep -c .) == "$NODES" ]]
}
wait_for "$NODES fake nodes created" kube-apiserver create_nodes
nodes_ready() {
	local out
	out=$("${KUBECTL[@]}" get nodes -l type=kwok -o jsonpath='{range .items[*]}{.metadata.name}{" "}{.status.conditions[?(@.type=="Ready")].status}{" "}{.spec.taints}{"\n"}{end}') || return 1
	[[ $(grep -c . <<<"$out") == "$NODES" ]] || return 1
	# every line "name True " (Ready, no taints)
	! grep -qvE '^[^ ]+ True $' <<<"$out"
}
wait_for "$NODES fake nodes Ready and untainted" kwok nodes_ready
