"""`t9kjobs`: render, validate, plugins, crds, operator, and for jobs on a cluster describe and
logs; `--version`, shell completion (`completion`). Installed as `kubectl-t9k` too, so that
`kubectl t9k describe ...` runs it as a kubectl plugin.

Every user error ends as a clear message on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import argcomplete
import yaml

from t9kjobs.cli.completion import add_completion_parser, kubectl_complete
from t9kjobs.cli.crds import add_crds_parser
from t9kjobs.cli.describe import add_describe_parser
from t9kjobs.cli.logs import add_logs_parser
from t9kjobs.cli.operator import add_operator_parser
from t9kjobs.cli.plugin_options import add_plugin_options, configure_plugins
from t9kjobs.cli.version import version_text
from t9kjobs.client.errors import ClientError
from t9kjobs.loading import JobError, Unreadable, judge, load_documents
from t9kjobs.manager import PluginError, PluginManager, load_plugins
from t9kjobs.models import API_GROUP, API_VERSION, Job
from t9kjobs.render import render_job

__all__ = ["kubectl_plugin", "kubectl_plugin_completion", "main"]


class _Unreadable(Exception):
    """A file that cannot be read or is not text: one line, exit 2."""


def _read(path: str) -> bytes:
    if path == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise _Unreadable(f"cannot read {path}: {exc.strerror or exc}") from None


def _documents(path: str) -> list[dict[str, Any]]:
    """The jobs of a file; JobError for problems of the text, _Unreadable for the rest."""
    data = _read(path)
    try:
        return load_documents(data, path)
    except Unreadable as exc:
        raise _Unreadable(f"cannot read {path}: {exc}") from None


def _checked(where: str, doc: dict[str, Any], manager: PluginManager) -> Job | None:
    """The job of one document, its warnings and errors printed with `where` in front: the
    verdict of `judge`, the admission webhook's too."""
    verdict = judge(doc, manager)
    for p in verdict.errors or verdict.warnings:
        print(f"{where}: {p}", file=sys.stderr)
    return verdict.job


