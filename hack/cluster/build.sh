#!/usr/bin/env bash
# Build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from
# their Go modules (default GOPROXY, no prebuilt downloads) into
#   ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/<versions>/
# Reuses that directory when it is complete. Prints the directory on stdout.
#   --force   rebuild even when the binaries are present
set -euo pipefail
# shellcheck source=common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

force=0
[[ "${1:-}" == "--force" ]] && force=1

if [[ $force == 0 ]] && cluster_bins_present; then
	echo "$CLUSTER_BIN_DIR"
	exit 0
fi

command -v go >/dev/null || cluster_die "go is not installed (need Go >= 1.26)"
mkdir -p "$(dirname "$CLUSTER_BIN_DIR")"

# One build at a time (parallel test runs on a fresh machine would otherwise both build).
exec 9>"$(dirname "$CLUSTER_BIN_DIR")/.build.lock"
flock 9
if [[ $force == 0 ]] && cluster_bins_present; then
	echo "$CLUSTER_BIN_DIR"
	exit 0
fi

tmp="$(mktemp -d "$(dirname "$CLUSTER_BIN_DIR")/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

cluster_log "building $CLUSTER_BIN_VERSION into $CLUSTER_BIN_DIR (first time: about 8 min on 2 cores, more on a slow network)"
start=$(date +%s)
(
	cd "$CLUSTER_GOMOD_DIR"
	# One `go build` for all binaries: one module graph, one shared compile of the common packages.
	# CGO off: static binaries, no C toolchain needed (as upstream release builds).
	# The -X flags give the Kubernetes binaries the version they report (`kubectl version`,
	# /version): unstamped they say v0.0.0-master, and clients that check the server's version
	# refuse it (helm: "chart requires kubeVersion: >=1.29.0-0").
	k8s_minor=${K8S_VERSION#v1.}
	k8s_minor=${k8s_minor%%.*}
	GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
		go build -trimpath -o "$tmp/" -ldflags="-s -w
		-X k8s.io/component-base/version.gitVersion=$K8S_VERSION
		-X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$k8s_minor
		-X k8s.io/component-base/version.gitTreeState=clean" \
		go.etcd.io/etcd/server/v3 \
		k8s.io/kubernetes/cmd/kube-apiserver \
		k8s.io/kubernetes/cmd/kube-controller-manager \
		k8s.io/kubernetes/cmd/kube-scheduler \
		k8s.io/kubernetes/cmd/kubectl \
		sigs.k8s.io/kwok/cmd/kwok
)
end=$(date +%s)
# go names the binary of go.etcd.io/etcd/server/v3 "server".
mv "$tmp/server" "$tmp/etcd"
{
	echo "versions: $CLUSTER_BIN_VERSION"
	echo "go: $(go version)"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds: $((end - start))"
	echo "binaries_bytes: $(du -sb "$tmp" | cut -f1)"
} >"$tmp/BUILD_INFO"

chmod 755 "$tmp"
# Swap in the new directory (a cluster running from the old binaries keeps running).
if [[ -e "$CLUSTER_BIN_DIR" ]]; then
	mv "$CLUSTER_BIN_DIR" "$tmp.old"
fi
mv "$tmp" "$CLUSTER_BIN_DIR"
rm -rf "$tmp.old"
trap - EXIT
cluster_log "built in $((end - start))s: $(du -sh "$CLUSTER_BIN_DIR" | cut -f1) of binaries"
echo "$CLUSTER_BIN_DIR"
