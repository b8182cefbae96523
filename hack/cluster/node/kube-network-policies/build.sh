#!/usr/bin/env bash
# Build the real node's NetworkPolicy engine from its Go module (default GOPROXY, no prebuilt
# download): our main.go (this folder) over sigs.k8s.io/kube-network-policies, pinned in go.mod,
# into ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/kube-network-policies-<version>-<hash>/, the hash
# covering this folder (go.mod, go.sum, main.go, this script). Built apart from node/build.sh:
# only clusters that enforce NetworkPolicies need it (node/network-policies.sh), and a change
# here rebuilds it alone. Reuses that directory when it is complete. Prints it on stdout.
#   --force   rebuild even when the binary is present
#   --check   print the directory when the binary is present, else exit 1 (never builds)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../common.sh
source "$here/../../common.sh"

version=$(awk '$1 == "sigs.k8s.io/kube-network-policies" && $2 ~ /^v/ { print $2; exit }
	$1 == "require" && $2 == "sigs.k8s.io/kube-network-policies" { print $3; exit }' "$here/go.mod")
[[ -n "$version" ]] || cluster_die "no sigs.k8s.io/kube-network-policies version in $here/go.mod"
hash=$(cat "$here/go.mod" "$here/go.sum" "$here/main.go" "$here/build.sh" | sha256sum | cut -c1-12)
dir="${T9KJOBS_NETPOL_BIN_DIR:-$T9KJOBS_CACHE/bin/kube-network-policies-$version-$hash}"

present() { [[ -f "$dir/BUILD_INFO" && -x "$dir/kube-network-policies" ]]; }
if [[ "${1:-}" == "--check" ]]; then
	present && echo "$dir"
	exit
fi
if [[ "${1:-}" != "--force" ]] && present; then
	echo "$dir"
	exit 0
fi

command -v go >/dev/null || cluster_die "go is not installed (need Go >= 1.26)"
mkdir -p "$(dirname "$dir")"
exec 9>"$(dirname "$dir")/.build-netpol.lock"
flock 9
if [[ "${1:-}" != "--force" ]] && present; then
	echo "$dir"
	exit 0
fi
tmp="$(mktemp -d "$(dirname "$dir")/.build-netpol.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

cluster_log "building kube-network-policies $version into $dir (first time: minutes, 6 min 44 s measured on 2 cores; docs/cluster.md)"
start=$(date +%s)
# CGO off: a static binary, as the other node binaries (it speaks netlink itself, no libnftnl).
(cd "$here" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
	go build -trimpath -ldflags="-s -w" -o "$tmp/kube-network-policies" .)
end=$(date +%s)
{
	echo "versions: kube-network-policies-$version"
	echo "go: $(go version)"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds: $((end - start))"
	echo "binaries_bytes: $(du -sb "$tmp" | cut -f1)"
} >"$tmp/BUILD_INFO"
chmod 755 "$tmp"
if [[ -e "$dir" ]]; then
	mv "$dir" "$tmp.old"
fi
mv "$tmp" "$dir"
rm -rf "$tmp.old"
trap - EXIT
cluster_log "built in $((end - start))s: $(du -sh "$dir" | cut -f1)"
echo "$dir"