def _cmd_plugins(args: argparse.Namespace, manager: PluginManager) -> int:
    if args.kueue_frameworks:
        # What Kueue's Configuration lists in integrations.externalFrameworks for our kinds
        # (docs/install.md; hack/cluster/kueue/start.sh reads it).
        version = API_VERSION.partition("/")[2]
        print(",".join(f"{k}.{version}.{API_GROUP}" for k in sorted(manager.kinds)))
        return 0
    rows = [("NAME", "DISTRIBUTION", "VERSION", "KINDS")]
    for p in manager.plugins():
        rows.append((p.name, p.distribution or "-", p.version or "-", ", ".join(p.kinds) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _cmd_validate(args: argparse.Namespace, manager: PluginManager) -> int:
    failed = unreadable = False
    for path in args.files:
        try:
            docs = _documents(path)
        except _Unreadable as exc:
            print(f"t9kjobs: {exc}", file=sys.stderr)
            unreadable = True
            continue
        except JobError as exc:
            for p in exc.problems:
                print(f"{p}", file=sys.stderr)
            failed = True
            continue
        multi = len(docs) > 1
        for i, doc in enumerate(docs):
            where = f"{path}[{i}]" if multi else path
            if _checked(where, doc, manager) is None:
                failed = True
                continue
            meta = doc.get("metadata") or {}
            name = meta.get("name") or f"{meta.get('generateName', '')}<generated>"
            print(f"{where}: {doc.get('kind')} {name} is valid")
    return 2 if unreadable else 1 if failed else 0


def _cmd_render(args: argparse.Namespace, manager: PluginManager) -> int:
    refused = configure_plugins(args, manager, "render")
    if refused is not None:
        print(refused, file=sys.stderr)
        return 2
    try:
        docs = _documents(args.file)
    except _Unreadable as exc:
        print(f"t9kjobs: {exc}", file=sys.stderr)
        return 2
    except JobError as exc:
        for p in exc.problems:
            print(f"{p}", file=sys.stderr)
        return 1
    multi = len(docs) > 1
    jobs = [
        _checked(f"{args.file}[{i}]" if multi else args.file, d, manager)
        for i, d in enumerate(docs)
    ]
    if any(job is None for job in jobs):
        return 1
    objects = [obj for job in jobs if job is not None for obj in render_job(job, manager)]
    if args.output == "json":
        print(json.dumps(objects, indent=2, sort_keys=False))
    else:
        print(yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False), end="")
    return 0


def _parser(prog: str = "t9kjobs", manager: PluginManager | None = None) -> argparse.ArgumentParser:
    """The command line; the plugins' options (`t9kjobs_options`) are those of `manager`
    (default: every installed plugin)."""
    manager = manager if manager is not None else load_plugins()
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Distributed training jobs on Kubernetes: DeepSpeedJob, ColossalAIJob,"
        " PyTorchTrainingJob, GenericJob and the kinds of installed plugins.",
    )
    parser.add_argument(
        "--block-plugin",
        action="append",
        default=[],
        metavar="NAME",
        help="do not load the plugin NAME (repeatable; also T9KJOBS_BLOCK_PLUGINS=a,b)",
    )
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the version of t9kjobs and of every plugin it loads, then exit",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("render", help="print every object the operator would create for a job")
    p.add_argument("file", help="job manifest (YAML; - for stdin)")
    p.add_argument("-o", "--output", choices=("yaml", "json"), default="yaml")
    # The operator's plugin options, with its defaults: what render shows is what it does.
    add_plugin_options(p, manager)
    p.set_defaults(func=_cmd_render)

    p = sub.add_parser("validate", help="check job manifests; one line per problem")
    p.add_argument("files", nargs="+", help="job manifests (YAML; - for stdin)")
    p.set_defaults(func=_cmd_validate)

    p = sub.add_parser("plugins", help="list the loaded plugins and the kinds they serve")
    p.add_argument(
        "--kueue-frameworks",
        action="store_true",
        help="print the kinds as Kueue's Configuration names external frameworks"
        " (Kind.version.group, comma-separated; docs/install.md)",
    )
    p.set_defaults(func=_cmd_plugins)

    add_operator_parser(sub, manager)
    add_crds_parser(sub)
    add_describe_parser(sub)
    add_logs_parser(sub)
    add_completion_parser(sub)
    return parser


def _blocked(argv: Sequence[str] | None) -> list[str]:
    """The `--block-plugin` values of the command line: plugins load before it is parsed
    whole, since their options are part of it."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--block-plugin", action="append", default=[])
    blocked: list[str] = early.parse_known_args(argv)[0].block_plugin
    return blocked


def main(argv: Sequence[str] | None = None, prog: str = "t9kjobs") -> int:
    try:
        manager = load_plugins(_blocked(argv))
    except PluginError as exc:
        print(f"t9kjobs: plugin error: {exc}", file=sys.stderr)
        return 2
    parser = _parser(prog, manager)
    # Answers a completing shell, and exits (by SystemExit: kubectl_complete reads the answer).
    argcomplete.autocomplete(parser, exit_method=sys.exit)
    args = parser.parse_args(argv)
    if args.command is None and not args.version:
        parser.error("a COMMAND is required (or --version)")
    try:
        if args.version:
            print(version_text(manager), end="")
            return 0
        return int(args.func(args, manager))
    except PluginError as exc:
        print(f"t9kjobs: plugin error: {exc}", file=sys.stderr)
        return 2
    except ClientError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        return 1


def kubectl_plugin() -> int:
    """`kubectl-t9k`: the same commands, named as kubectl runs them (`kubectl t9k ...`)."""
    return main(prog="kubectl t9k")


def kubectl_plugin_completion() -> int:
    """`kubectl_complete-t9k`: kubectl's completion of `kubectl t9k ...` asks it."""
    return kubectl_complete(kubectl_plugin)


if __name__ == "__main__":
    sys.exit(main())
