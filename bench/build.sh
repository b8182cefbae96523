#!/usr/bin/env bash
# Build the benchmark's Go programs from bench/gomod through the Go module proxy (default
# GOPROXY, no prebuilt downloads) into
#   ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/training-operator-<version>/
#     training-operator   Kubeflow's training operator v1 (cmd/training-operator.v1)
#     bench-create        the plain parallel client of bench/gomod/cmd/bench-create
#     crds/               the operator's CRDs, from its module's manifests/base/crds
#     BUILD_INFO
# Reuses that directory when it is complete. Prints the directory on stdout.
#   --force   rebuild even when the binaries are present
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GOMOD="$HERE/gomod"
MODULE=github.com/kubeflow/training-operator
T9KJOBS_CACHE="${T9KJOBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/t9kjobs}"
VERSION="$(awk -v m="$MODULE" '$1 == m && $2 ~ /^v/ { print $2; exit }' "$GOMOD/go.mod")"
[[ -n "$VERSION" ]] || { echo "[bench] ERROR: no $MODULE in $GOMOD/go.mod" >&2; exit 1; }
OUT="$T9KJOBS_CACHE/bin/training-operator-$VERSION"

log() { printf '[bench] %s\n' "$*" >&2; }
present() { [[ -f "$OUT/BUILD_INFO" && -x "$OUT/training-operator" && -x "$OUT/bench-create" ]] && compgen -G "$OUT/crds/*.yaml" >/dev/null; }

force=0
[[ "${1:-}" == "--force" ]] && force=1
if [[ $force == 0 ]] && present; then
	echo "$OUT"
	exit 0
fi

command -v go >/dev/null || { log "ERROR: go is not installed (need Go >= 1.26)"; exit 1; }
mkdir -p "$(dirname "$OUT")"
exec 9>"$(dirname "$OUT")/.bench-build.lock"
flock 9
if [[ $force == 0 ]] && present; then
	echo "$OUT"
	exit 0
fi

tmp="$(mktemp -d "$(dirname "$OUT")/.bench-build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
log "building $MODULE $VERSION and bench-create into $OUT (about 4 min on 2 cores)"
start=$(date +%s)
(
	cd "$GOMOD"
	export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=readonly
	go build -trimpath -ldflags='-s -w' -o "$tmp/" "$MODULE/cmd/training-operator.v1" ./cmd/bench-create
	# The CRDs ship in the module zip that the build just fetched into the module cache.
	moddir="$(go list -m -f '{{.Dir}}' "$MODULE")"
	mkdir "$tmp/crds"
	cp "$moddir"/manifests/base/crds/kubeflow.org_*.yaml "$tmp/crds/"
)
end=$(date +%s)
mv "$tmp/training-operator.v1" "$tmp/training-operator"
chmod -R u+w "$tmp/crds"
{
	echo "module: $MODULE $VERSION"
	echo "go: $(go version)"
	echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "build_seconds: $((end - start))"
} >"$tmp/BUILD_INFO"
chmod 755 "$tmp"
if [[ -e "$OUT" ]]; then
	mv "$OUT" "$tmp.old"
fi
mv "$tmp" "$OUT"
rm -rf "$tmp.old"
trap - EXIT
log "built in $((end - start))s"
echo "$OUT"
