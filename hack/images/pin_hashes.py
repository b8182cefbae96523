"""Pin a requirements file with the hashes of the files pip installs from it in an image.

    .venv/bin/python hack/images/pin_hashes.py hack/images/trainer/requirements.txt
    .venv/bin/python hack/images/pin_hashes.py --lock pyproject.toml requirements/operator.lock

The first form rewrites a file of `name==version` lines (comments kept) so that each carries
`--hash=sha256:...` of the file pip picks for the image's interpreter and platform: CPython 3.11
on glibc 2.36, x86_64 (Debian bookworm's python3, which every image here runs). pip is asked to
download each pinned release with no dependencies, with the platform tags that interpreter's
own pip accepts, in its order of preference (manylinux_2_36 down to manylinux1, then
linux_x86_64), so it picks the same wheel, or the sdist when no wheel fits; the file's SHA-256
is its hash. An image installs with `pip install --require-hashes`, which refuses any file
whose hash is not listed: a release replaced on the index, a wheel built elsewhere, a
dependency nobody pinned.

The second form writes a lock of a project: its `[project] dependencies` and its build
backend's `[build-system] requires`, resolved for that interpreter and platform from wheels
only, every package of the closure pinned to the version resolved, with its hash.

pip's configuration is ignored (`PIP_CONFIG_FILE=/dev/null`, no `PIP_FIND_LINKS`): files come
from the index alone, not from a local wheel folder. Its CA bundle is the one pip would use
(`PIP_CERT`, `SSL_CERT_FILE`, else pip's own).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import (
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

PYTHON = "3.11"  # Debian bookworm's python3
GLIBC_MINOR = 36  # Debian bookworm's glibc 2.36
ARCH = "x86_64"
# manylinux releases that have a legacy name too, which pip lists right after the new one.
_LEGACY = {17: "manylinux2014", 12: "manylinux2010", 5: "manylinux1"}
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([^\s;\\]+)")


def platforms(glibc_minor: int = GLIBC_MINOR, arch: str = ARCH) -> list[str]:
    """The platform tags pip on glibc 2.<glibc_minor> accepts, most preferred first."""
    tags = []
    for minor in range(glibc_minor, 4, -1):
        tags.append(f"manylinux_2_{minor}_{arch}")
        if minor in _LEGACY:
            tags.append(f"{_LEGACY[minor]}_{arch}")
    return [*tags, f"linux_{arch}"]


def _pip_download(specs: list[str], dest: Path, *, deps: bool) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    env["PIP_CONFIG_FILE"] = os.devnull
    cert = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    command = [sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check"]
    command += ["--dest", str(dest), "--python-version", PYTHON, "--implementation", "cp"]
    for tag in platforms():
        command += ["--platform", tag]
    command += ["--only-binary=:all:"] if deps else ["--no-deps"]
    if cert:
        command += ["--cert", cert]
    subprocess.run([*command, *specs], check=True, env=env)


def _name_version(filename: str) -> tuple[str, str]:
    if filename.endswith(".whl"):
        name, version, _, _ = parse_wheel_filename(filename)
    else:
        name, version = parse_sdist_filename(filename)
    return str(name), str(version)


def _hashes(dest: Path) -> dict[str, tuple[str, str, str]]:
    """Canonical name -> (version, file name, sha256) of every file in `dest`."""
    found: dict[str, tuple[str, str, str]] = {}
    for path in sorted(dest.iterdir()):
        name, version = _name_version(path.name)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        found[canonicalize_name(name)] = (version, path.name, digest)
    return found


def _logical_lines(text: str) -> list[str]:
    """Lines with their backslash continuations joined (old `--hash` options included)."""
    lines: list[str] = []
    pending = ""
    for line in text.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        lines.append(pending + line)
        pending = ""
    if pending:
        lines.append(pending)
    return lines


def _pinned(name: str, version: str, digest: str, filename: str) -> str:
    return f"{name}=={version} \\\n    --hash=sha256:{digest}  # {filename}"


def pin_file(path: Path) -> None:
    """Rewrite `path`: every `name==version` line with the hash of its file for the image."""
    lines = _logical_lines(path.read_text())
    pins = [m for m in (_PIN.match(line) for line in lines) if m]
    with tempfile.TemporaryDirectory() as tmp:
        _pip_download([f"{m[1]}=={m[2]}" for m in pins], Path(tmp), deps=False)
        files = _hashes(Path(tmp))
    out = []
    for line in lines:
        match = _PIN.match(line)
        if not match:
            out.append(line)
            continue
        version, filename, digest = files[canonicalize_name(match[1])]
        assert version == match[2], (match[1], version, match[2])
        out.append(_pinned(match[1], match[2], digest, filename))
    path.write_text("\n".join(out) + "\n")


def lock_project(pyproject: Path, lock: Path) -> None:
    """Write `lock`: the closure of the project's dependencies and build requirements."""
    project = tomllib.loads(pyproject.read_text())
    wanted = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    with tempfile.TemporaryDirectory() as tmp:
        _pip_download(wanted, Path(tmp), deps=True)
        files = _hashes(Path(tmp))
    for spec in wanted:
        requirement = Requirement(spec)
        version = files[canonicalize_name(requirement.name)][0]
        assert requirement.specifier.contains(version), (spec, version)
    header = [
        f"# The closure of {pyproject.name}'s [project] dependencies and [build-system] requires,",
        f"# resolved for CPython {PYTHON} on glibc 2.{GLIBC_MINOR} {ARCH} (Debian bookworm), each",
        "# with the hash of its wheel: the operator image (Dockerfile) installs it with pip's",
        "# --require-hashes, then the project with no index. Not edited by hand, written by",
        f"#   .venv/bin/python hack/images/pin_hashes.py --lock {pyproject} {lock}",
        "# (tests/unit/hack/test_image_pins.py fails when it no longer satisfies pyproject.toml).",
    ]
    body = [_pinned(name, v, digest, filename) for name, (v, filename, digest) in files.items()]
    lock.write_text("\n".join(header + body) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lock", metavar="PYPROJECT", type=Path, help="write a project's lock")
    parser.add_argument("requirements", type=Path, help="the file to pin (or the lock to write)")
    args = parser.parse_args()
    if args.lock:
        lock_project(args.lock, args.requirements)
    else:
        pin_file(args.requirements)


if __name__ == "__main__":
    main()
