"""Jinja2 templates of text artefacts (hostfiles, env files, ssh config, launcher scripts).

Templates live in a `templates/` folder of the package that renders them and are loaded once
per package: rendering in a hook then reads no file after the first call.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jinja2

__all__ = ["render_template"]


@cache
def _environment(package: str) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.PackageLoader(package, "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # shell and config files, never HTML
    )


@cache
def _template(package: str, name: str) -> jinja2.Template:
    return _environment(package).get_template(name)


def render_template(package: str, name: str, **context: Any) -> str:
    """Render `templates/<name>` of `package` (e.g. "t9kjobs.plugins.deepspeed")."""
    return _template(package, name).render(**context)
