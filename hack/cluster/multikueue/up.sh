#!/usr/bin/env bash
# MultiKueue on the local cluster: the cluster at $T9KJOBS_CLUSTER_DIR (running, with Kueue)
# becomes the manager, and a second KWOK control plane with Kueue, the worker, is started
# beside it at $T9KJOBS_WORKER_DIR (default: <cluster dir>/worker) and connected to it, as
# Kueue's MultiKueue setup asks (docs/cluster.md, "Two clusters: MultiKueue"):
#
#   worker:  a service account kueue-system/multikueue with the rights MultiKueue uses there
#            (ClusterRole t9kjobs-multikueue-worker: Workloads and their status, our kinds),
#            a token of it in a kubeconfig (Kueue refuses file paths and insecure TLS);
#            our CRDs; a ClusterQueue `multikueue` (T9KJOBS_WORKER_GPUS GPUs, default 8) and a
#            LocalQueue `multikueue` in `default`.
#   manager: that kubeconfig in the Secret kueue-system/multikueue-<worker> (key `kubeconfig`),
#            MultiKueueCluster <worker>, MultiKueueConfig `multikueue`, AdmissionCheck
#            `multikueue` (controllerName kueue.x-k8s.io/multikueue), a ClusterQueue `multikueue`
#            that checks it (no nodes are needed for it: the manager's quota only gates
#            dispatch), a LocalQueue `multikueue` in `default`; Kueue's own rights on the
#            manager need nothing here (it runs with the admin kubeconfig; the chart's
#            multiKueue values grant them in a real install).
#
# Returns once the MultiKueueCluster and the AdmissionCheck are Active. Our operator is not
# started here: run one per cluster (`t9kjobs operator --kubeconfig <dir>/kubeconfig`). Stop the
# worker with multikueue/down.sh (the manager's down.sh stops it too).
#
# Environment: T9KJOBS_CLUSTER_DIR (the manager), T9KJOBS_WORKER_DIR, T9KJOBS_WORKER_NAME
# (worker), T9KJOBS_WORKER_NODES (4), T9KJOBS_WORKER_GPUS (8), T9KJOBS_MANAGER_GPUS (64).
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

M="$T9KJOBS_CLUSTER_DIR"
W="${T9KJOBS_WORKER_DIR:-$M/worker}"
NAME="${T9KJOBS_WORKER_NAME:-worker}"
"$CLUSTER_HACK_DIR/status.sh" >/dev/null 2>&1 ||
	cluster_die "no cluster runs at $M: start the manager first (T9KJOBS_KUEUE=1 make cluster-up)"
grep -qx 'KUEUE=1' "$M/cluster.env" ||
	cluster_die "the cluster at $M runs without Kueue: restart it with T9KJOBS_KUEUE=1"
BIN=$(sed -n 's/^BIN_DIR=//p' "$M/cluster.env")
MK=("$BIN/kubectl" --kubeconfig "$M/kubeconfig")
WK=("$BIN/kubectl" --kubeconfig "$W/kubeconfig")
TIMEOUT="${T9KJOBS_UP_TIMEOUT:-180}"

# The worker: a KWOK cluster with Kueue, on ports of its own (fixed ports are the manager's).
# A cluster already running at $T9KJOBS_WORKER_DIR (with Kueue: a real-node one, say) is the
# worker as it is, and is left running by multikueue/down.sh, which then removes only what this
# script put there (MULTIKUEUE_WORKER_STARTED=0 in the manager's cluster.env).
started=0
if ! T9KJOBS_CLUSTER_DIR="$W" "$CLUSTER_HACK_DIR/status.sh" >/dev/null 2>&1; then
	started=1
	cluster_log "starting the worker cluster at $W"
	env -u T9KJOBS_ETCD_PORT -u T9KJOBS_ETCD_PEER_PORT -u T9KJOBS_APISERVER_PORT \
		-u T9KJOBS_KCM_PORT -u T9KJOBS_SCHEDULER_PORT -u T9KJOBS_AUDIT -u T9KJOBS_MULTIKUEUE \
		T9KJOBS_CLUSTER_DIR="$W" T9KJOBS_KUEUE=1 T9KJOBS_NODES="${T9KJOBS_WORKER_NODES:-4}" \
		bash "$CLUSTER_HACK_DIR/up.sh"
elif ! grep -qx 'KUEUE=1' "$W/cluster.env"; then
	cluster_die "the cluster at $W runs without Kueue: a worker needs it (T9KJOBS_KUEUE=1)"
fi
WORKER_URL=$(sed -n 's/^APISERVER_URL=//p' "$W/cluster.env")

repo="$(cd "$CLUSTER_HACK_DIR/../.." && pwd)"
T9KJOBS="${T9KJOBS_CLI:-}"
[[ -z "$T9KJOBS" && -x "$repo/.venv/bin/t9kjobs" ]] && T9KJOBS="$repo/.venv/bin/t9kjobs"
[[ -z "$T9KJOBS" ]] && T9KJOBS=$(command -v t9kjobs || true)
frameworks="${T9KJOBS_KUEUE_FRAMEWORKS:-$(sed -n 's/^KUEUE_FRAMEWORKS=//p' "$M/cluster.env")}"
if [[ -z "$frameworks" ]]; then # a manager started before kueue/start.sh wrote them
	frameworks="ColossalAIJob.v1beta1.batch.tensorstack.dev,DeepSpeedJob.v1beta1.batch.tensorstack.dev"
	frameworks+=",GenericJob.v1beta1.batch.tensorstack.dev,PyTorchTrainingJob.v1beta1.batch.tensorstack.dev"
