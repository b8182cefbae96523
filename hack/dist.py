"""`make dist`: the sdist and the wheel of t9k-jobs, into `dist/` (or `--out DIR`).

Built from a copy of the sources in a temporary folder, with the setuptools of the running
Python and no network (no build isolation), so that the checkout gets no `build/` and no
`*.egg-info/` of it, and a build never differs by what a folder happened to hold. The wheel
holds the bundled plugins, the conformance kit (a pytest plugin) and the generator of the CRDs
(`t9kjobs crds`); the sdist holds the sources and the generated CRDs (`crds/`) too. Prints
the two paths.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("pyproject.toml", "README.md", "MANIFEST.in", "core", "plugins", "crds")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
BUILD = """
import sys
from setuptools import build_meta
out = sys.argv[1]
print("built:", build_meta.build_sdist(out))
print("built:", build_meta.build_wheel(out))
"""


def build(out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="t9kjobs-dist-") as tmp:
        source = Path(tmp) / "t9k-jobs"
        source.mkdir()
        for name in SOURCES:
            path = REPO / name
            if path.is_dir():
                shutil.copytree(path, source / name, ignore=IGNORED)
            else:
                shutil.copy(path, source / name)
        done = subprocess.run(
            [sys.executable, "-c", BUILD, str(out.resolve())],
            cwd=source,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            sys.exit(f"building t9k-jobs failed:\n{done.stdout}{done.stderr}")
    names = [
        line.split(": ", 1)[1] for line in done.stdout.splitlines() if line.startswith("built: ")
    ]
    return [out / name for name in names]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=REPO / "dist", help="default: dist/")
    for path in build(parser.parse_args().out):
        print(path)


if __name__ == "__main__":
    main()
