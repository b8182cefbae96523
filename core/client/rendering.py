"""`JobSummary`: a job and its newest Events, as `Client.summary` returns it, for a notebook to
render (`_repr_html_`) and a terminal to print (`str`).

A `Job` renders itself (`Job._repr_html_`: what its status holds), but carries no client: the
Events about it and its pods are the API server's, so the summary holds both, read at once.
Every value is escaped (`t9kjobs.models.job_html`): Event messages are anyone's words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from t9kjobs.models import Job
from t9kjobs.models.job_html import job_html, phase_text, progress_text, table_html

__all__ = ["EVENTS_SHOWN", "JobSummary"]

EVENTS_SHOWN = 10  # the newest Events a summary shows


class _Event(Protocol):
    """An Event as `Client.events` gives it (`JobEvent`, a frozen dataclass)."""

    @property
    def time(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def reason(self) -> str: ...
    @property
    def about(self) -> str: ...
    @property
    def message(self) -> str: ...


@dataclass(frozen=True)
class JobSummary:
    """The job as last read, and the Events about it and its pods, oldest first."""

    job: Job
    events: Sequence[_Event]

    @property
    def newest_events(self) -> Sequence[_Event]:
        return self.events[-EVENTS_SHOWN:]

    def _repr_html_(self) -> str:
        newest = self.newest_events
        caption = f"Events (the newest {len(newest)} of {len(self.events)})"
        rows = ((e.time, e.type, e.reason, e.about, e.message) for e in newest)
        events = table_html(caption, ("time", "type", "reason", "object", "message"), rows)
        return job_html(self.job) + events

    def __str__(self) -> str:
        job, status = self.job, self.job.status
        out = [f"{job.kind}/{job.name} in namespace {job.namespace}: {phase_text(status)}"]
        if status.progress is not None:
            out.append(f"  progress: {progress_text(status.progress)}")
        for task in status.tasks:
            phases = [r.phase for r in task.replicas]
            counts = ", ".join(f"{phases.count(p)} {p}" for p in sorted(set(phases)))
            out.append(f"  {task.type}: {len(phases)} replicas ({counts})")
        out += [f"  {e.time} {e.reason} {e.about}: {e.message}" for e in self.newest_events]
        return "\n".join(out)
