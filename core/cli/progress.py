"""Training progress, read from the deciding replica's log by a documented convention.

None of the peers puts training progress in a job's status, and the operator cannot know it:
only the program does. So `t9kjobs describe` reads it where programs already write it, their
log. The convention (docs/observability.md): the last line of the deciding replica's log that
matches `PROGRESS_PATTERN` — a word `step`, `epoch` or `iter`/`iteration`, then a number, then
optionally `/` and the total: `step 120/300 loss=0.41`, `Epoch 3/10`, `iter=500`. A job may
give a pattern of its own in the annotation `batch.tensorstack.dev/progress-pattern` (a Python
regular expression; the named groups `done` and `total`, when it has them, give the figures).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ANNOTATION_PROGRESS_PATTERN", "PROGRESS_PATTERN", "Progress", "find_progress"]

ANNOTATION_PROGRESS_PATTERN = "batch.tensorstack.dev/progress-pattern"
PROGRESS_PATTERN = (
    r"(?i)\b(?:step|epoch|iter(?:ation)?)\b\s*[=:#]?\s*(?P<done>\d+)(?:\s*/\s*(?P<total>\d+))?"
)


@dataclass(frozen=True)
class Progress:
    line: str
    done: int | None = None
    total: int | None = None

    @property
    def percent(self) -> float | None:
        if self.done is None or not self.total:
            return None
        return 100.0 * self.done / self.total


def _number(match: re.Match[str], group: str) -> int | None:
    value = match.groupdict().get(group)
    return int(value) if value and value.isdigit() else None


def find_progress(lines: Iterable[str], pattern: str | None = None) -> Progress | None:
    """The last line matching the pattern (`PROGRESS_PATTERN` when None), with its figures.

    ValueError when `pattern` is not a valid regular expression."""
    try:
        regex = re.compile(pattern or PROGRESS_PATTERN)
    except re.error as exc:
        raise ValueError(f"{ANNOTATION_PROGRESS_PATTERN}: {exc}") from None
    found: Progress | None = None
    for line in lines:
        match = regex.search(line)
        if match is not None:
            found = Progress(line.strip(), _number(match, "done"), _number(match, "total"))
    return found
