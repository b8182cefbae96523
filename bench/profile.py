"""Summary of a py-spy profile of the operator (`--format raw --threads --idle`): for each
group of threads (reconcile workers, informers, the rest), where their time goes, inclusive
and by leaf frame. `python -m bench.profile PROFILE.txt [--top 25] [--busy | --shares]`.

`--busy` keeps only the samples of a thread on the CPU (its leaf frame is not a wait: a socket
read, a lock or condition, a sleep, a poll) and puts every thread in one group: where the
operator's CPU goes, rather than where its threads wait. `--shares` sums the same samples
into the table of docs/benchmarks.md: by group of threads, and by what the code on the CPU was
doing (the first of `COSTS` whose files are on the stack).
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

__all__ = ["COSTS", "shares", "summarize"]

_THREAD = re.compile(r"^thread \(\w+\): ([^;]+);")
_LOCATION = re.compile(r" \((.*?):\d+\)$")


def _group(thread: str) -> str:
    return re.sub(r"[-_]\d+$", "-*", thread)  # worker-3, create_12 (a pool's thread)


def _function(frame: str) -> str:
    """`Reconciler.reconcile (core/controller/reconciler.py:86)` -> without the line."""
    return _LOCATION.sub(lambda m: f" ({m.group(1)})", frame)


# Leaf frames of a thread that waits (py-spy --idle samples them too).
_WAITS = re.compile(
    r"^(SSLSocket\.(read|recv_into)|socket\.recv|Condition\.wait|Event\.wait|Lock\.acquire"
    r"|_PollLikeSelector\.select|poll_wait_for_socket\.<locals>\.do_poll|sleep"
    r"|Thread\.join|Queue\.get|_worker|SocketIO\.readinto|Handler\.acquire) "
)


# What the code on the CPU was doing, by the files on its stack; the first that matches counts.
COSTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("planning (core/planner)", ("core/planner/",)),
    ("parsing and validating the job", ("core/loading.py", "pydantic")),
    ("logging", ("logging/",)),
    ("the HTTP client (urllib3, TLS, http.client)", ("urllib3/", "ssl.py", "http/client.py")),
    ("decoding and encoding JSON", ("json/",)),
)


def _stacks(text: str) -> list[tuple[str, list[str], int]]:
    """(thread group, frames, samples) of every stack in a py-spy raw profile."""
    out = []
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        match = _THREAD.match(stack)
        if match and count.isdigit():
            frames = [_function(f) for f in stack[match.end() :].split(";") if f]
            out.append((_group(match.group(1)), frames, int(count)))
    return out


def _on_cpu(frames: list[str]) -> bool:
    """The thread was running, not waiting (its leaf frame is not a wait)."""
    return bool(frames) and not _WAITS.match(frames[-1])


def shares(text: str) -> str:
    """The operator's CPU samples by thread group and by cost (a markdown table each)."""
    stacks = [s for s in _stacks(text) if _on_cpu(s[1])]
    total = sum(n for _, _, n in stacks) or 1
    groups: Counter[str] = Counter()
    costs: Counter[str] = Counter()
    for group, frames, n in stacks:
        groups[group] += n
        joined = ";".join(frames)
        costs[next((c for c, files in COSTS if any(f in joined for f in files)), "the rest")] += n
    lines = [f"{total} samples on the CPU", "", "| thread group | share |", "| --- | ---: |"]
    lines += [f"| {g} | {100 * n / total:.0f}% |" for g, n in groups.most_common()]
    lines += ["", "| cost | share |", "| --- | ---: |"]
    lines += [f"| {c} | {100 * n / total:.0f}% |" for c, n in costs.most_common()]
    return "\n".join(lines)


def summarize(text: str, top: int = 25, busy: bool = False) -> str:
    samples: Counter[str] = Counter()
    inclusive: dict[str, Counter[str]] = {}
    leaves: dict[str, Counter[str]] = {}
    for thread_group, frames, n in _stacks(text):
        if busy and not _on_cpu(frames):
            continue
        group = "on the CPU (every thread)" if busy else thread_group
        samples[group] += n
        inc = inclusive.setdefault(group, Counter())
        for f in set(frames):
            inc[f] += n
        leaves.setdefault(group, Counter())[frames[-1] if frames else "?"] += n
    out = []
    for group, total in samples.most_common():
        out.append(f"== {group}: {total} samples")
        out.append("  inclusive:")
        for f, n in inclusive[group].most_common(top):
            out.append(f"    {100 * n / total:5.1f}%  {f}")
        out.append("  leaf:")
        for f, n in leaves[group].most_common(top // 2):
            out.append(f"    {100 * n / total:5.1f}%  {f}")
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--busy", action="store_true", help="only samples on the CPU, all threads")
    p.add_argument("--shares", action="store_true", help="the CPU samples' shares, as tables")
    args = p.parse_args()
    text = args.profile.read_text()
    print(shares(text) if args.shares else summarize(text, args.top, args.busy))


if __name__ == "__main__":
    main()
