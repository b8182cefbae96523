#!/usr/bin/env bash
# Start the local test control plane on 127.0.0.1:
#   etcd, kube-apiserver (Node,RBAC), kube-controller-manager, kube-scheduler, and either
#   - kwok managing $T9KJOBS_NODES (default 4) fake nodes (simulated pods, kwok/start.sh), or
#   - with T9KJOBS_NODES=real, one real node: containerd, runc, the CNI bridge, kubelet and
#     CoreDNS, with the images of hack/images imported (node/start.sh).
# Builds the binaries (and images) first when they are missing (build.sh, node/build.sh,
# ../images/build.sh).
# Returns when the API server is ready and every node is Ready without taints.
# Admin kubeconfig: $T9KJOBS_CLUSTER_DIR/kubeconfig (default ~/.cache/t9kjobs/cluster).
# Ports and paths: $T9KJOBS_CLUSTER_DIR/cluster.env.
# Does nothing when a cluster is already running at that dir. Stop it with down.sh.
#
# Environment:
#   T9KJOBS_CACHE, T9KJOBS_CLUSTER_DIR       where binaries / cluster state live
#   T9KJOBS_NODES (4, or real), T9KJOBS_NODE_GPUS (8), T9KJOBS_NODE_CPU (32), T9KJOBS_NODE_MEMORY (256Gi),
#   T9KJOBS_NODE_PODS (110)                  fake node shape
#   T9KJOBS_ETCD_PORT, T9KJOBS_ETCD_PEER_PORT, T9KJOBS_APISERVER_PORT, T9KJOBS_KCM_PORT,
#   T9KJOBS_SCHEDULER_PORT                   fixed ports (default: free ones picked at start)
#   T9KJOBS_UP_TIMEOUT (180)                 seconds to wait for each readiness step
#   T9KJOBS_GANG_API=0                       leave out kube-scheduler's gang scheduling (the
#                                            GenericWorkload and GangScheduling gates and
#                                            scheduling.k8s.io/v1alpha2), on by default
#   T9KJOBS_KUEUE=1                          Kueue (queues, quotas, preemption) beside the
#                                            control plane, built first when missing
#                                            (kueue/start.sh, docs/cluster.md)
#   T9KJOBS_MULTIKUEUE=1                     this cluster a MultiKueue manager (Kueue on), and a
#                                            worker cluster beside it in <dir>/worker
#                                            (multikueue/up.sh, docs/cluster.md)
#   T9KJOBS_AUDIT=1                          audit log of service accounts' requests (outside
#                                            kube-system) in logs/audit.log (docs/cluster.md)
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

