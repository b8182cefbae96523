"""`t9kjobs crds`: write the CustomResourceDefinitions of every kind the loaded plugins serve.

The files are generated (`t9kjobs.crds`), never edited: `make crds` rewrites `crds/`, and a unit
test fails when the committed files differ from what the models produce. A file of our naming
pattern that no loaded plugin produces any more is removed, so a renamed or dropped kind does
not leave a stale CRD behind.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from t9kjobs.crds import CrdError, crds
from t9kjobs.manager import PluginError, PluginManager
from t9kjobs.models import API_GROUP

__all__ = ["add_crds_parser", "cmd_crds"]

DEFAULT_OUTPUT_DIR = "crds"


def cmd_crds(args: argparse.Namespace, manager: PluginManager) -> int:
    try:
        files = list(crds(manager))
    except CrdError as exc:
        raise PluginError(f"cannot generate a CRD: {exc}") from exc
    if args.stdout:
        # One YAML stream: `t9kjobs crds --stdout | kubectl apply --server-side -f -`.
        sys.stdout.write("".join(text for _, text in files))
        return 0
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {name for name, _ in files}
    for name, text in files:
        path = out / name
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            print(f"wrote {path}", file=sys.stderr)
    for stale in sorted(out.glob(f"{API_GROUP}_*.yaml")):
        if stale.name not in written:
            stale.unlink()
            print(f"removed {stale} (no loaded plugin serves its kind)", file=sys.stderr)
    return 0


def add_crds_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register `crds` on the subparsers of the `t9kjobs` parser."""
    p = sub.add_parser(
        "crds",
        help="write the CustomResourceDefinitions of every kind the loaded plugins serve",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--output-dir",
        default=DEFAULT_OUTPUT_DIR,
        metavar="DIR",
        help=f"write one file per kind, {API_GROUP}_<plural>.yaml (default: %(default)s)",
    )
    where.add_argument(
        "--stdout", action="store_true", help="print every CRD as one YAML stream instead"
    )
    p.set_defaults(func=cmd_crds)
