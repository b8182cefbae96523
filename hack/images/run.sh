#!/usr/bin/env bash
# Run a command inside an image built by hack/images/build.sh, with no container runtime:
#   hack/images/run.sh [--rootfs DIR] [--host-network] ARCHIVE [CMD [ARG...]]
# ARCHIVE is an OCI archive (`<name>-<hash>.oci.tar`); CMD defaults to the image's entrypoint
# and command. Its layers are unpacked (whiteouts applied) into a temporary directory, or into
# DIR with --rootfs (kept, and reused while it holds the same image), and CMD runs chrooted
# there with the image's env, working directory and user, in new mount, PID, network, UTS and
# IPC namespaces: its own /proc, /sys (read-only), /dev (a few devices), /dev/shm and /tmp,
# hostname "t9kjobs-run", and a network of its loopback alone (--host-network: the host's
# network and resolv.conf instead, e.g. to try apt-get in the image). When CMD ends, everything it
# started ends with the PID namespace and every mount with the mount namespace: nothing of it
# stays on the host. Stdin, stdout, stderr and the exit code are CMD's. Needs root.
# Used by hack/images/check.sh; handy to try an image by hand:
#   hack/images/run.sh ~/.cache/t9kjobs/images/trainer-*.oci.tar python3 -c 'import torch'
set -euo pipefail

die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

keep=""
net=(--net)
while [[ "${1:-}" == --* ]]; do
	case $1 in
	--rootfs)
		keep=${2:?--rootfs needs a directory}
		shift 2
		;;
	--host-network)
		net=()
		shift
		;;
	*) die "unknown option $1" ;;
	esac
done
archive=${1:?usage: hack/images/run.sh [--rootfs DIR] [--host-network] ARCHIVE [CMD [ARG...]]}
shift
[[ -s "$archive" ]] || die "no archive $archive"
[[ $(id -u) == 0 ]] || die "needs root (unshare, chroot)"

work=$(mktemp -d "${TMPDIR:-/tmp}/t9kjobs-run.XXXXXX")
# Runs after the namespaces are gone: nothing is mounted under $work any more.
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xf "$archive" index.json
manifest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["manifests"][0]["digest"])' "$work/index.json")
blob() { printf 'blobs/%s' "${1/://}"; }
tar -C "$work" -xf "$archive" "$(blob "$manifest")"
# One line per layer digest, then the config's digest.
mapfile -t digests < <(python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
for layer in m["layers"]:
    assert layer["mediaType"].endswith(("tar", "tar+gzip")), layer["mediaType"]
    print(layer["digest"])
print(m["config"]["digest"])' "$work/$(blob "$manifest")")
config=${digests[-1]}
unset 'digests[-1]'

root=${keep:-$work/rootfs}
if [[ -n "$keep" && -f "$keep/.t9kjobs-manifest" && $(cat "$keep/.t9kjobs-manifest") == "$manifest" ]]; then
	: # unpacked before
else
	[[ -z "$keep" ]] || rm -rf "$keep"
	mkdir -p "$root"
	for digest in "${digests[@]}"; do
		tar -C "$work" -xf "$archive" "$(blob "$digest")"
		layer="$work/$(blob "$digest")"
		# OCI whiteouts: `.wh.NAME` deletes NAME of the layers below, `.wh..wh..opq` empties its
		# folder of them; so apply them before this layer's own files land.
		while IFS= read -r path; do
			dir=$(dirname "$path") base=$(basename "$path")
			if [[ $base == .wh..wh..opq ]]; then
				[[ ! -d "$root/$dir" ]] || find "$root/$dir" -mindepth 1 -delete
			else
				rm -rf "${root:?}/$dir/${base#.wh.}"
			fi
		done < <(tar -tf "$layer" | grep -E '(^|/)\.wh\.[^/]*$' || true)
		tar -C "$root" -xf "$layer" --numeric-owner --same-owner -p --exclude='.wh.*'
		rm -f "$layer"
	done
	[[ -z "$keep" ]] || echo "$manifest" >"$keep/.t9kjobs-manifest"
fi

# The image's config: env, working directory, user, entrypoint + command (NUL-separated).
tar -C "$work" -xf "$archive" "$(blob "$config")"
python3 - "$work/$(blob "$config")" "$work" <<'EOF'
import json, sys
cfg = json.load(open(sys.argv[1])).get("config", {})
out = sys.argv[2]
def write(name, items):
    with open(f"{out}/{name}", "wb") as f:
        f.write(b"".join(s.encode() + b"\0" for s in items))
write("env", cfg.get("Env") or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"])
write("argv", (cfg.get("Entrypoint") or []) + (cfg.get("Cmd") or []))
user = cfg.get("User") or "0:0"
uid, _, gid = user.partition(":")
assert uid.isdigit() and (gid or uid).isdigit(), f"numeric user only: {user}"
write("user", [uid, gid or uid])
write("wd", [cfg.get("WorkingDir") or "/"])
EOF
mapfile -d '' -t envs <"$work/env"
mapfile -d '' -t user <"$work/user"
mapfile -d '' -t wd <"$work/wd"
if (($# == 0)); then
	mapfile -d '' -t argv <"$work/argv"
	((${#argv[@]} > 0)) || die "the image has no entrypoint or command: give one"
	set -- "${argv[@]}"
fi

# What a runtime would provide (files of this copy only; the archive is never changed).
if [[ -d "$root/etc" ]]; then
	printf '127.0.0.1\tlocalhost t9kjobs-run\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$root/etc/hosts"
	echo t9kjobs-run >"$root/etc/hostname"
	if ((${#net[@]} == 0)); then cp /etc/resolv.conf "$root/etc/resolv.conf"; else : >"$root/etc/resolv.conf"; fi
fi

set +e
# shellcheck disable=SC2016 # the script expands its own arguments
env -i "${envs[@]}" unshare --mount --propagation private --pid --fork "${net[@]}" --uts --ipc -- \
	bash -euo pipefail -c '
		root=$1 uid=$2 gid=$3 wd=$4 net=$5
		shift 5
		[[ -z "$net" ]] || ip link set lo up
		hostname t9kjobs-run
		mkdir -p "$root/proc" "$root/sys" "$root/dev" "$root/tmp"
		mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
		mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
		mount -t tmpfs -o nosuid,mode=755,size=64k tmpfs "$root/dev"
		for d in null zero full random urandom tty; do
			touch "$root/dev/$d"
			mount --bind "/dev/$d" "$root/dev/$d"
		done
		mkdir "$root/dev/shm" "$root/dev/pts"
		mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
		mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts "$root/dev/pts"
		ln -s pts/ptmx "$root/dev/ptmx"
		ln -s /proc/self/fd "$root/dev/fd"
		ln -s /proc/self/fd/0 "$root/dev/stdin"
		ln -s /proc/self/fd/1 "$root/dev/stdout"
		ln -s /proc/self/fd/2 "$root/dev/stderr"
		mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/tmp"
		exec unshare --root="$root" --wd="$wd" --setgid "$gid" --setuid "$uid" -- "$@"
	' run "$root" "${user[0]}" "${user[1]}" "${wd[0]}" "${net[*]}" "$@"
rc=$?
set -e
exit "$rc"
