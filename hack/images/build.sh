#!/usr/bin/env bash
# Build the real node's images with no registry, each once per content of its recipe:
#   hack/images/build.sh [NAME...]     (default: every folder here with a Containerfile)
#   hack/images/build.sh operator      the operator image from the repository's Dockerfile
# For each image prints "<reference> <OCI archive>" on stdout; the archive is what
# `ctr -n k8s.io images import` takes (hack/cluster/node/start.sh does that).
#
# How (docs/images.md):
#   1. a Debian bookworm minbase root filesystem from debootstrap, as a tarball, once per
#      inputs (suite, variant, mirror, this script's ROOTFS_RECIPE), its Release file checked
#      against Debian's archive keyring; slim as Debian's own bookworm-slim (no docs, manual
#      pages or translations; apt deletes downloaded .debs);
#   2. imported into buildah's storage as the base image localhost/t9kjobs-base:<hash>;
#   3. `buildah bud` of hack/images/<name>/Containerfile (or, for a folder with a `context`
#      file, the Dockerfile of the build context it names) with BASE=<that image>, chroot
#      isolation and the vfs storage driver, inside a private mount namespace (whatever buildah
#      mounts dies with it: the host's mount table never changes);
#   4. `buildah push` to ${T9KJOBS_CACHE:-~/.cache/t9kjobs}/images/<name>-<hash>.oci.tar, where
#      <hash> covers the image's folder (or the files its context's .dockerignore allows), the
#      base and this script's IMAGE_RECIPE. A later call with the same inputs finds the archive
#      and builds nothing. The build's output is kept beside it, <name>-<hash>.build.log.
# What is pinned and what is not (the Debian packages: the mirror's current bookworm, unless
# T9KJOBS_DEBIAN_MIRROR names a snapshot): docs/images.md, "What is pinned".
# Needs root (debootstrap, chroot); installs buildah, debootstrap, the keyring and gcc when missing.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
T9KJOBS_CACHE="${T9KJOBS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/t9kjobs}"
OUT="$T9KJOBS_CACHE/images"
STORE="$OUT/buildah" # buildah's storage: the base image (built images are removed after push)

SUITE=bookworm
VARIANT=minbase
# A snapshot pins every Debian package of every image to one moment of the archive:
#   T9KJOBS_DEBIAN_MIRROR=http://snapshot.debian.org/archive/debian/20260711T000000Z
MIRROR="${T9KJOBS_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
# debootstrap checks the suite's Release file against it (and the packages against that file),
# and fails rather than skip the check.
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# Versions of the recipes in this script, part of the cache keys: bump ROOTFS_RECIPE when the
# root filesystem's making below changes, IMAGE_RECIPE when the way an image is built does
# (editing this script otherwise rebuilds nothing).
ROOTFS_RECIPE=2
IMAGE_RECIPE=2

log() { printf '[images] %s\n' "$*" >&2; }
die() { printf '[images] ERROR: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) == 0 ]] || die "building images needs root (debootstrap, buildah's chroot isolation)"
"$HERE/../debian-packages.sh" buildah debootstrap debian-archive-keyring gpgv gcc libc6-dev ||
	die "could not install buildah, debootstrap, Debian's archive keyring and gcc"

