"""A job as Jupyter shows it: `Job._repr_html_` is `job_html`, a summary of what the object holds
(its phase and why, its replicas, its progress, its conditions), rendered without a cluster.

A `Job` carries no client, so it shows only what its status says; the Events about it are the
API server's, which `Client.summary` reads and renders beside this
(`t9kjobs.client.rendering`). Every value is escaped: a job's name, its conditions' messages, its
metrics' names and its Events' messages are anyone's input, and a notebook runs what a cell's
HTML holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape
from typing import TYPE_CHECKING, Any

from t9kjobs.models.status import JobStatus, TrainingProgress

if TYPE_CHECKING:
    from t9kjobs.models.job import Job

__all__ = ["duration_text", "job_html", "phase_text", "progress_text", "table_html"]

# The colour of a phase's name: green for done, red for failed, grey while it waits.
_PHASE_COLOUR = {
    "Succeeded": "#2e7d32",
    "Failed": "#c62828",
    "Running": "#1565c0",
    "Queued": "#6d6d6d",
    "Pending": "#6d6d6d",
    "Paused": "#6d6d6d",
}


def duration_text(seconds: float) -> str:
    """`1m35s`, `2h05m`, `3d4h`: a duration as `t9kjobs describe` says it."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def progress_text(progress: TrainingProgress) -> str:
    """`40% (step 120/300), about 1m35s left; loss=0.41 accuracy=0.87`."""
    step = "?" if progress.step is None else str(progress.step)
    steps = f"step {step}/{progress.total_steps}" if progress.total_steps else f"step {step}"
    text = f"{progress.percent:g}% ({steps})" if progress.percent is not None else steps
    if progress.remaining_seconds and progress.percent != 100:
        text += f", about {duration_text(progress.remaining_seconds)} left"
    if progress.metrics:
        text += "; " + " ".join(f"{k}={v:.4g}" for k, v in progress.metrics.items())
    return text


def phase_text(status: JobStatus) -> str:
    """The phase, and the reason the job stands there when it has one of its own: `Queued
    (Preempted)`, but `Queued` for a job that waits its turn (reason `Queued`)."""
    phase = status.phase or "Pending"
    return f"{phase} ({status.reason})" if status.reason not in (None, phase) else phase


def table_html(caption: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A small table, every cell escaped; `(none)` when it has no row."""
    head = "".join(f"<th style='text-align:left'>{escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td style='text-align:left'>{_cell(v)}</td>" for v in row) + "</tr>"
        for row in rows
    )
    if not body:
        body = f"<tr><td colspan='{len(header)}'><i>(none)</i></td></tr>"
    return (
        f"<details open><summary><b>{escape(caption)}</b></summary>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>"
    )


def _cell(value: Any) -> str:
    return "" if value is None else escape(str(value))


def _progress_html(progress: TrainingProgress | None) -> str:
    if progress is None:
        return "<div>Progress: <i>none reported yet</i></div>"
    bar = ""
    if progress.total_steps and progress.step is not None:
        done = min(progress.step, progress.total_steps)
        bar = f"<progress value='{done}' max='{progress.total_steps}'></progress> "
    who = f" <small>({escape(progress.replica)})</small>" if progress.replica else ""
    return f"<div>Progress: {bar}{escape(progress_text(progress))}{who}</div>"


def _replica_rows(status: JobStatus) -> list[tuple[Any, ...]]:
    rows = []
    for task in status.tasks:
        phases = [r.phase for r in task.replicas]
        rows.append(
            (
                task.type,
                len(task.replicas),
                phases.count("Running"),
                phases.count("Succeeded"),
                phases.count("Failed"),
                task.restart_count,
            )
        )
    return rows


def job_html(job: Job) -> str:
    """The job's summary as HTML: kind, name and namespace; its phase (and why it stands
    there); its progress with a bar; its replicas by type; its conditions."""
    status = job.status
    colour = _PHASE_COLOUR.get(status.phase or "Pending", "inherit")
    ready = f" <small>ready {escape(status.ready)}</small>" if status.ready else ""
    parts = [
        "<div class='t9kjobs-job'>",
        f"<div><b>{escape(job.kind)}/{escape(job.name)}</b>"
        f" <small>in namespace {escape(job.namespace)}</small></div>",
        f"<div>Phase: <b style='color:{colour}'>{escape(phase_text(status))}</b>{ready}</div>",
        _progress_html(status.progress),
        table_html(
            "Replicas",
            ("type", "replicas", "running", "succeeded", "failed", "restarts"),
            _replica_rows(status),
        ),
        table_html(
            "Conditions",
            ("type", "status", "reason", "message", "since"),
            (
                (c.type, c.status, c.reason, c.message, c.last_transition_time)
                for c in status.conditions
            ),
        ),
        "</div>",
    ]
    return "".join(parts)
