"""A job as a notebook renders it (`Job._repr_html_`: phase, progress, replicas, conditions) and
`Client.summary` (the same, with its Events): what the status says, every value escaped, since
messages and metric names are anyone's input and a notebook runs the HTML a cell returns. And
since when `describe` says a job Kueue preempted has been Queued."""

from __future__ import annotations

from datetime import UTC, datetime
from html.parser import HTMLParser
from typing import Any

from t9kjobs.client import JobEvent
from t9kjobs.client.describe import _Describer
from t9kjobs.client.reader import JobRef, find_kind
from t9kjobs.client.rendering import EVENTS_SHOWN, JobSummary
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import Job
from tests.unit.core.client.feedback import ScriptedReader, stored

SCRIPT = "<script>alert('x')</script>"
STATUS: dict[str, Any] = {
    "phase": "Queued",
    "reason": "Preempted",
    "tasks": [
        {
            "type": "worker",
            "restartCount": 1,
            "replicas": [
                {"name": "mlp-worker-0", "phase": "Deleted"},
                {"name": "mlp-worker-1", "phase": "Deleted"},
            ],
        },
        {"type": "master", "replicas": [{"name": "mlp-master-0", "phase": "Running"}]},
    ],
    "conditions": [
        {
            "type": "Admitted",
            "status": "False",
            "reason": "Preempted",
            "message": f"evicted by Kueue (Preempted): {SCRIPT}",
            "lastTransitionTime": "2026-11-28T11:00:00Z",
        }
    ],
    "progress": {
        "step": 120,
        "totalSteps": 300,
        "percent": 40,
        "remainingSeconds": 95,
        "metrics": {"loss": 0.41, "<b>bold</b>": 1},
        "replica": "master-0",
    },
}


class _Text(HTMLParser):
    """The text a browser shows, and the tags it would make."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def shown(html: str) -> _Text:
    parser = _Text()
    parser.feed(html)
    return parser


def _job(manager: PluginManager, status: dict[str, Any]) -> Job:
    return parse_job(stored(status), manager)


def test_a_job_renders_its_phase_progress_replicas_and_conditions(
    manager: PluginManager,
) -> None:
    html = _job(manager, STATUS)._repr_html_()
    page = shown(html)
    text = "".join(page.text)
    assert "GenericJob/mlp" in text and "in namespace team-a" in text
    assert "Queued (Preempted)" in text
    assert "40% (step 120/300), about 1m35s left; loss=0.41 <b>bold</b>=1" in text
    assert "<progress value='120' max='300'></progress>" in html
    # The replicas by type: worker 2 (both deleted by the eviction), 1 restart; master running.
    rows = html.split("<tr>")
    assert any("<td style='text-align:left'>worker</td>" in r and ">2<" in r for r in rows)
    assert "evicted by Kueue (Preempted): " + SCRIPT in text  # shown as text, not run


def test_a_script_in_a_message_is_escaped_never_a_tag(manager: PluginManager) -> None:
    html = _job(manager, STATUS)._repr_html_()
    assert "<script>" not in html and "&lt;script&gt;alert(&#x27;x&#x27;)" in html
    assert "<b>bold</b>" not in html
    assert "script" not in shown(html).tags and shown(html).tags.count("b") >= 1


def test_a_job_with_no_status_yet(manager: PluginManager) -> None:
    text = "".join(shown(_job(manager, {})._repr_html_()).text)
    assert "Phase: Pending" in text and "none reported yet" in text and "(none)" in text


def _event(n: int, message: str = "ok") -> JobEvent:
    return JobEvent(
        f"2026-11-28T10:00:{n:02d}Z", "Normal", "Scheduled", "Pod/mlp-worker-0", message
    )


def test_the_summary_adds_the_newest_events_escaped(manager: PluginManager) -> None:
    events = [_event(n) for n in range(EVENTS_SHOWN + 3)] + [_event(59, SCRIPT)]
    summary = JobSummary(_job(manager, STATUS), events)
    html = summary._repr_html_()
    assert html.startswith(_job(manager, STATUS)._repr_html_())
    text = "".join(shown(html).text)
    assert f"Events (the newest {EVENTS_SHOWN} of {EVENTS_SHOWN + 4})" in text
    assert "2026-11-28T10:00:00Z" not in text  # the oldest left out
    assert SCRIPT in text and "<script>" not in html
    printed = str(summary).splitlines()
    assert printed[0] == "GenericJob/mlp in namespace team-a: Queued (Preempted)"
    assert printed[1] == "  progress: 40% (step 120/300), about 1m35s left; loss=0.41 <b>bold</b>=1"
    assert printed[2] == "  worker: 2 replicas (2 Deleted)"
    assert printed[-1].endswith(f"Pod/mlp-worker-0: {SCRIPT}")


def test_describe_says_a_preempted_job_is_queued_since_its_eviction(manager: PluginManager) -> None:
    """Not since it was created: since its Admitted condition turned False."""
    reader = ScriptedReader(STATUS)
    ref = JobRef(find_kind("gj", manager), "mlp", "team-a")
    now = datetime(2026, 11, 28, 11, 1, 30, tzinfo=UTC)
    header = _Describer(reader, ref, now).header()  # type: ignore[arg-type]
    assert (header["phase"], header["inPhaseSeconds"]) == ("Queued", 90.0)
