#!/usr/bin/env bash
# Build the real node's binaries from their Go modules (default GOPROXY, no prebuilt downloads):
#   kubelet                              k8s.io/kubernetes/cmd/kubelet (../gomod, the control plane's version)
#   containerd, containerd-shim-runc-v2, ctr   github.com/containerd/containerd/v2 (gomod-containerd)
#   coredns                              our main.go over github.com/coredns/coredns (gomod-coredns)
# into ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/node-<versions>-<hash of the wrapper modules>/.
# Reuses that directory when it is complete. Prints the directory on stdout.
#   --force   rebuild even when the binaries are present
set -euo pipefail
# shellcheck source=../common.sh
source "$(dirname "${BASH_SOURCE[0]}")/../common.sh"

force=0
[[ "${1:-}" == "--force" ]] && force=1

if [[ $force == 0 ]] && node_bins_present; then
	echo "$NODE_BIN_DIR"
	exit 0
fi

command -v go >/dev/null || cluster_die "go is not installed (need Go >= 1.26)"
mkdir -p "$(dirname "$NODE_BIN_DIR")"
exec 9>"$(dirname "$NODE_BIN_DIR")/.build-node.lock"
flock 9
if [[ $force == 0 ]] && node_bins_present; then
	echo "$NODE_BIN_DIR"
	exit 0
fi

tmp="$(mktemp -d "$(dirname "$NODE_BIN_DIR")/.build-node.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

cluster_log "building $NODE_BIN_VERSION into $NODE_BIN_DIR (first time: about 5 min on 2 cores)"
start=$(date +%s)
# CGO off: static binaries, as upstream release builds. Each wrapper module is its own module
# graph (containerd and CoreDNS pin other versions of shared libraries than Kubernetes does).
# The -X flags give the binaries the versions they report (the node's kubeletVersion and
# containerRuntimeVersion), as upstream release builds do.
gobuild() {
	local dir=$1 ldflags=$2
	shift 2
	(cd "$dir" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
		go build -trimpath -ldflags="-s -w $ldflags" -o "$tmp/" "$@")
}
k8s_minor=${K8S_VERSION#v1.}
k8s_minor=${k8s_minor%%.*}
gobuild "$CLUSTER_GOMOD_DIR" "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION
	-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor
	-X k8s.io/component-base/version.gitTreeState=clean" k8s.io/kubernetes/cmd/kubelet
# no_btrfs: the btrfs snapshotter needs cgo; the node uses overlayfs.
gobuild "$NODE_GOMOD_DIR/gomod-containerd" \
	"-X github.com/containerd/containerd/v2/version.Version=${CONTAINERD_VERSION#v}" -tags no_btrfs \
	github.com/containerd/containerd/v2/cmd/containerd \
	github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
	github.com/containerd/containerd/v2/cmd/ctr
# The binary is named after the module path's last element: coredns.
gobuild "$NODE_GOMOD_DIR/gomod-coredns" "" .
end=$(date +%s)
{
	echo "versions: $NODE_BIN_VERSION"
	echo "go: $(go version)"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds: $((end - start))"
	echo "binaries_bytes: $(du -sb "$tmp" | cut -f1)"
} >"$tmp/BUILD_INFO"

chmod 755 "$tmp"
if [[ -e "$NODE_BIN_DIR" ]]; then
	mv "$NODE_BIN_DIR" "$tmp.old"
fi
mv "$tmp" "$NODE_BIN_DIR"
rm -rf "$tmp.old"
trap - EXIT
cluster_log "built in $((end - start))s: $(du -sh "$NODE_BIN_DIR" | cut -f1) of binaries"
echo "$NODE_BIN_DIR"
