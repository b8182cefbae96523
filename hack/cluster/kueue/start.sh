# Kueue (sigs.k8s.io/kueue, queues, quotas and preemption) as a host process beside the control
# plane. Sourced by up.sh when T9KJOBS_KUEUE=1, once the nodes are ready; uses its variables
# (D, P, BIN, KUBECTL, TIMEOUT) and functions (start, wait_for, newca, sign). docs/cluster.md
# says why a host process: a KWOK cluster has no node to run a pod of it on, and one way for
# both modes is one way to test.
#
# - Built from its Go module, cached by version (kueue/build.sh).
# - Its CRDs at their storage version only, and its webhooks on its own API only
#   (kueue/manifests.py), called by the API server at https://127.0.0.1:PORT with a CA made
#   here; internal certificate management off (it expects an in-cluster Service).
# - v0.17 reads its metrics certificate from /etc/kueue/metrics/certs whatever its
#   configuration says: it runs in a mount namespace of its own where /etc is an overlay that
#   has that directory; the host's /etc is not touched.
# - The on-demand visibility API is off (VisibilityOnDemand: its server wants another
#   certificate, and nothing here uses it).
# - Topology-Aware Scheduling on (beta, the default in v0.17): a ResourceFlavor with a
#   topologyName places a Workload's pods in a Topology's domains (docs/scheduling.md).
# - The integrations: none asked for (Kueue defaults that to batch/job; its webhooks on Jobs are
#   not installed, and nothing here queues a Job: docs/cluster.md), and our
#   kinds as external frameworks: T9KJOBS_KUEUE_FRAMEWORKS (Kind.version.group, commas), else
#   the installed plugins' kinds (`t9kjobs plugins --kueue-frameworks`); the same kinds for
#   MultiKueue's generic adapter (multiKueue.externalFrameworks), so that any such cluster can
#   be a manager (multikueue/up.sh).
# shellcheck shell=bash

if [[ ! -x "$(bash "$CLUSTER_HACK_DIR/kueue/build.sh" --check 2>/dev/null)/kueue" ]]; then
	KUEUE_DIR="$(cluster_step "build: Kueue from its Go module" bash "$CLUSTER_HACK_DIR/kueue/build.sh")"
else
	KUEUE_DIR="$(bash "$CLUSTER_HACK_DIR/kueue/build.sh")"
fi
K="$D/kueue"
rm -rf "$K"
mkdir -p "$K/certs" "$K/etc"
repo="$(cd "$CLUSTER_HACK_DIR/../.." && pwd)"
KUEUE_PY="${T9KJOBS_PYTHON:-}"
if [[ -z "$KUEUE_PY" ]]; then
	KUEUE_PY=python3
	[[ -x "$repo/.venv/bin/python" ]] && KUEUE_PY="$repo/.venv/bin/python"
fi

frameworks="${T9KJOBS_KUEUE_FRAMEWORKS:-}"
if [[ -z "$frameworks" && -x "$repo/.venv/bin/t9kjobs" ]]; then
	frameworks="$("$repo/.venv/bin/t9kjobs" plugins --kueue-frameworks 2>/dev/null)" || frameworks=
fi
if [[ -z "$frameworks" ]]; then
	frameworks="ColossalAIJob.v1beta1.batch.tensorstack.dev,DeepSpeedJob.v1beta1.batch.tensorstack.dev"
	frameworks+=",GenericJob.v1beta1.batch.tensorstack.dev,PyTorchTrainingJob.v1beta1.batch.tensorstack.dev"
fi

read -r P_KUEUE_WEBHOOK P_KUEUE_HEALTH < <(python3 -c '
import socket
socks = [socket.socket() for _ in range(2)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))')

newca kueue-ca "/CN=t9kjobs-kueue-ca"
SIGN_CA=kueue-ca sign kueue-webhook "/CN=kueue-webhook" serverAuth "IP:127.0.0.1"
cp "$P/kueue-webhook.crt" "$K/certs/tls.crt"
cp "$P/kueue-webhook.key" "$K/certs/tls.key"

