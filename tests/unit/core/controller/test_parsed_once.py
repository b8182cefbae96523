"""The reconciler parses and checks a job's spec once while only its status changes
(`t9kjobs.loading.ParsedJobs`), plans from the status just written, and keeps nothing of a job
once it is deleted or finished."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from t9kjobs.controller.result import DONE
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import JobKey
from tests.unit.core.controller.reconciling import KEY, reconciler, set_pods, settle, status_writes
from tests.unit.core.kube.fake_transport import FakeTransport


def test_a_job_s_spec_is_parsed_once_through_its_status_writes(
    manager: PluginManager, creator: ThreadPoolExecutor, spec_parses: list[int]
) -> None:
    fake = FakeTransport()
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)  # creations, then the status
    set_pods(children, "Running")
    settle(the_reconciler, KEY)
    settle(the_reconciler, KEY)  # nothing to do: the status read is the one written
    recorder.close()
    phases = [s["phase"] for s in status_writes(fake)]
    assert phases and phases[-1] == "Running" and phases.count("Running") == 1
    stored = the_reconciler.cache.job(JobKey(*KEY))
    assert stored is not None
    assert stored["status"]["phase"] == "Running"  # the store holds the answer of the write
    assert len(spec_parses) == 1
    assert len(the_reconciler.parsed) == 1


def test_nothing_is_kept_of_a_deleted_job(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    the_reconciler, recorder, _ = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)
    assert len(the_reconciler.parsed) == 1
    the_reconciler.cache.job_stores[KEY[0]].remove(KEY[1], KEY[2])
    assert the_reconciler.reconcile(KEY) == DONE
    recorder.close()
    assert len(the_reconciler.parsed) == 0


def test_nothing_is_kept_of_a_finished_job(
    manager: PluginManager, creator: ThreadPoolExecutor
) -> None:
    fake = FakeTransport()
    the_reconciler, recorder, children = reconciler(manager, fake, creator)
    settle(the_reconciler, KEY)
    set_pods(children, "Succeeded")
    settle(the_reconciler, KEY)  # the verdict is written
    settle(the_reconciler, KEY)  # read back: the job is finished
    recorder.close()
    assert [s["phase"] for s in status_writes(fake)][-1] == "Succeeded"
    assert len(the_reconciler.parsed) == 0
