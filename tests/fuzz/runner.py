"""Run `t9kjobs validate` / `render` on every case, each in a forked child with a time and a
memory limit, and sort what came out: valid, refused (every line naming a field or a line of the
file), unreadable (one line, exit 2), or a failure (traceback, signal, hang, memory blow-up,
a line without a location).

Forking from a process that has imported the CLI and loaded the plugins costs a few
milliseconds, where a fresh `t9kjobs` process costs a few hundred: the whole corpus runs in about
a minute on two cores.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fuzz.generator import Case

__all__ = ["Outcome", "line_problem", "run_cases"]

TIMEOUT_SECONDS = 20.0
# Address space a child may add to what it inherits: a job the CLI would expand without bound
# (replicas: 2^31, an alias bomb) hits it as a MemoryError instead of taking the machine.
EXTRA_ADDRESS_SPACE = 1 << 30

# A problem line: `<file>[<doc>]: [warning: ]<field path>: <message>`, or for a problem of the
# YAML text itself `<file>:<line>:<column>: <message>`.
_FIELD = r"[A-Za-z0-9_$-][^\s:]*"
_LINE = re.compile(
    r"^(?P<file>[^:\[]+)(\[\d+\])?: (warning: )?" + _FIELD + r": \S"
    r"|^(?P<file2>[^:\[]+):\d+:\d+: \S"
)


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


def _classify(case_id: str, command: str, status: int, out: str, err: str) -> Outcome:
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        return Outcome(case_id, command, "crash", None, out, err, f"killed by {sig}")
    code = os.WEXITSTATUS(status)
    lines = [line for line in err.splitlines() if line.strip()]
    if (
        "Traceback (most recent call last)" in err
        or "internal error" in err
        or code
        not in (
            0,
            1,
            2,
        )
    ):
        return Outcome(case_id, command, "crash", code, out, err, "traceback")
    if code == 0:
        return Outcome(case_id, command, "valid", code, out, err)
    if code == 2:
        ok = len(lines) == 1
        return Outcome(
            case_id,
            command,
            "unreadable" if ok else "crash",
            code,
            out,
            err,
            "" if ok else "exit 2 must come with exactly one line",
        )
    if not lines:
        return Outcome(case_id, command, "crash", code, out, err, "exit 1 without a message")
    unlocated = [line for line in lines if not line_problem(line)]
    if unlocated:
        return Outcome(case_id, command, "crash", code, out, err, f"no location: {unlocated[0]}")
    return Outcome(case_id, command, "invalid", code, out, err)


def _child(command: str, path: str, out_fd: int, err_fd: int) -> None:
    """In the forked child: run the CLI and exit with its code (99 for an exception)."""
    os.dup2(out_fd, 1)
    os.dup2(err_fd, 2)
    sys.stdout = os.fdopen(1, "w", closefd=False)
    sys.stderr = os.fdopen(2, "w", closefd=False)
    code = 99
    try:
        soft = _address_space() + EXTRA_ADDRESS_SPACE
        resource.setrlimit(resource.RLIMIT_AS, (soft, soft))
        from t9kjobs.cli.main import main

        code = main([command, path])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        with contextlib.suppress(BaseException):
            traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _address_space() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    return 0


@dataclass
class _Running:
    case: Case
    command: str
    pid: int
    started: float
    out: tempfile._TemporaryFileWrapper[bytes]
    err: tempfile._TemporaryFileWrapper[bytes]


def _path_for(case: Case, workdir: Path, index: int) -> str:
    if case.special == "missing":
        return str(workdir / "does-not-exist.yaml")
    if case.special == "directory":
        return str(workdir)
    path = workdir / f"case-{index:05d}.yaml"
    path.write_bytes(case.text)
    return str(path)


def _finish(run: _Running, status: int, hung: bool) -> Outcome:
    run.out.seek(0)
    run.err.seek(0)
    out = run.out.read().decode(errors="replace")
    err = run.err.read().decode(errors="replace")
    run.out.close()
    run.err.close()
    if hung:
        return Outcome(run.case.id, run.command, "hang", None, out, err, "timed out")
    return _classify(run.case.id, run.command, status, out, err)


def run_cases(
    cases: Iterable[Case], command: str, *, workers: int = 2, timeout: float = TIMEOUT_SECONDS
) -> Iterator[Outcome]:
    """`t9kjobs <command> <file>` on every case, `workers` at a time; outcomes as they end."""
    from t9kjobs.manager import load_plugins

    load_plugins()  # warm: every child inherits the loaded plugins and compiled models
    pending = list(cases)
    running: dict[int, _Running] = {}
    with tempfile.TemporaryDirectory(prefix="t9kjobs-fuzz-") as tmp:
        workdir = Path(tmp)
        index = 0
        while pending or running:
            while pending and len(running) < workers:
                case = pending.pop(0)
                path = _path_for(case, workdir, index)
                index += 1
                # Open for as long as the child runs; `_finish` closes them.
                out = tempfile.TemporaryFile(dir=tmp)  # noqa: SIM115
                err = tempfile.TemporaryFile(dir=tmp)  # noqa: SIM115
                pid = os.fork()
                if pid == 0:
                    _child(command, path, out.fileno(), err.fileno())
                running[pid] = _Running(case, command, pid, time.monotonic(), out, err)
            pid, status = os.waitpid(-1, os.WNOHANG)
            if pid:
                yield _finish(running.pop(pid), status, hung=False)
                continue
            now = time.monotonic()
            for pid, run in list(running.items()):
                if now - run.started > timeout:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    yield _finish(running.pop(pid), 0, hung=True)
            time.sleep(0.002)