D="$T9KJOBS_CLUSTER_DIR"
# T9KJOBS_NODES: a number of KWOK nodes (simulated pods), or "real" for one real node.
NODES="${T9KJOBS_NODES:-4}"
if [[ $NODES == real ]]; then
	MODE=real
	# kubelet binds unix sockets under its root dir, $D/node/kubelet; the longest,
	# pod-resources/<10 digits>, has to fit sun_path (107 bytes), or kubelet fails to start with
	# "bind: invalid argument".
	mkdir -p "$D"
	D="$(cd "$D" && pwd -P)"
	socket="$D/node/kubelet/pod-resources/0123456789"
	((${#socket} <= 107)) || cluster_die "T9KJOBS_CLUSTER_DIR=$D is ${#D} characters long; a real node needs at most 69 (unix socket paths under it are limited to 107 bytes)"
elif [[ $NODES =~ ^[0-9]+$ && $NODES -ge 1 ]]; then
	MODE=kwok
else
	cluster_die "T9KJOBS_NODES must be \"real\" or a number of KWOK nodes >= 1, not \"$NODES\""
fi
TIMEOUT="${T9KJOBS_UP_TIMEOUT:-180}"
SERVICE_CIDR="10.96.0.0/16"
SERVICE_IP="10.96.0.1" # first IP of SERVICE_CIDR: the `kubernetes` Service
POD_CIDR="10.244.0.0/16"
# KWOK nodes serve the pods of this one namespace a log: the lines of this file (CRI format:
# `<RFC 3339> stdout F <text>`), which tests and benchmarks write (kwok/start.sh). Pods of
# every other namespace have none, like the simulated containers they are.
KWOK_LOG_NAMESPACE=t9kjobs-kwok-logs
KWOK_LOG_FILE="$D/kwok-logs/pods.log"

command -v openssl >/dev/null || cluster_die "openssl is required (apt-get install openssl)"
command -v python3 >/dev/null || cluster_die "python3 is required"

# A first build says what it builds, step by step, with the time each takes (cluster_step).
CLUSTER_BUILD_STEPS=1
[[ $MODE == real ]] && CLUSTER_BUILD_STEPS=3
export CLUSTER_BUILD_STEPS
if cluster_bins_present; then
	BIN="$("$CLUSTER_HACK_DIR/build.sh")"
else
	what="control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,"
	what+=" kwok) from Go modules"
	BIN="$(cluster_step "build 1/$CLUSTER_BUILD_STEPS: $what" "$CLUSTER_HACK_DIR/build.sh")"
fi

mkdir -p "$D"
exec 8>"$D/.lock"
flock 8

if "$CLUSTER_HACK_DIR/status.sh" >/dev/null 2>&1; then
	running=$(sed -n 's/^MODE=//p' "$D/cluster.env")
	[[ $running == "$MODE" ]] || cluster_die "a ${running:-kwok} cluster already runs at $D; stop it first (make cluster-down) or use another T9KJOBS_CLUSTER_DIR"
	cluster_log "already running at $D (kubeconfig: $D/kubeconfig)"
	exit 0
fi
if compgen -G "$D/pids/*.pid" >/dev/null; then
	cluster_log "stale cluster state at $D: cleaning it up first"
	T9KJOBS_DOWN_NOLOCK=1 "$CLUSTER_HACK_DIR/down.sh"
fi

ok=0
on_exit() {
	if [[ $ok == 0 ]]; then
		cluster_log "start failed; last lines of the logs in $D/logs:"
		for f in "$D"/logs/*.log; do
			[[ -f "$f" ]] || continue
			echo "----- $f" >&2
			tail -n 15 "$f" >&2
		done
		T9KJOBS_DOWN_NOLOCK=1 "$CLUSTER_HACK_DIR/down.sh" >&2 || true
	fi
}
trap on_exit EXIT

rm -rf "$D/pki" "$D/pids" "$D/etcd-data" "$D/logs" "$D/kwok-home"
mkdir -p "$D/pki" "$D/pids" "$D/logs" "$D/kwok-home"
chmod 700 "$D/pki"

# ---------------------------------------------------------------- ports
read -r P_ETCD P_ETCD_PEER P_API P_KCM P_SCHED P_KUBELET_HEALTHZ P_DNS_READY P_DNS_HEALTH P_KWOK < <(python3 - <<'EOF'
import socket
socks = []
for _ in range(9):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(*(s.getsockname()[1] for s in socks))
EOF
)
P_ETCD="${T9KJOBS_ETCD_PORT:-$P_ETCD}"
P_ETCD_PEER="${T9KJOBS_ETCD_PEER_PORT:-$P_ETCD_PEER}"
P_API="${T9KJOBS_APISERVER_PORT:-$P_API}"
P_KCM="${T9KJOBS_KCM_PORT:-$P_KCM}"
P_SCHED="${T9KJOBS_SCHEDULER_PORT:-$P_SCHED}"
SERVER="https://127.0.0.1:$P_API"

# ---------------------------------------------------------------- certificates
cluster_log "generating certificates in $D/pki"
P="$D/pki"
newkey() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
# newca NAME SUBJECT: self-signed CA $P/NAME.{crt,key}
newca() {
	newkey "$P/$1.key"
	openssl req -x509 -new -key "$P/$1.key" -subj "$2" -days 3650 \
		-addext "basicConstraints=critical,CA:TRUE" \
		-addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" \
		-out "$P/$1.crt" 2>/dev/null
}
# sign NAME SUBJECT EXTENDED_KEY_USAGE [SAN]: $P/NAME.{crt,key} signed by the CA $SIGN_CA (ca)
sign() {
	local name=$1 subj=$2 eku=$3 san=${4:-} ca=${SIGN_CA:-ca}
	newkey "$P/$name.key"
	openssl req -new -key "$P/$name.key" -subj "$subj" -out "$P/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=critical,CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		echo "extendedKeyUsage=$eku"
		if [[ -n "$san" ]]; then echo "subjectAltName=$san"; fi
	} >"$P/$name.ext"
	openssl x509 -req -in "$P/$name.csr" -CA "$P/$ca.crt" -CAkey "$P/$ca.key" -CAcreateserial \
		-days 3650 -extfile "$P/$name.ext" -out "$P/$name.crt" 2>/dev/null
	rm -f "$P/$name.csr" "$P/$name.ext"
}
newca ca "/CN=t9kjobs-test-ca"
sign apiserver "/CN=kube-apiserver" serverAuth \
	"IP:127.0.0.1,IP:$SERVICE_IP,IP:$NODE_IP,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
sign admin "/O=system:masters/CN=t9kjobs-admin" clientAuth
# kube-apiserver's identity towards kubelets (logs, exec, port-forward), as kubeadm makes it.
sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
sign kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
sign kube-scheduler "/CN=system:kube-scheduler" clientAuth
# kwok writes node and pod status, node leases and deletes pods on behalf of every fake
# kubelet; like kwokctl, we give it cluster-admin rights (it is test infrastructure).
sign kwok "/O=system:masters/CN=kwok-controller" clientAuth
# The fake nodes' kubelet endpoint, served by kwok (pod logs: kwok/start.sh); kube-apiserver
# checks it against the cluster CA (--kubelet-certificate-authority).
sign kwok-kubelet "/CN=kwok-kubelet" serverAuth "IP:127.0.0.1,DNS:localhost"
# Front proxy (request-header authentication, for aggregated API servers): its own CA.
newca front-proxy-ca "/CN=t9kjobs-front-proxy-ca"
SIGN_CA=front-proxy-ca sign front-proxy-client "/CN=front-proxy-client" clientAuth
# Service-account token signing key.
newkey "$P/sa.key"
openssl pkey -in "$P/sa.key" -pubout -out "$P/sa.pub" 2>/dev/null

# kubeconfig FILE USER
kubeconfig() {
	local file=$1 user=$2
	cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: t9kjobs
  cluster:
    server: $SERVER
    certificate-authority-data: $(base64 -w0 <"$P/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$P/$user.crt")
    client-key-data: $(base64 -w0 <"$P/$user.key")
contexts:
- name: t9kjobs
  context:
    cluster: t9kjobs
    user: $user
current-context: t9kjobs
EOF
	chmod 600 "$file"
}
kubeconfig "$D/kubeconfig" admin
kubeconfig "$D/kube-controller-manager.kubeconfig" kube-controller-manager
kubeconfig "$D/kube-scheduler.kubeconfig" kube-scheduler
kubeconfig "$D/kwok.kubeconfig" kwok

cat >"$D/cluster.env" <<EOF
# Written by hack/cluster/up.sh; read by tests/e2e/conftest.py and down.sh.
CLUSTER_DIR=$D
BIN_DIR=$BIN
KUBECONFIG=$D/kubeconfig
APISERVER_URL=$SERVER
APISERVER_PORT=$P_API
ETCD_PORT=$P_ETCD
ETCD_PEER_PORT=$P_ETCD_PEER
KCM_PORT=$P_KCM
SCHEDULER_PORT=$P_SCHED
KWOK_PORT=$P_KWOK
KWOK_LOG_NAMESPACE=$KWOK_LOG_NAMESPACE
KWOK_LOG_FILE=$KWOK_LOG_FILE
SERVICE_CIDR=$SERVICE_CIDR
POD_CIDR=$POD_CIDR
NODES=$NODES
MODE=$MODE
EOF

# ---------------------------------------------------------------- processes
# start NAME BINARY ARGS...: see cluster_start (common.sh).
start() { cluster_start "$@"; }
alive() {
	local pid
	pid=$(cat "$D/pids/$1.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null
}
# wait_for DESCRIPTION COMPONENT COMMAND...: poll COMMAND until it succeeds; fail early when
# COMPONENT died.
wait_for() {
	local desc=$1 comp=$2 deadline=$((SECONDS + TIMEOUT))
	shift 2
	until "$@" >/dev/null 2>&1; do
		alive "$comp" || cluster_exited "$comp" "while waiting for: $desc"
		((SECONDS < deadline)) || cluster_die "timed out after ${TIMEOUT}s waiting for: $desc"
		sleep 0.5
	done
	cluster_log "ready: $desc"
}
KUBECTL=("$BIN/kubectl" --kubeconfig "$D/kubeconfig")

start etcd "$BIN/etcd" \
	--name=t9kjobs \
	--data-dir="$D/etcd-data" \
	--listen-client-urls="http://127.0.0.1:$P_ETCD" \
	--advertise-client-urls="http://127.0.0.1:$P_ETCD" \
	--listen-peer-urls="http://127.0.0.1:$P_ETCD_PEER" \
	--initial-advertise-peer-urls="http://127.0.0.1:$P_ETCD_PEER" \
	--initial-cluster="t9kjobs=http://127.0.0.1:$P_ETCD_PEER" \
	--auto-compaction-retention=1 \
	--unsafe-no-fsync=true \
	--log-level=warn
etcd_healthy() { python3 -c 'import sys,urllib.request; sys.exit(0 if b"true" in urllib.request.urlopen(sys.argv[1], timeout=2).read() else 1)' "http://127.0.0.1:$P_ETCD/health"; }
wait_for "etcd on 127.0.0.1:$P_ETCD" etcd etcd_healthy

# Opt-in audit log: what a service account really asks of the API server (to check an RBAC role
# against it), and every write made with the admin certificate (operators started by tests
# use it; each replica names itself in its user agent), with the Lease writes' bodies (who took
# the Lease), the service accounts' as the admin's (the operator installed by its chart): the
# chaos tier and the install tier's failover tests check from it that no replica wrote after
# losing the Lease. Metadata level, and nothing of kube-system's controllers or kwok, so it
# stays small.
AUDIT_ARGS=()
if [[ ${T9KJOBS_AUDIT:-} == 1 ]]; then
	cat >"$D/audit-policy.yaml" <<EOF
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  userGroups: ["system:serviceaccounts:kube-system"]
- level: Request
  userGroups: ["system:serviceaccounts"]
  verbs: ["create", "update", "patch"]
  resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
- level: Metadata
  userGroups: ["system:serviceaccounts"]
- level: Request
  users: ["t9kjobs-admin"]
  verbs: ["create", "update", "patch"]
  resources: [{group: "coordination.k8s.io", resources: ["leases"]}]
- level: Metadata
  users: ["t9kjobs-admin"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
EOF
	AUDIT_ARGS=(--audit-policy-file="$D/audit-policy.yaml" --audit-log-path="$D/logs/audit.log")
	echo "AUDIT_LOG=$D/logs/audit.log" >>"$D/cluster.env"
fi

# CPU profiles of the control plane (/debug/pprof on each component's secure port), for the
# benchmark's --profile-control-plane; off otherwise, as in a production cluster.
PROFILING=false
if [[ ${T9KJOBS_PROFILING:-0} == 1 ]]; then
	PROFILING=true
fi

# kube-scheduler's own gang scheduling (Kubernetes 1.36, alpha): the PodGroup API
# (scheduling.k8s.io/v1alpha2) served by the API server, pods' spec.schedulingGroup kept, the
# scheduler's GangScheduling plugin on, the controller-manager aware of PodGroups. The three
# components must agree on the gates (docs/scheduling.md).
GANG_ARGS=()
GANG_API_ARGS=()
if [[ ${T9KJOBS_GANG_API:-1} == 1 ]]; then
	GANG_ARGS=(--feature-gates=GenericWorkload=true,GangScheduling=true)
	GANG_API_ARGS=("${GANG_ARGS[@]}" --runtime-config=scheduling.k8s.io/v1alpha2=true)
fi
echo "GANG_API=${T9KJOBS_GANG_API:-1}" >>"$D/cluster.env"

start kube-apiserver "$BIN/kube-apiserver" \
	"${AUDIT_ARGS[@]}" \
	"${GANG_API_ARGS[@]}" \
	--bind-address=127.0.0.1 \
	--advertise-address=127.0.0.1 \
	--secure-port="$P_API" \
	--etcd-servers="http://127.0.0.1:$P_ETCD" \
	--authorization-mode=Node,RBAC \
	--client-ca-file="$P/ca.crt" \
	--tls-cert-file="$P/apiserver.crt" \
	--tls-private-key-file="$P/apiserver.key" \
	--service-account-issuer=https://kubernetes.default.svc.cluster.local \
	--service-account-key-file="$P/sa.pub" \
	--service-account-signing-key-file="$P/sa.key" \
	--service-cluster-ip-range="$SERVICE_CIDR" \
	--requestheader-client-ca-file="$P/front-proxy-ca.crt" \
	--requestheader-allowed-names=front-proxy-client \
	--requestheader-username-headers=X-Remote-User \
	--requestheader-group-headers=X-Remote-Group \
	--requestheader-extra-headers-prefix=X-Remote-Extra- \
	--proxy-client-cert-file="$P/front-proxy-client.crt" \
	--proxy-client-key-file="$P/front-proxy-client.key" \
	--endpoint-reconciler-type=none \
	--kubelet-client-certificate="$P/apiserver-kubelet-client.crt" \
	--kubelet-client-key="$P/apiserver-kubelet-client.key" \
	--kubelet-certificate-authority="$P/ca.crt" \
	--kubelet-preferred-address-types=InternalIP,Hostname \
	--allow-privileged=true \
	--profiling="$PROFILING" \
	--v=1
wait_for "kube-apiserver on $SERVER" kube-apiserver "${KUBECTL[@]}" get --raw /readyz

start kube-controller-manager "$BIN/kube-controller-manager" \
	"${GANG_ARGS[@]}" \
	--kubeconfig="$D/kube-controller-manager.kubeconfig" \
	--authentication-kubeconfig="$D/kube-controller-manager.kubeconfig" \
	--authorization-kubeconfig="$D/kube-controller-manager.kubeconfig" \
	--bind-address=127.0.0.1 \
	--secure-port="$P_KCM" \
	--leader-elect=false \
	--use-service-account-credentials=true \
	--service-account-private-key-file="$P/sa.key" \
	--root-ca-file="$P/ca.crt" \
	--profiling="$PROFILING" \
	--v=1

start kube-scheduler "$BIN/kube-scheduler" \
	"${GANG_ARGS[@]}" \
	--kubeconfig="$D/kube-scheduler.kubeconfig" \
	--authentication-kubeconfig="$D/kube-scheduler.kubeconfig" \
	--authorization-kubeconfig="$D/kube-scheduler.kubeconfig" \
	--bind-address=127.0.0.1 \
	--secure-port="$P_SCHED" \
	--leader-elect=false \
	--profiling="$PROFILING" \
	--v=1

# ---------------------------------------------------------------- nodes
if [[ $MODE == real ]]; then
	# shellcheck source=node/start.sh
	source "$CLUSTER_HACK_DIR/node/start.sh"
else
	# shellcheck source=kwok/start.sh
	source "$CLUSTER_HACK_DIR/kwok/start.sh"
fi
sa_ready() { "${KUBECTL[@]}" -n default get serviceaccount default; }
wait_for "service accounts (kube-controller-manager)" kube-controller-manager sa_ready
[[ ${T9KJOBS_MULTIKUEUE:-0} == 1 ]] && T9KJOBS_KUEUE=1
if [[ ${T9KJOBS_KUEUE:-0} == 1 ]]; then
	# shellcheck source=kueue/start.sh
	source "$CLUSTER_HACK_DIR/kueue/start.sh"
fi

if [[ ${T9KJOBS_MULTIKUEUE:-0} == 1 ]]; then
	T9KJOBS_CLUSTER_DIR="$D" bash "$CLUSTER_HACK_DIR/multikueue/up.sh"
fi

ok=1
cluster_log "cluster is up: export KUBECONFIG=$D/kubeconfig; kubectl is $BIN/kubectl"
