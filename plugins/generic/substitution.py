"""The `$(...)` variables of GenericJob command, args and env values.

`$(type)`, `$(rank)`, `$(replicas[<type>])`, `$(service.<type>[<rank>].host)` and
`$(service.port[<name>])`. Anything else in `$(...)` is left alone (Kubernetes itself expands
`$(VAR)` from env). An unknown type or port name is a validation error, found by `unresolved`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["Variables", "substitute", "unresolved"]

_PATTERN = re.compile(
    r"\$\((type|rank|replicas\[([^\]]+)\]|service\.port\[([^\]]+)\]"
    r"|service\.([a-z0-9-]+)\[(\d+)\]\.host)\)"
)


@dataclass(frozen=True)
class Variables:
    replica_type: str
    rank: int
    replicas: Mapping[str, int]
    job_name: str
    ports: Mapping[str, int] | None  # None: the job has no `service`


def _value(match: re.Match[str], v: Variables) -> str | None:
    whole, rtype, port_name, svc_type, svc_rank = match.groups()
    if whole == "type":
        return v.replica_type
    if whole == "rank":
        return str(v.rank)
    if rtype is not None:
        return str(v.replicas[rtype]) if rtype in v.replicas else None
    if port_name is not None:
        return str(v.ports[port_name]) if v.ports and port_name in v.ports else None
    if v.ports is None or svc_type not in v.replicas or int(svc_rank) >= v.replicas[svc_type]:
        return None
    return f"{v.job_name}-{svc_type}-{svc_rank}"


def substitute(text: str, v: Variables) -> str:
    def repl(m: re.Match[str]) -> str:
        value = _value(m, v)
        return m.group(0) if value is None else value

    return _PATTERN.sub(repl, text)


def unresolved(text: str, v: Variables) -> list[str]:
    """The variables in `text` that cannot be resolved for this job."""
    return [m.group(0) for m in _PATTERN.finditer(text) if _value(m, v) is None]