fi

# Our CRDs on both: the manager keeps the job, the worker runs it.
if [[ -n "$T9KJOBS" ]]; then
	for kc in "$M/kubeconfig" "$W/kubeconfig"; do
		"$T9KJOBS" crds --stdout | "$BIN/kubectl" --kubeconfig "$kc" apply --server-side --force-conflicts -f - >/dev/null
	done
	cluster_log "installed our CRDs on both clusters"
else
	cluster_log "no t9kjobs command (T9KJOBS_CLI, .venv, PATH): install our CRDs on both clusters yourself (t9kjobs crds --stdout | kubectl apply --server-side -f -)"
fi

# The worker's side: what MultiKueue does there, with its own identity. Kueue's controller
# creates and deletes the Workload copies and our jobs, watches both, and reads our jobs' status.
{
	cat <<YAML
apiVersion: v1
kind: ServiceAccount
metadata: {name: multikueue, namespace: kueue-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: t9kjobs-multikueue-worker}
rules:
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads]
  verbs: [create, delete, get, list, watch, update, patch]
- apiGroups: [kueue.x-k8s.io]
  resources: [workloads/status]
  verbs: [get, update, patch]
# Kueue defaults an empty integrations.frameworks to batch/job, whose MultiKueue adapter
# watches Jobs on every worker: without these rights the worker is never Active.
- apiGroups: [batch]
  resources: [jobs]
  verbs: [create, delete, get, list, watch]
- apiGroups: [batch]
  resources: [jobs/status]
  verbs: [get]
YAML
	IFS=, read -ra fws <<<"$frameworks"
	for fw in "${fws[@]}"; do
		kind=${fw%%.*} rest=${fw#*.}
		group=${rest#*.}
		plural="$(tr '[:upper:]' '[:lower:]' <<<"$kind")s"
		cat <<YAML
- apiGroups: [$group]
  resources: [$plural]
  verbs: [create, delete, get, list, watch]
- apiGroups: [$group]
  resources: [$plural/status]
  verbs: [get]
YAML
	done
	cat <<YAML
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: t9kjobs-multikueue-worker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: t9kjobs-multikueue-worker}
subjects:
- {kind: ServiceAccount, name: multikueue, namespace: kueue-system}
YAML
} | "${WK[@]}" apply -f - >/dev/null
token=$("${WK[@]}" -n kueue-system create token multikueue --duration=8760h)
ca=$(sed -n 's/^ *certificate-authority-data: //p' "$W/kubeconfig")
cat >"$W/multikueue.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: $NAME
  cluster: {server: "$WORKER_URL", certificate-authority-data: $ca}
users:
- name: multikueue
  user: {token: $token}
contexts:
- name: $NAME
  context: {cluster: $NAME, user: multikueue}
current-context: $NAME
YAML
chmod 600 "$W/multikueue.kubeconfig"

# queues FLAVOR_NAME GPUS [ADMISSION_CHECK]: a ResourceFlavor, a ClusterQueue `multikueue` for
# every namespace and a LocalQueue `multikueue` in `default`.
queues() {
	local checks=""
	[[ -n ${3:-} ]] && checks="  admissionChecksStrategy: {admissionChecks: [{name: $3}]}"
	cat <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: $1}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: multikueue}
spec:
  namespaceSelector: {}
$checks
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: $1
      resources:
      - {name: cpu, nominalQuota: "256"}
      - {name: memory, nominalQuota: 2Ti}
      - {name: nvidia.com/gpu, nominalQuota: "$2"}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: multikueue, namespace: default}
spec: {clusterQueue: multikueue}
YAML
}
queues multikueue-worker "${T9KJOBS_WORKER_GPUS:-8}" | "${WK[@]}" apply -f - >/dev/null

# The manager's side.
"${MK[@]}" -n kueue-system create secret generic "multikueue-$NAME" \
	--from-file=kubeconfig="$W/multikueue.kubeconfig" --dry-run=client -o yaml | "${MK[@]}" apply -f - >/dev/null
{
	cat <<YAML
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueCluster
metadata: {name: $NAME}
spec:
  clusterSource:
    kubeConfig: {locationType: Secret, location: multikueue-$NAME}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: MultiKueueConfig
metadata: {name: multikueue}
spec: {clusters: [$NAME]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: AdmissionCheck
metadata: {name: multikueue}
spec:
  controllerName: kueue.x-k8s.io/multikueue
  parameters: {apiGroup: kueue.x-k8s.io, kind: MultiKueueConfig, name: multikueue}
---
YAML
	queues multikueue-manager "${T9KJOBS_MANAGER_GPUS:-64}" multikueue
} | "${MK[@]}" apply -f - >/dev/null
"${MK[@]}" wait --for=condition=Active --timeout="${TIMEOUT}s" "multikueuecluster/$NAME" >/dev/null ||
	cluster_die "MultiKueueCluster $NAME is not Active: $("${MK[@]}" get multikueuecluster "$NAME" -o jsonpath='{.status.conditions}')"
"${MK[@]}" wait --for=condition=Active --timeout="${TIMEOUT}s" admissioncheck/multikueue >/dev/null
{
	echo "MULTIKUEUE_WORKER=$NAME"
	echo "MULTIKUEUE_WORKER_DIR=$W"
	echo "MULTIKUEUE_WORKER_STARTED=$started"
} >>"$M/cluster.env"
cluster_log "MultiKueue: manager $M, worker \"$NAME\" at $W (kubeconfig: $W/kubeconfig); LocalQueue default/multikueue on both"
