#!/usr/bin/env bash
# `make test` on empty caches: build what the real-node tier needs in the background, at the
# lowest priority, while the earlier steps run, instead of after them.
#   hack/prebuild.sh start   fork the builds and return at once (a no-op when all are cached)
#   hack/prebuild.sh stop    end them if they still run (make test calls it when it ends)
#
# Why: from empty caches a run spent about 14 of its minutes building for the real node
# (images about 9, mostly downloads: apt, pip; the node's binaries 3.5; the NetworkPolicy
# engine 2), one after the other, after everything else. The images start at once: their
# downloads overlap the control plane's Go build. The node's binaries and the NetworkPolicy
# engine wait for Kueue's build (the first cluster of the test tiers needs it, so it must not
# share the CPU), then overlap the KWOK tiers. Each build is cached by content and takes its
# own lock, so a tier that needs one that is still building waits for it and builds nothing
# twice. `nice -n 19`: a test always comes first. A build that fails here is only logged; the
# tier that needs it builds it again and says why. Log: $T9KJOBS_CACHE/prebuild.log.
set -euo pipefail
HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
T9KJOBS_CACHE="${T9KJOBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/t9kjobs}"
PIDFILE="$T9KJOBS_CACHE/prebuild.pid"
LOG="$T9KJOBS_CACHE/prebuild.log"

cached() {
	bash "$HACK/cluster/node/kube-network-policies/build.sh" --check >/dev/null 2>&1 &&
		[[ -n "$(ls "$T9KJOBS_CACHE"/bin/node-* 2>/dev/null)" ]] &&
		[[ -n "$(ls "$T9KJOBS_CACHE"/images/trainer-*.oci.tar 2>/dev/null)" ]]
}

builds() {
	step() {
		local start=$SECONDS
		echo "[prebuild] $1 ..."
		if "${@:2}" >/dev/null; then
			echo "[prebuild] $1: done in $((SECONDS - start)) s"
		else
			echo "[prebuild] $1: failed after $((SECONDS - start)) s (the tier that needs it builds it)"
		fi
	}
	step "images (root filesystem, pause, trainer)" bash "$HACK/images/build.sh" &
	step "operator image" bash "$HACK/images/build.sh" operator &
	# After Kueue (built by the first test cluster): until then the CPU is the control plane's
	# and Kueue's.
	local waited=0
	until [[ -n "$(ls -d "$T9KJOBS_CACHE"/bin/kueue-*/ 2>/dev/null)" ]] || ((waited >= 1800)); do
		sleep 10
		waited=$((waited + 10))
	done
	step "node binaries" bash "$HACK/cluster/node/build.sh"
	step "NetworkPolicy engine" bash "$HACK/cluster/node/kube-network-policies/build.sh"
	wait
}

case "${1:-}" in
start)
	mkdir -p "$T9KJOBS_CACHE"
	if cached; then
		echo "[prebuild] the real node's builds are cached"
		exit 0
	fi
	# A process group of its own (setsid), so that `stop` ends every build in it.
	setsid nice -n 19 bash "$0" run >"$LOG" 2>&1 </dev/null &
	echo $! >"$PIDFILE"
	echo "[prebuild] building the real node's binaries and images in the background ($LOG)"
	;;
run)
	builds
	;;
stop)
	[[ -f "$PIDFILE" ]] || exit 0
	pid=$(cat "$PIDFILE")
	rm -f "$PIDFILE"
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM -- "-$pid" 2>/dev/null || true
		echo "[prebuild] stopped the background builds"
	fi
	[[ -f "$LOG" ]] && grep -h "^\[prebuild\]" "$LOG" || true
	;;
*)
	echo "usage: $0 start|stop" >&2
	exit 2
	;;
esac
