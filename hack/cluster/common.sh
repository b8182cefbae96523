# Shared settings for hack/cluster/*.sh. Source it; do not run it.
# shellcheck shell=bash

CLUSTER_HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# The Go module of the control plane ships in the wheel too: `t9kjobs-kit-binaries` builds the
# conformance kit's etcd and kube-apiserver from it (t9kjobs.testing.harness.binaries).
CLUSTER_GOMOD_DIR="${CLUSTER_GOMOD_DIR:-$(cd "$CLUSTER_HACK_DIR/../.." && pwd)/core/testing/harness/gomod}"

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
# One directory per combination of versions and of the build script (its flags); a version
# bump or a changed build builds into a new one.
CLUSTER_BUILD_HASH="$(cat "$CLUSTER_GOMOD_DIR/go.sum" "$CLUSTER_HACK_DIR/build.sh" | sha256sum | cut -c1-8)"
CLUSTER_BIN_VERSION="k8s-${K8S_VERSION}_kwok-${KWOK_VERSION}_etcd-${ETCD_VERSION}-${CLUSTER_BUILD_HASH}"
CLUSTER_BIN_DIR="${T9KJOBS_BIN_DIR:-$T9KJOBS_CACHE/bin/$CLUSTER_BIN_VERSION}"
CLUSTER_BINARIES=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok)

cluster_log() { printf '[cluster] %s\n' "$*" >&2; }
cluster_die() { printf '[cluster] ERROR: %s\n' "$*" >&2; exit 1; }

# cluster_step WHAT CMD...: run CMD as one step of a long first build, saying so on stderr: a
# line when it starts, one every $T9KJOBS_PROGRESS_EVERY seconds (default 30) while it runs with
# the time so far, and one when it ends, so that a first build is never minutes of silence.
# CMD's stdout is left alone (build.sh prints its directory there).
cluster_step() {
	local what=$1
	shift
	local t0 every=${T9KJOBS_PROGRESS_EVERY:-30} rc=0 ticker
	t0=$EPOCHREALTIME
	cluster_log "$what ..."
	(
		exec >/dev/null # not the caller's $(...): only stderr
		trap 'kill "$nap" 2>/dev/null; exit 0' TERM
		while :; do
			sleep "$every" &
			nap=$!
			wait "$nap"
			cluster_log "$what: $(cluster_seconds_since "$t0") s so far"
		done
	) &
	ticker=$!
	"$@" || rc=$?
	kill "$ticker" 2>/dev/null || true
	wait "$ticker" 2>/dev/null || true
	if ((rc == 0)); then
		cluster_log "$what: done in $(cluster_seconds_since "$t0") s"
	else
		cluster_log "$what: failed (exit $rc) after $(cluster_seconds_since "$t0") s"
	fi
	return "$rc"
}

# cluster_seconds_since T0: whole seconds from $EPOCHREALTIME T0 to now, rounded (two whole-second
# clock readings are up to a second off: a tick 1.0 s after a start at x.99 said "2 s").
cluster_seconds_since() {
	local now=$EPOCHREALTIME
	local ms=$(((${now//[.,]/} - ${1//[.,]/}) / 1000)) # microseconds either side; a locale's comma
	echo $(((ms + 500) / 1000))
}

cluster_bins_present() {
	local b
	[[ -f "$CLUSTER_BIN_DIR/BUILD_INFO" ]] || return 1
	for b in "${CLUSTER_BINARIES[@]}"; do
		[[ -x "$CLUSTER_BIN_DIR/$b" ]] || return 1
	done
}

# ---------------------------------------------------------------- the real node (node/)
# The real node's address, its bridge's (node/start.sh). The API server's certificate names it
# in both modes: pods reach the API server there, through node/start.sh's apiserver-proxy.
NODE_IP=10.244.0.1
NODE_APISERVER_PORT=6443
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
	# Its pid, once the new shell wrote it: on a loaded machine that takes seconds, and a check
	# made before it (cluster_pid) would take a daemon still starting for one that exited.
	for i in $(seq 600); do [[ -s "$d/pids/$name.pid" ]] && break; sleep 0.1; done
	[[ -s "$d/pids/$name.pid" ]] || cluster_die "$name did not start within 60 s (see $d/logs/$name.log)"
	cluster_log "started $name (pid $(cat "$d/pids/$name.pid"))"
}

# cluster_exited NAME [WHEN]: die saying that NAME exited (WHEN: "on restart", ...), with the end
# of its log (a daemon that dies at start says why where its caller reads).
cluster_exited() {
	local log="$T9KJOBS_CLUSTER_DIR/logs/$1.log"
	printf '[cluster] the last lines of %s:\n' "$log" >&2
	tail -n 40 "$log" >&2 2>/dev/null || printf '[cluster] (no log)\n' >&2
	cluster_die "$1 exited${2:+ $2} (see $log)"
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
