"""`t9kjobs --version`: this distribution's version, and every plugin loaded with its
distribution and version, bundled (shipped in t9k-jobs) or third-party."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from t9kjobs.manager import PluginManager

__all__ = ["DISTRIBUTION", "version_text"]

DISTRIBUTION = "t9k-jobs"


def _version(distribution: str) -> str:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return "unknown"


def version_text(manager: PluginManager) -> str:
    lines = [
        f"t9kjobs {_version(DISTRIBUTION)} (python {platform.python_version()},"
        f" kubernetes client {_version('kubernetes')})",
        "plugins:",
    ]
    rows = [
        (
            p.name,
            f"{p.distribution or '-'} {p.version or ''}".strip(),
            "bundled" if p.distribution == DISTRIBUTION else "third-party",
            ", ".join(p.kinds) or "-",
        )
        for p in manager.plugins()
    ]
    widths = [max((len(r[i]) for r in rows), default=0) for i in range(3)]
    for r in rows:
        cells = [c.ljust(w) for c, w in zip(r[:3], widths, strict=True)]
        lines.append(f"  {'  '.join(cells)}  {r[3]}".rstrip())
    return "\n".join(lines) + "\n"
