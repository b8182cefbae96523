"""The scale and steady-state series (`make bench-scale`, not in CI): the burst of
bench/scale.py at several sizes, ours and the training operator (with a time limit) in each
run, then jobs arriving as a Poisson process at fractions of the capacity measured at the
smallest size, for our operator alone.

    python -m bench.series [--sizes 2000,5000,10000] [--steady 0.5,0.8] --out DIR
    python -m bench.series --report --out DIR     # the tables and plots of what DIR holds

Each run is a `python -m bench` run into DIR/jobs-<N>/ or DIR/steady-<percent>/ (its own
results.json, summary.md, pods.png); the series writes DIR/series.md, DIR/scale.png and
DIR/costs.png.
Capacity is jobs a second from submission to every job Succeeded, in our phase of the smallest
size (`--capacity` gives it instead).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any, NamedTuple

from bench import scale
from bench.report import NONE
from t9kjobs.vocabulary import Obj

__all__ = ["main"]


def _load(path: Path) -> Obj | None:
    results = path / "results.json"
    return json.loads(results.read_text()) if results.exists() else None


def _phase(run: Obj, key: str) -> Obj | None:
    return next((r for r in run["results"] if r["phase"] == key and "error" not in r), None)


def capacity(run: Obj) -> float:
    """Jobs a second our operator finished in a burst: jobs / time until all Succeeded."""
    ours = _phase(run, "ours")
    if ours is None or not ours.get("all_jobs_succeeded_s"):
        raise SystemExit("no finished `ours` phase to measure the capacity from")
    return float(run["jobs"] / ours["all_jobs_succeeded_s"])


def _num(value: Any, digits: int = 1) -> str:
    return NONE if value is None else f"{value:.{digits}f}"


def _pair(result: Obj, key: str) -> str:
    """`p50 / p99` of a latency figure."""
    return f"{_num(result.get(f'{key}_p50_s'), 2)} / {_num(result.get(f'{key}_p99_s'), 2)}"


def scale_rows(runs: list[Obj]) -> list[str]:
    """One line a size and operator: the scale table."""
    lines = [
        "| jobs x pods | operator | pods created | all pods exist (s) | all Succeeded (s)"
        " | peak RSS (MiB) | CPU (s) | CPU per job (ms) | requests per job | job → last pod"
        " p50 / p99 (s) | master done → Succeeded p50 / p99 (s) |",
        "| --- | --- |" + " ---: |" * 9,
    ]
    for run in runs:
        for r in run["results"]:
            if "error" in r:
                lines.append(
                    f"| {run['jobs']} x {run['replicas']} | {r['title']} | failed: "
                    f"{r['error'][:80]} |" + " |" * 8
                )
                continue
            if r.get("timed_out"):
                lines.append(_stopped_row(run, r))
                continue
            succeeded = (
                f"{_num(r.get('all_jobs_succeeded_s'))} ({r.get('jobs_succeeded')} Succeeded)"
                if r["phase"] != "raw"
                else NONE
            )
            lines.append(
                f"| {run['jobs']} x {run['replicas']} | {r['title']}"
                f" | {r.get('pods_seen')} | {_num(r.get('all_pods_exist_s'))} | {succeeded}"
                f" | {_num(r.get('peak_rss_mib'), 0)} | {_num(r.get('cpu_s'))}"
                f" | {_num(1000 * r['cpu_s'] / run['jobs'], 1) if r.get('cpu_s') else NONE}"
                f" | {_num(r.get('requests_per_job'))}"
                f" | {_pair(r, 'job_to_last_pod')} | {_pair(r, 'master_to_succeeded')} |"
            )
    return lines


def _stopped_row(run: Obj, r: Obj) -> str:
    """A phase stopped at its time limit: what it had done by then. Its per-job figures are
    left out (they would divide the work of the jobs it reached by every job submitted), and
    so are its latencies (taken over the jobs that got that far)."""
    limit = r["end_s"]
    pods = sum(1 for t in r.get("pod_times", []) if t <= limit)
    return (
        f"| {run['jobs']} x {run['replicas']} | {r['title']}, stopped at its {limit:.0f} s limit"
        f" | {pods} by then | {NONE} | {NONE} ({r.get('jobs_succeeded')} Succeeded)"
        f" | {_num(r.get('peak_rss_mib'), 0)} | {_num(r.get('cpu_s'))} | {NONE} | {NONE}"
        f" | {NONE} | {NONE} |"
    )


def steady_rows(runs: list[tuple[str, Obj]]) -> list[str]:
    lines = [
        "| load | arrival rate (jobs/s) | jobs | job created → all its pods, p50 / p99 (s)"
        " | master done → job Succeeded, p50 / p99 (s) | peak RSS (MiB) | CPU per job (ms) |",
        "| --- |" + " ---: |" * 6,
    ]
    for label, run in runs:
        r = _phase(run, "ours")
        if r is None:
            continue
        lines.append(
            f"| {label} | {run['arrival_rate']:.2f} | {run['jobs']}"
            f" | {_pair(r, 'job_to_last_pod')} | {_pair(r, 'master_to_succeeded')}"
            f" | {_num(r.get('peak_rss_mib'), 0)} | {_num(1000 * r['cpu_s'] / run['jobs'], 1)} |"
        )
    return lines


# The processes of `control_plane_cpu_s`, in the order of the cost table.
PROCESSES = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "etcd",
    "bench",
    "operator",
)


class Costs(NamedTuple):
    """One run's figures of the cost table: CPU ms a pod by process (None: not sampled), in
    all, and the operator's CPU ms a pod event."""

    jobs: int
    per_pod: dict[str, float | None]
    all: float
    per_event: float | None


