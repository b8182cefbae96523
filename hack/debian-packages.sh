#!/usr/bin/env bash
# Install the Debian packages named as arguments, those that are missing only, with apt-get
# (its lists refreshed first, once per call that installs). Needs root when something is
# missing; does nothing and needs nothing when all are installed.
#   hack/debian-packages.sh runc containernetworking-plugins ...
# A leading --no-recommends installs them without apt's recommended packages (python3-torch
# recommends a desktop's worth: GTK, Qt, fonts).
#   hack/debian-packages.sh --no-recommends python3-torch
set -euo pipefail
options=()
if [[ ${1:-} == --no-recommends ]]; then
	options+=(--no-install-recommends)
	shift
fi
missing=()
for pkg in "$@"; do
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
done
((${#missing[@]} == 0)) && exit 0
[[ $(id -u) == 0 ]] || {
	printf '[deps] ERROR: these Debian packages are missing and installing them needs root: %s\n' "${missing[*]}" >&2
	exit 1
}
printf '[deps] installing Debian packages: %s\n' "${missing[*]}" >&2
# Two callers at once (a node start and an image build) wait for each other on apt's own lock.
apt-get -o DPkg::Lock::Timeout=600 update -qq >&2
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq "${options[@]}" "${missing[@]}" >&2
