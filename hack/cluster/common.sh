# Shared settings for hack/cluster/*.sh. Source it; do not run it.
# shellcheck shell=bash

CLUSTER_HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
CLUSTER_GOMOD_DIR="$CLUSTER_HACK_DIR/gomod"

# Cache root for the built binaries (outside the repo). T9KJOBS_CACHE overrides it.
T9KJOBS_CACHE="${T9KJOBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/t9kjobs}"
# Runtime dir of the cluster (certs, kubeconfigs, pids, logs, etcd data).
T9KJOBS_CLUSTER_DIR="${T9KJOBS_CLUSTER_DIR:-$T9KJOBS_CACHE/cluster}"

# Version of one module required by the wrapper go.mod (e.g. k8s.io/kubernetes -> v1.36.3).
cluster_mod_version() {
	awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$CLUSTER_GOMOD_DIR/go.mod"
}

K8S_VERSION="$(cluster_mod_version k8s.io/kubernetes)"
KWOK_VERSION="$(cluster_mod_version sigs.k8s.io/kwok)"
ETCD_VERSION="$(cluster_mod_version go.etcd.io/etcd/server/v3)"
# One directory per combination of versions; a version bump builds into a new one.
CLUSTER_BIN_VERSION="k8s-${K8S_VERSION}_kwok-${KWOK_VERSION}_etcd-${ETCD_VERSION}"
CLUSTER_BIN_DIR="${T9KJOBS_BIN_DIR:-$T9KJOBS_CACHE/bin/$CLUSTER_BIN_VERSION}"
CLUSTER_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

cluster_log() { printf '[cluster] %s\n' "$*" >&2; }
cluster_die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

cluster_bins_present() {
	local b
	[[ -f "$CLUSTER_BIN_DIR/BUILD_INFO" ]] || return 1
	for b in "${CLUSTER_BINARIES[@]}"; do
		[[ -x "$CLUSTER_BIN_DIR/$b" ]] || return 1
	done
}

# ---------------------------------------------------------------- the real node (node/)
NODE_GOMOD_DIR="$CLUSTER_HACK_DIR/node"
node_mod_version() {
	awk -v m="$2" '$1 == m && $2 ~ /^v/ { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' \
		"$NODE_GOMOD_DIR/$1/go.mod"
}
CONTAINERD_VERSION="$(node_mod_version gomod-containerd github.com/containerd/containerd/v2)"
COREDNS_VERSION="$(node_mod_version gomod-coredns github.com/coredns/coredns)"
# Keyed by the versions and by the content of the wrapper modules (CoreDNS's plugin list is code)
# and of the build script (its flags).
NODE_BIN_HASH="$(cat "$CLUSTER_GOMOD_DIR/go.sum" "$NODE_GOMOD_DIR"/gomod-*/go.* "$NODE_GOMOD_DIR"/gomod-*/*.go \
	"$NODE_GOMOD_DIR/build.sh" |
	sha256sum | cut -c1-12)"
NODE_BIN_VERSION="node-k8s-${K8S_VERSION}_containerd-${CONTAINERD_VERSION}_coredns-${COREDNS_VERSION}-${NODE_BIN_HASH}"
NODE_BIN_DIR="${T9KJOBS_NODE_BIN_DIR:-$T9KJOBS_CACHE/bin/$NODE_BIN_VERSION}"
NODE_BINARIES=(kubelet containerd containerd-shim-runc-v2 ctr coredns)

node_bins_present() {
	local b
	[[ -f "$NODE_BIN_DIR/BUILD_INFO" ]] || return 1
	for b in "${NODE_BINARIES[@]}"; do
		[[ -x "$NODE_BIN_DIR/$b" ]] || return 1
	done
}

# cluster_start NAME COMMAND...: run COMMAND in its own session (a Ctrl-C of the caller does not
# reach it), output appended to logs/NAME.log, pid in pids/NAME.pid (written by the process
# itself before it execs the binary), command line in pids/NAME.cmd (for restart.sh).
cluster_start() {
	local name=$1 d="$T9KJOBS_CLUSTER_DIR" i
	shift
	rm -f "$d/pids/$name.pid"
	printf '%s\0' "$@" >"$d/pids/$name.cmd"
	setsid bash -c 'echo $$ >"$0"; exec "$@"' "$d/pids/$name.pid" "$@" \
		</dev/null >>"$d/logs/$name.log" 2>&1 8>&- &
	for i in $(seq 50); do [[ -s "$d/pids/$name.pid" ]] && break; sleep 0.1; done
	cluster_log "started $name (pid $(cat "$d/pids/$name.pid"))"
}

# cluster_pid NAME: the pid of NAME when it is alive and is ours (its command line names the
# cluster dir: every component gets a path in it as an argument), so that a recycled pid is
# never signalled.
cluster_pid() {
	local d="$T9KJOBS_CLUSTER_DIR" pid
	pid=$(cat "$d/pids/$1.pid" 2>/dev/null) || return 1
	[[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null &&
		tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$d" && echo "$pid"
}