def costs(run: Obj) -> Costs | None:
    """What a pod cost each process of the machine in our phase of the run (CPU from the
    first submission to the last job's verdict, over every pod; `all` is the processes listed,
    without a profiler's), and the operator's CPU over the pod events the control plane sent.
    The second shows whether the operator's cost follows its work: the events a pod gets grow
    with how long the control plane keeps it (the pod collector starts past 12,500 ended
    pods), and every watcher of pods pays for them, the benchmark's own watcher too. None for
    a run without a finished phase of ours."""
    r = _phase(run, "ours")
    if r is None or r.get("timed_out") or not r.get("pods_seen"):
        return None
    pods = r["pods_seen"]
    cpu = r.get("control_plane_cpu_s") or {}
    per_pod = {n: None if cpu.get(n) is None else 1000 * cpu[n] / pods for n in PROCESSES}
    events = r.get("pod_events_per_pod")
    operator = per_pod["operator"]
    return Costs(
        jobs=run["jobs"],
        per_pod=per_pod,
        all=sum(v for v in per_pod.values() if v is not None),
        per_event=operator / events if operator is not None and events else None,
    )


def cost_rows(runs: list[Obj]) -> list[str]:
    """`costs` of each run, a line each: the cost table."""
    lines = [
        "| jobs x pods | all Succeeded (s) | pod events a pod | "
        + " | ".join(PROCESSES)
        + " | all | operator CPU a pod event (ms) |",
        "| --- |" + " ---: |" * (len(PROCESSES) + 4),
    ]
    for run in runs:
        c = costs(run)
        if c is None:
            continue
        r = _phase(run, "ours")
        assert r is not None
        lines.append(
            f"| {run['jobs']} x {run['replicas']} | {_num(r.get('all_jobs_succeeded_s'), 0)}"
            f" | {_num(r.get('pod_events_per_pod'), 2)} | "
            + " | ".join(_num(c.per_pod[n]) for n in PROCESSES)
            + f" | {_num(c.all)} | {_num(c.per_event, 2)} |"
        )
    return lines


