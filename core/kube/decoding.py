"""JSON from the API server, decoded so that no single object can stop an informer.

The API server stores a job nested up to 10,000 levels deep (inside a pod template, where the
CRD keeps unknown fields); Python's JSON decoder recurses and gives up near 1,000. Left alone,
such a job made every LIST and WATCH of its kind fail, and so the operator (`/readyz` 503,
nothing reconciled). When the decoder gives up, the text is decoded again with every value
nested deeper than `DECODE_DEPTH` replaced by a marker string: the object keeps its identity
(metadata, resourceVersion) and everything else, and the reconciler refuses it as nested too
deep (`t9kjobs.loading.MAX_DEPTH` is below `DECODE_DEPTH`), failing that one job.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["DECODE_DEPTH", "TOO_DEEP", "loads"]

# Levels kept when the text is too deep for the decoder; from the document's root (a LIST's
# items are two levels down).
DECODE_DEPTH = 128
TOO_DEEP = "<t9k-jobs: nested too deep to decode>"

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


def loads(data: bytes | str) -> Any:
    """`json.loads`, or for a text nested too deep, its value cut at `DECODE_DEPTH` levels."""
    try:
        return json.loads(data)
    except RecursionError:
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        return json.loads(_cut(text, DECODE_DEPTH))


def _cut(text: str, depth: int) -> str:
    """`text` with every array or object nested deeper than `depth` replaced by `TOO_DEEP`."""
    out: list[str] = []
    level = 0
    kept_to = 0  # text[kept_to:] is still to copy
    cut_at: int | None = None
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            level += 1
            if level == depth + 1 and cut_at is None:
                out.append(text[kept_to : match.start()])
                cut_at = match.start()
        else:
            if level == depth + 1 and cut_at is not None:
                out.append(json.dumps(TOO_DEEP))
                kept_to = match.end()
                cut_at = None
            level -= 1
    out.append(text[kept_to:])
    return "".join(out)