names=("$@")
if ((${#names[@]} == 0)); then
	for f in "$HERE"/*/Containerfile; do names+=("$(basename "$(dirname "$f")")"); done
fi
for name in "${names[@]}"; do
	[[ -f "$HERE/$name/Containerfile" || -f "$HERE/$name/context" ]] ||
		die "no image $name (no $HERE/$name/Containerfile nor context)"
done

mkdir -p "$OUT"
exec 9>"$OUT/.lock"
flock 9

# The build context an image folder names in its `context` file (the one line that is not a
# comment, relative to the folder), or "" for a folder that is its own context.
context_of() {
	[[ -f "$HERE/$1/context" ]] || return 0
	(cd "$HERE/$1" && cd "$(grep -v '^#' context | head -n 1)" && pwd)
}
# The reference an image is tagged with: the `# image: REF` line of its Containerfile; the
# operator image is localhost/t9k-jobs:<its pyproject.toml version>, as docs/install.md tags it.
image_ref() {
	local ctx
	ctx=$(context_of "$1")
	if [[ -n "$ctx" ]]; then
		echo "localhost/t9k-jobs:$(sed -n 's/^version = "\(.*\)"$/\1/p' "$ctx/pyproject.toml")"
	else
		sed -n 's/^# image: *//p' "$HERE/$1/Containerfile" | head -n 1
	fi
}
# A short hash of files' paths and contents.
hash_of() { (cd "$1" && find . -type f -print0 | sort -z | xargs -0 sha256sum) | sha256sum | cut -c1-16; }
# ... of what a context sends to the build: its Dockerfile, its .dockerignore, and the paths
# that .dockerignore (an allow-list: `*`, then `!PATH` lines) lets in, less bytecode.
context_hash() {
	(
		cd "$1"
		sha256sum Dockerfile .dockerignore
		sed -n 's|^!\(.*[^/]\)/*$|\1|p' .dockerignore | while read -r path; do
			find "$path" -type f ! -name '*.pyc' ! -path '*/__pycache__/*' -print0 | sort -z | xargs -0 sha256sum
		done
	) | sha256sum | cut -c1-16
}

rootfs_hash=$(printf '%s\n' "$SUITE" "$VARIANT" "$MIRROR" "$ROOTFS_RECIPE" | sha256sum | cut -c1-16)
ROOTFS="$OUT/rootfs-$SUITE-$VARIANT-$rootfs_hash.tar"
BASE_REF="localhost/t9kjobs-base:$SUITE-$rootfs_hash"

buildah_() {
	buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"
}

# ---------------------------------------------------------------- which images are missing
todo=()
results=()
for name in "${names[@]}"; do
	ref=$(image_ref "$name")
	[[ -n "$ref" ]] || die "$HERE/$name/Containerfile has no '# image: REF' line"
	ctx=$(context_of "$name")
	inputs=$(if [[ -n "$ctx" ]]; then context_hash "$ctx"; else hash_of "$HERE/$name"; fi)
	hash=$(echo "$inputs $rootfs_hash $IMAGE_RECIPE" | sha256sum | cut -c1-16)
	archive="$OUT/$name-$hash.oci.tar"
	if [[ ! -s "$archive" ]]; then
		todo+=("$name $ref $archive")
	fi
	results+=("$ref $archive")
done

if ((${#todo[@]} > 0)); then
	# ------------------------------------------------------------ the root filesystem
	if [[ ! -s "$ROOTFS" ]]; then
		log "debootstrap --variant=$VARIANT $SUITE from $MIRROR (first time: about 30 s)"
		t0=$SECONDS
		dir=$(mktemp -d "$OUT/.rootfs.XXXXXX")
		trap 'rm -rf "$dir"' EXIT
		debootstrap --keyring="$KEYRING" --variant="$VARIANT" "$SUITE" "$dir/fs" "$MIRROR" \
			>"$dir/debootstrap.log" 2>&1 ||
			{ tail -n 20 "$dir/debootstrap.log" >&2; die "debootstrap failed"; }
		grep -q "^I: Valid Release signature" "$dir/debootstrap.log" ||
			{ tail -n 20 "$dir/debootstrap.log" >&2; die "debootstrap did not check the Release signature"; }
		log "$(grep -h '^Version:\|^Date:' "$dir"/fs/var/lib/apt/lists/*_Release | tr '\n' ' ')"
		# What a container runtime provides at run time, and what no image should carry.
		rm -rf "$dir"/fs/var/cache/apt/archives/*.deb "$dir"/fs/var/lib/apt/lists/* \
			"$dir/fs/etc/resolv.conf" "$dir/fs/etc/hostname"
		echo "deb $MIRROR $SUITE main" >"$dir/fs/etc/apt/sources.list"
		# Slim as Debian's bookworm-slim images, for this root filesystem and every package an
		# image installs later: no documentation but copyright files, no manual pages, no
		# translations (about 120 MB of the trainer image); apt deletes the .debs it downloaded.
		cat >"$dir/fs/etc/dpkg/dpkg.cfg.d/t9kjobs-slim" <<-'EOF'
			# hack/images/build.sh: as Debian's slim images
			path-exclude /usr/share/doc/*
			path-include /usr/share/doc/*/copyright
			path-exclude /usr/share/groff/*
			path-exclude /usr/share/info/*
			path-exclude /usr/share/linda/*
			path-exclude /usr/share/lintian/overrides/*
			path-exclude /usr/share/locale/*
			path-exclude /usr/share/man/*
		EOF
		cat >"$dir/fs/etc/apt/apt.conf.d/t9kjobs-clean" <<-'EOF'
			// hack/images/build.sh: as Debian's container images, keep no downloaded .deb
			DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
			APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
			Dir::Cache::pkgcache "";
			Dir::Cache::srcpkgcache "";
		EOF
		find "$dir/fs/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
		find "$dir/fs/usr/share/doc" -mindepth 1 -type d -empty -delete
		rm -rf "$dir"/fs/usr/share/{groff,info,linda,lintian/overrides,locale,man}/*
		tar -C "$dir/fs" --numeric-owner -cf "$dir/rootfs.tar" .
		mv "$dir/rootfs.tar" "$ROOTFS"
		rm -rf "$dir"
		trap - EXIT
		log "root filesystem $ROOTFS ($(du -h "$ROOTFS" | cut -f1)) in $((SECONDS - t0)) s"
	fi

	# ------------------------------------------------------------ the builds
	# One private mount namespace for every buildah call, so nothing it mounts reaches the host.
	# PIP_CERT: the host's CA bundle, for pip behind a TLS-inspecting proxy (the Containerfiles
	# that use pip take it as a build argument; the bundle never ends up in an image).
	ca="${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}"
	ca_args=()
	if [[ -f "$ca" ]]; then
		ca_args=(-v "$ca:/tmp/t9kjobs-build-ca.crt:ro" --build-arg PIP_CERT=/tmp/t9kjobs-build-ca.crt)
	fi
	export -f buildah_ log die
	export STORE ROOTFS BASE_REF HERE
	ctx=""
	archive=""
	trap 'rm -rf "$ctx" ${archive:+"$archive.tmp"}' EXIT
	for item in "${todo[@]}"; do
		read -r name ref archive <<<"$item"
		t0=$SECONDS
		context=$(context_of "$name")
		if [[ -n "$context" ]]; then
			# The context is used where it is: its .dockerignore keeps all else out.
			log "building $ref from $context/Dockerfile"
			ctx=""
			recipe=(-f "$context/Dockerfile" "$context")
		else
			log "building $ref from $HERE/$name/Containerfile"
			ctx=$(mktemp -d "$OUT/.ctx.XXXXXX")
			cp -r "$HERE/$name/." "$ctx/"
			# A C source in the folder is compiled into the context (the pause image).
			for src in "$ctx"/*.c; do
				[[ -f "$src" ]] || continue
				gcc -static -Os -Wall -Werror -o "${src%.c}" "$src"
				strip "${src%.c}"
			done
			recipe=(-f "$ctx/Containerfile" "$ctx")
		fi
		# shellcheck disable=SC2016 # the script expands its own arguments
		unshare --mount --propagation private -- bash -euo pipefail -c '
			name=$1 ref=$2 archive=$3 ctxfile=$4 ctxdir=$5
			shift 5
			if ! buildah_ inspect --type image "$BASE_REF" >/dev/null 2>&1; then
				c=$(buildah_ from scratch)
				buildah_ add "$c" "$ROOTFS" / >/dev/null
				buildah_ config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
					--cmd /bin/bash "$c"
				buildah_ commit --rm -q "$c" "$BASE_REF" >/dev/null
				log "base image $BASE_REF imported"
				# Base images of other root filesystems (older recipes) are no longer used.
				for old in $(buildah_ images --format "{{.Name}}:{{.Tag}}" |
					grep "^localhost/t9kjobs-base:" | grep -vxF "$BASE_REF" || true); do
					buildah_ rmi "$old" >/dev/null || true
				done
			fi
			# --force-rm: a failed build leaves no container behind in the storage. Its output
			# (every step, and what it ran) is kept beside the archive.
			buildah_ bud --isolation chroot --layers=false --pull=never --force-rm \
				--build-arg BASE="$BASE_REF" "$@" -t "$ref" -f "$ctxfile" "$ctxdir" \
				>"${archive%.oci.tar}.build.log" 2>&1 ||
				{ tail -n 40 "${archive%.oci.tar}.build.log" >&2; die "building $ref failed (${archive%.oci.tar}.build.log)"; }
			rm -f "$archive.tmp"
			buildah_ push -q "$ref" "oci-archive:$archive.tmp:$ref"
			buildah_ rmi "$ref" >/dev/null
			mv "$archive.tmp" "$archive"
		' build "$name" "$ref" "$archive" "${recipe[1]}" "${recipe[2]}" "${ca_args[@]}"
		[[ -z "$ctx" ]] || rm -rf "$ctx"
		log "built $ref in $((SECONDS - t0)) s: $(du -h "$archive" | cut -f1) ($archive)"
	done
	trap - EXIT
fi

# Archives of other contents of the same images are stale: keep only the current ones; and so
# are root filesystems of other inputs.
for old in "$OUT"/rootfs-*.tar; do
	[[ ! -e "$old" || "$old" == "$ROOTFS" ]] || rm -f "$old"
done
for name in "${names[@]}"; do
	for old in "$OUT/$name"-*.oci.tar "$OUT/$name"-*.build.log; do
		[[ -e "$old" ]] || continue
		printf '%s\n' "${results[@]}" | grep -qF " ${old%.build.log}" || rm -f "$old"
	done
done
printf '%s\n' "${results[@]}"