def plot_scale(runs: list[Obj], path: Path) -> None:
    """Peak RSS, CPU per job and the p99 latencies against the number of jobs, per operator."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 4), dpi=110)
    by_title: dict[str, list[tuple[int, Obj]]] = {}
    for run in runs:
        for r in run["results"]:
            finished = "error" not in r and not r.get("timed_out")
            if finished and r.get("peak_rss_mib") is not None:  # the raw client has no RSS
                by_title.setdefault(r["title"], []).append((run["jobs"], r))
    for title, points in by_title.items():
        jobs = [n for n, _ in points]
        axes[0].plot(jobs, [r["peak_rss_mib"] for _, r in points], "o-", label=title)
        axes[1].plot(jobs, [1000 * r["cpu_s"] / n for n, r in points], "o-", label=title)
        axes[2].plot(
            jobs,
            [r["job_to_last_pod_p99_s"] for _, r in points],
            "o-",
            label=f"{title}: job → last pod",
        )
        axes[2].plot(
            jobs,
            [r["master_to_succeeded_p99_s"] for _, r in points],
            "s--",
            label=f"{title}: master → Succeeded",
        )
    for ax, label in zip(
        axes,
        ("operator peak RSS (MiB)", "operator CPU per job (ms)", "p99 latency (s)"),
        strict=True,
    ):
        ax.set_xlabel("jobs submitted at once (x 4 pods)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=7)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def plot_costs(runs: list[Obj], path: Path) -> None:
    """`cost_rows` as a plot: each process's CPU a pod against the jobs of the burst, and
    the operator's CPU a pod event."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [c for run in runs if (c := costs(run)) is not None]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4), dpi=110)
    for name in PROCESSES:
        sampled = [c for c in points if c.per_pod[name] is not None]
        axes[0].plot(
            [c.jobs for c in sampled],
            [c.per_pod[name] for c in sampled],
            "s-" if name == "operator" else "o--",
            linewidth=2.5 if name == "operator" else 1.0,
            label=name,
        )
    counted = [c for c in points if c.per_event is not None]
    axes[1].plot(
        [c.jobs for c in counted],
        [c.per_event for c in counted],
        "s-",
        linewidth=2.5,
        label="operator CPU a pod event",
    )
    for ax, label in zip(
        axes, ("CPU a pod (ms), our phase", "operator CPU a pod event (ms)"), strict=True
    ):
        ax.set_xlabel("jobs submitted at once (x 4 pods)")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def report(out: Path) -> str:
    sized = sorted(
        (run for d in out.glob("jobs-*") if (run := _load(d)) is not None), key=lambda r: r["jobs"]
    )
    steady = sorted(
        (d.name.removeprefix("steady-") + "% of capacity", run)
        for d in out.glob("steady-*")
        if (run := _load(d)) is not None
    )
    parts = [
        "## Scale",
        "",
        *scale_rows(sized),
        "",
        "## What a pod costs each process, CPU in ms (ours)",
        "",
        *cost_rows(sized),
        "",
        "## Steady state",
        "",
        *steady_rows(steady),
    ]
    text = "\n".join(parts) + "\n"
    (out / "series.md").write_text(text)
    if sized:
        plot_scale(sized, out / "scale.png")
        plot_costs(sized, out / "costs.png")
    return text


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.series", description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="2000,5000,10000", help="jobs per burst (2000,5000,10000)")
    p.add_argument("--phases", default="ours,to-qps", help="phases of each size (ours,to-qps)")
    p.add_argument(
        "--kubeflow-timeout",
        type=float,
        default=600,
        help="the training operator's time limit (600)",
    )
    p.add_argument(
        "--steady", default="0.5,0.8", help="fractions of capacity (0.5,0.8); '' for none"
    )
    p.add_argument("--steady-seconds", type=float, default=300, help="arrivals last (300 s)")
    p.add_argument("--capacity", type=float, help="jobs/s; default: measured at the smallest size")
    p.add_argument(
        "--phase-timeout",
        type=float,
        default=3600,
        help="seconds one of our phases may take (3600: 10,000 jobs take about 25 min here)",
    )
    p.add_argument(
        "--profile-largest",
        action="store_true",
        help="sample our operator with py-spy in the largest size (skews its figures a little)",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--report", action="store_true", help="only the tables and plots of --out")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    if not args.report:
        sizes = sorted(int(n) for n in args.sizes.split(",") if n)
        fractions = [float(f) for f in args.steady.split(",") if f]
        rate = args.capacity
        for i, jobs in enumerate(sizes):
            profile = ["--profile"] if args.profile_largest and jobs == sizes[-1] else []
            scale.main(
                [
                    f"--jobs={jobs}",
                    f"--phases={args.phases}",
                    f"--phase-timeout={args.phase_timeout}",
                    f"--kubeflow-timeout={args.kubeflow_timeout}",
                    f"--out={out / f'jobs-{jobs}'}",
                    *profile,
                ]
            )
            if i == 0:  # the steady state before the larger sizes: they run last
                run = _load(out / f"jobs-{jobs}")
                rate = rate or (capacity(run) if run else None)
                for fraction in fractions:
                    assert rate is not None
                    scale.main(
                        [
                            "--phases=ours",
                            f"--phase-timeout={args.phase_timeout}",
                            f"--arrival-rate={fraction * rate:.3f}",
                            f"--arrival-seconds={args.steady_seconds}",
                            f"--out={out / f'steady-{round(100 * fraction)}'}",
                        ]
                    )
    print(report(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