cat >"$K/config.yaml" <<YAML
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health:
  healthProbeBindAddress: 127.0.0.1:$P_KUEUE_HEALTH
metrics:
  bindAddress: "0"
webhook:
  host: 127.0.0.1
  port: $P_KUEUE_WEBHOOK
  certDir: $K/certs
leaderElection:
  leaderElect: false
internalCertManagement:
  enable: false
manageJobsWithoutQueueName: false
integrations:
  frameworks: []
  externalFrameworks: [$(sed 's/,/, /g' <<<"$frameworks")]
# The same kinds dispatched by MultiKueue's generic adapter, when this cluster is a manager
# (multikueue/up.sh connects a worker; without an AdmissionCheck of MultiKueue it does nothing).
multiKueue:
  externalFrameworks: [$(sed 's/\([^,]*\)/{name: \1}/g; s/,/, /g' <<<"$frameworks")]
featureGates:
  VisibilityOnDemand: false
  # Beta and on by default in v0.17; said here because multi-cluster dispatch of our kinds
  # (tests/e2e/test_multikueue.py) needs it.
  MultiKueueAdaptersForCustomJobs: true
  # Beta and on by default in v0.17; said here because tests/e2e/test_kueue_tas.py needs it.
  TopologyAwareScheduling: true
YAML

"$KUEUE_PY" "$CLUSTER_HACK_DIR/kueue/manifests.py" crds "$KUEUE_DIR/config/crd" >"$K/crds.json"
"${KUBECTL[@]}" apply --server-side --force-conflicts -f "$K/crds.json" >/dev/null
"${KUBECTL[@]}" wait --for=condition=Established --timeout="${TIMEOUT}s" -f "$K/crds.json" >/dev/null
"${KUBECTL[@]}" create namespace kueue-system >/dev/null
cluster_log "installed Kueue's CRDs ($(basename "$KUEUE_DIR")); external frameworks: $frameworks"

# The overlay's writable layer is a tmpfs of the mount namespace: it goes with the process.
start kueue unshare --mount --propagation private env KUBECONFIG="$D/kubeconfig" sh -c '
	set -e
	mount -t tmpfs t9kjobs-kueue-etc "$1"
	mkdir "$1/upper" "$1/work"
	mount -t overlay t9kjobs-kueue-etc -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
	mkdir -p /etc/kueue/metrics/certs
	cp "$2/tls.crt" "$2/tls.key" /etc/kueue/metrics/certs/
	shift 2
	exec "$@"' kueue "$K/etc" "$K/certs" \
	"$KUEUE_DIR/kueue" --config="$K/config.yaml" --zap-log-level=info

kueue_ready() { python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$P_KUEUE_HEALTH/readyz"; }
wait_for "Kueue on 127.0.0.1:$P_KUEUE_WEBHOOK" kueue kueue_ready
"$KUEUE_PY" "$CLUSTER_HACK_DIR/kueue/manifests.py" webhooks "$KUEUE_DIR/config/webhook.yaml" \
	"https://127.0.0.1:$P_KUEUE_WEBHOOK" "$P/kueue-ca.crt" >"$K/webhooks.json"
"${KUBECTL[@]}" apply -f "$K/webhooks.json" >/dev/null
# The webhooks answer once the API server calls them (a dry-run ResourceFlavor goes through both).
kueue_webhooks() {
	"${KUBECTL[@]}" create --dry-run=server -o name -f - <<<'{"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "t9kjobs-probe"}}'
}
wait_for "Kueue's webhooks, called by kube-apiserver" kueue kueue_webhooks
{
	echo "KUEUE=1"
	echo "KUEUE_DIR=$KUEUE_DIR"
	echo "KUEUE_WEBHOOK_PORT=$P_KUEUE_WEBHOOK"
	echo "KUEUE_HEALTH_PORT=$P_KUEUE_HEALTH"
	echo "KUEUE_FRAMEWORKS=$frameworks"
} >>"$D/cluster.env"
