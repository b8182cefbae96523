#!/usr/bin/env bash
# Build Kueue's manager from its Go module (default GOPROXY, no prebuilt download), pinned in
# go.mod here, into ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/kueue-<version>-<hash>/, the hash
# covering this folder's go.mod, go.sum and this script. Beside the binary: the module's CRDs
# (config/crd/) and webhook manifests (config/webhook.yaml), which kueue/start.sh installs. Built
# apart from the control plane: only clusters started with T9KJOBS_KUEUE=1 need it. Reuses the
# directory when it is complete. Prints it on stdout.
#   --force   rebuild even when the binary is present
#   --check   print the directory when the binary is present, else exit 1 (never builds)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../common.sh
source "$here/../common.sh"

version=$(awk '$1 == "sigs.k8s.io/kueue" && $2 ~ /^v/ { print $2; exit }' "$here/go.mod")
[[ -n "$version" ]] || cluster_die "no sigs.k8s.io/kueue version in $here/go.mod"
hash=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-12)
dir="${T9KJOBS_KUEUE_BIN_DIR:-$T9KJOBS_CACHE/bin/kueue-$version-$hash}"

present() { [[ -f "$dir/BUILD_INFO" && -x "$dir/kueue" && -d "$dir/config/crd" ]]; }
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
exec 9>"$(dirname "$dir")/.build-kueue.lock"
flock 9
if [[ "${1:-}" != "--force" ]] && present; then
	echo "$dir"
	exit 0
fi
tmp="$(mktemp -d "$(dirname "$dir")/.build-kueue.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

cluster_log "building Kueue $version into $dir (first time: about 10 min on 2 cores; docs/cluster.md)"
start=$(date +%s)
# CGO off: a static binary, as upstream's image.
build() {
	cd "$here" && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly \
		go build -trimpath -ldflags="-s -w" -o "$tmp/kueue" sigs.k8s.io/kueue/cmd/kueue
}
cluster_step "go build sigs.k8s.io/kueue/cmd/kueue@$version" build
end=$(date +%s)
src=$(cd "$here" && GOTOOLCHAIN=local GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
mkdir -p "$tmp/config/crd"
cp "$src"/config/components/crd/bases/*.yaml "$tmp/config/crd/"
cp "$src/config/components/webhook/manifests.yaml" "$tmp/config/webhook.yaml"
chmod -R u+w "$tmp/config"
{
	echo "versions: kueue-$version"
	echo "go: $(go version)"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds: $((end - start))"
	echo "binaries_bytes: $(du -sb "$tmp/kueue" | cut -f1)"
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
