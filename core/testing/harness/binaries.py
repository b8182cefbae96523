"""The conformance kit's etcd and kube-apiserver, built from their Go modules anywhere.

A plugin author outside t9k-jobs' repository has no `make cluster-build`:
`t9kjobs-kit-binaries` (a command of the wheel; `python -m t9kjobs.testing.harness.binaries`)
builds the two binaries the kit's admission tier starts from the Go module that
ships in the wheel (`gomod/`, the one t9k-jobs' local cluster builds from, so the kit meets the
same API server), with the default Go module proxy and no prebuilt download, into
`$T9KJOBS_CACHE/bin/k8s-<version>_etcd-<version>-kit-<hash>/` (`~/.cache/t9kjobs` by
default), where the kit looks (`t9kjobs.testing.harness.apiserver.find_binaries`). It needs Go
(the version `gomod/go.mod` names, or later); the first build takes minutes, later calls
return the folder at once.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from t9kjobs.testing.harness.apiserver import NEEDED, cache_bins

__all__ = ["GOMOD", "BuildError", "build_kit_binaries", "kit_binaries_dir", "main"]

GOMOD = Path(__file__).resolve().parent / "gomod"
# What `go build` names each binary's main package.
_PACKAGES = {
    "etcd": "go.etcd.io/etcd/server/v3",
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
}


class BuildError(Exception):
    """The binaries could not be built; the message says why and what to do."""


def _module_version(module: str) -> str:
    for line in (GOMOD / "go.mod").read_text().splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == module and words[1].startswith("v"):
            return words[1]
    raise BuildError(f"{GOMOD / 'go.mod'} requires no {module}")


def _go_version() -> str:
    for line in (GOMOD / "go.mod").read_text().splitlines():
        if line.startswith("go "):
            return line.split()[1]
    return "?"


def kit_binaries_dir(cache: Path | None = None) -> Path:
    """Where the binaries of this t9k-jobs' Go module go: one folder per versions and build."""
    digest = hashlib.sha256((GOMOD / "go.sum").read_bytes() + Path(__file__).read_bytes())
    k8s = _module_version("k8s.io/kubernetes")
    etcd = _module_version("go.etcd.io/etcd/server/v3")
    name = f"k8s-{k8s}_etcd-{etcd}-kit-{digest.hexdigest()[:8]}"
    return (cache or cache_bins()) / name


def _present(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in NEEDED)


def build_kit_binaries(cache: Path | None = None, log: bool = True) -> Path:
    """The folder holding etcd and kube-apiserver, built first when it does not hold them."""
    folder = kit_binaries_dir(cache)
    if _present(folder):
        return folder
    go = shutil.which("go")
    if go is None:
        raise BuildError(
            "go is not on PATH: the kit's etcd and kube-apiserver are built from their Go"
            f" modules (Go {_go_version()} or later); install Go, or give the kit a cluster"
            " (--t9kjobs-kubeconfig)"
        )
    folder.parent.mkdir(parents=True, exist_ok=True)
    k8s = _module_version("k8s.io/kubernetes")
    minor = k8s.removeprefix("v1.").split(".")[0]
    stamp = (
        f"-s -w -X k8s.io/component-base/version.gitVersion={k8s}"
        f" -X k8s.io/component-base/version.gitMajor=1"
        f" -X k8s.io/component-base/version.gitMinor={minor}"
        " -X k8s.io/component-base/version.gitTreeState=clean"
    )
    with tempfile.TemporaryDirectory(prefix=".kit-build-", dir=folder.parent) as tmp:
        module, out = Path(tmp) / "gomod", Path(tmp) / "bin"
        shutil.copytree(GOMOD, module)  # the wheel's copy may be read-only
        out.mkdir()
        env = {**os.environ, "GOTOOLCHAIN": "local", "CGO_ENABLED": "0", "GOFLAGS": "-mod=readonly"}
        if log:
            print(
                f"building etcd and kube-apiserver {k8s} into {folder} (minutes the first time)",
                file=sys.stderr,
            )
        start = time.monotonic()
        done = subprocess.run(
            [go, "build", "-trimpath", "-o", f"{out}/", f"-ldflags={stamp}", *_PACKAGES.values()],
            cwd=module,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BuildError(f"go build failed:\n{done.stderr.strip()[-4000:]}")
        (out / "server").rename(out / "etcd")  # go names etcd's main package "server"
        if folder.exists():
            shutil.rmtree(folder)
        out.rename(folder)
    if log:
        print(f"built in {time.monotonic() - start:.0f} s", file=sys.stderr)
    return folder


def main(argv: list[str] | None = None) -> int:
    """`t9kjobs-kit-binaries [--cache DIR]`: build them (when missing); print the folder."""
    parser = argparse.ArgumentParser(
        prog="t9kjobs-kit-binaries",
        description="Build the conformance kit's etcd and kube-apiserver from their Go modules"
        " (needs Go) into the cache where the kit finds them; print the folder.",
    )
    parser.add_argument(
        "--cache",
        metavar="DIR",
        help="the cache root (default: $T9KJOBS_CACHE, else ~/.cache/t9kjobs); the binaries go"
        " to DIR/bin/k8s-<version>_etcd-<version>-kit-<hash>/",
    )
    args = parser.parse_args(argv)
    try:
        print(build_kit_binaries(Path(args.cache) / "bin" if args.cache else None))
    except BuildError as exc:
        print(f"t9kjobs-kit-binaries: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
