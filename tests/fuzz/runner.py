"""Run `t9kjobs validate` / `render` on every case and sort what came out: valid, refused (every
line naming a field or a line of the file), unreadable (one line, exit 2), or a failure
(traceback, signal, hang, memory blow-up, a line without a location).

The CLI runs in worker processes forked from one that has imported it and loaded the plugins,
each with a memory limit, one case after another (a few milliseconds each, where a fresh
`t9kjobs` process costs a few hundred). A case that outlives its time limit is a hang: its
worker is killed and replaced; one that crashes or kills its worker is a crash, and the worker
is replaced too, so that no case runs in a worker a bad case left behind.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import re
import resource
import signal
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

from tests.fuzz.generator import Case

__all__ = ["Outcome", "line_problem", "run_cases"]

TIMEOUT_SECONDS = 20.0
# Address space a worker may add to what it inherits: a job the CLI would expand without bound
# (replicas: 2^31, an alias bomb) hits it as a MemoryError instead of taking the machine.
EXTRA_ADDRESS_SPACE = 1 << 30

# A problem line: `<file>[<doc>]: [warning: ]<field path>: <message>`, or for a problem of the
# YAML text itself `<file>:<line>:<column>: <message>`.
_FIELD = r'[A-Za-z0-9_$-](?:[A-Za-z0-9_$.-]|\[\d+\]|\["[^"]*"\])*'  # a["b c"][0].d
_LINE = re.compile(
    r"^(?P<file>[^:\[]+)(\[\d+\])?: (warning: )?" + _FIELD + r": \S"
    r"|^(?P<file2>[^:\[]+):\d+:\d+: \S"
)
_CRASHED = 99  # the exit code a worker reports for an exception out of main()


@dataclass(frozen=True)
class Outcome:
    """What one command did with one case."""

    case_id: str
    command: str
    verdict: str  # valid | invalid | unreadable | crash | hang
    exit_code: int | None
    stdout: str
    stderr: str
    detail: str = ""


def line_problem(line: str) -> bool:
    """Whether a stderr line of `validate` locates its problem (field path or line:column)."""
    return bool(_LINE.match(line))


def _classify(case_id: str, command: str, code: int, out: str, err: str) -> Outcome:
    lines = [line for line in err.splitlines() if line.strip()]
    if code not in (0, 1, 2) or "Traceback (most recent call last)" in err:
        return Outcome(case_id, command, "crash", code, out, err, "traceback")
    if "internal error" in err:
        return Outcome(case_id, command, "crash", code, out, err, "internal error")
    if code == 0:
        return Outcome(case_id, command, "valid", code, out, err)
    if code == 2:
        if len(lines) == 1:
            return Outcome(case_id, command, "unreadable", code, out, err)
        return Outcome(case_id, command, "crash", code, out, err, "exit 2 takes one line")
    if not lines:
        return Outcome(case_id, command, "crash", code, out, err, "exit 1 without a message")
    unlocated = [line for line in lines if not line_problem(line)]
    if unlocated:
        return Outcome(case_id, command, "crash", code, out, err, f"no location: {unlocated[0]}")
    return Outcome(case_id, command, "invalid", code, out, err)


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


def _serve(conn: Connection, command: str) -> None:
    """A worker: run the CLI on each path received, answer (code, stdout, stderr)."""
    soft = _address_space() + EXTRA_ADDRESS_SPACE
    resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
    from t9kjobs.cli.main import main

    while True:
        path = conn.recv()
        if path is None:
            return
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main([command, path])
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
            except BaseException:
                traceback.print_exc(file=err)
                code = _CRASHED
        conn.send((code, out.getvalue(), err.getvalue()))


def _warm() -> None:
    """Import and cache in the parent what every worker would load again: the CLI, the
    plugins, each kind's schema (for "did you mean")."""
    import t9kjobs.cli.main  # noqa: F401
    from t9kjobs.loading import spec_schema
    from t9kjobs.manager import load_plugins

    for info in load_plugins().kinds.values():
        spec_schema(info.spec_model)


class _Worker:
    def __init__(self, command: str) -> None:
        self.conn, child = multiprocessing.get_context("fork").Pipe()
        self.process = multiprocessing.get_context("fork").Process(
            target=_serve, args=(child, command), daemon=True
        )
        self.process.start()
        child.close()
        self.case: Case | None = None
        self.started = 0.0

    def give(self, case: Case, path: str) -> None:
        self.case, self.started = case, time.monotonic()
        self.conn.send(path)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid or 0, signal.SIGKILL)
        self.process.join()
        self.conn.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.conn.send(None)
        self.process.join(5)
        if self.process.is_alive():
            self.kill()


def _path_for(case: Case, workdir: Path, index: int) -> str:
    if case.special == "missing":
        return str(workdir / "does-not-exist.yaml")
    if case.special == "directory":
        return str(workdir)
    path = workdir / f"case-{index:05d}.yaml"
    path.write_bytes(case.text)
    return str(path)


def _answer(worker: _Worker, command: str) -> Outcome:
    assert worker.case is not None
    case_id = worker.case.id
    try:
        code, out, err = worker.conn.recv()
    except (EOFError, OSError):
        worker.process.join()
        died = worker.process.exitcode or 0
        name = signal.Signals(-died).name if died < 0 else f"exit {died}"
        return Outcome(case_id, command, "crash", None, "", "", f"worker died: {name}")
    return _classify(case_id, command, int(code), str(out), str(err))


def run_cases(
    cases: Iterable[Case], command: str, *, workers: int = 2, timeout: float = TIMEOUT_SECONDS
) -> Iterator[Outcome]:
    """`t9kjobs <command> <file>` on every case, `workers` at a time; outcomes as they end."""
    _warm()
    pool = [_Worker(command) for _ in range(workers)]
    try:
        with tempfile.TemporaryDirectory(prefix="t9kjobs-fuzz-") as tmp:
            pending = [(c, _path_for(c, Path(tmp), i)) for i, c in enumerate(cases)]
            yield from _drive(pool, pending, command, timeout)
    finally:
        for worker in pool:
            worker.stop()


def _drive(
    pool: list[_Worker], pending: list[tuple[Case, str]], command: str, timeout: float
) -> Iterator[Outcome]:
    """Feed the cases to idle workers; replace a worker that crashed or hung."""
    while pending or any(w.case is not None for w in pool):
        for worker in pool:
            if worker.case is None and pending:
                worker.give(*pending.pop(0))
        busy = {w.conn: w for w in pool if w.case is not None}
        for conn in wait(list(busy), timeout=0.05):
            worker = busy[conn]
            outcome = _answer(worker, command)
            yield outcome
            if outcome.verdict == "crash":
                _replace(pool, worker, command)
            else:
                worker.case = None
        for worker in [w for w in pool if w.case is not None]:
            if time.monotonic() - worker.started > timeout:
                assert worker.case is not None
                yield Outcome(worker.case.id, command, "hang", None, "", "", "timed out")
                _replace(pool, worker, command)


def _replace(pool: list[_Worker], worker: _Worker, command: str) -> None:
    worker.kill()
    pool[pool.index(worker)] = _Worker(command)
