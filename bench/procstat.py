"""CPU seconds and memory of processes, read from /proc (Linux), and a sampler that records
them over a phase: the operator's peak RSS and CPU, and what the control plane spent meanwhile.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

__all__ = ["Sampler", "cpu_seconds", "peak_rss_bytes"]

_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (its threads included)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # After the command name: state is field 3, utime 14 and stime 15 (man 5 proc).
    return (int(fields[11]) + int(fields[12])) / _TICK


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def peak_rss_bytes(pid: int) -> int:
    """The kernel's high-water mark of the process's resident set (VmHWM)."""
    return _status_kib(pid, "VmHWM") * 1024


@dataclass
class Sample:
    t: float
    cpu: dict[str, float] = field(default_factory=dict)
    rss: dict[str, int] = field(default_factory=dict)


class Sampler:
    """Every `interval` seconds: CPU seconds and RSS of each named process, in a thread."""

    def __init__(self, pids: dict[str, int], interval: float = 1.0) -> None:
        self.pids = dict(pids)
        self.samples: list[Sample] = []
        self._interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _sample(self) -> Sample:
        s = Sample(time.time())
        for name, pid in self.pids.items():
            try:
                s.cpu[name] = cpu_seconds(pid)
                s.rss[name] = _status_kib(pid, "VmRSS") * 1024
            except OSError:
                continue  # the process has ended
        return s

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append(self._sample())
            self._stop.wait(self._interval)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.samples.append(self._sample())

    def cpu_between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds each process spent from the last sample at or before `start` to the
        first at or after `end`."""
        if not self.samples:
            return {}
        first = max((s for s in self.samples if s.t <= start), default=self.samples[0], key=_t)
        last = min((s for s in self.samples if s.t >= end), default=self.samples[-1], key=_t)
        return {n: last.cpu[n] - first.cpu.get(n, 0.0) for n in last.cpu}

    def peak_rss(self) -> dict[str, int]:
        peaks: dict[str, int] = {}
        for s in self.samples:
            for name, rss in s.rss.items():
                peaks[name] = max(peaks.get(name, 0), rss)
        return peaks


def _t(s: Sample) -> float:
    return s.t
