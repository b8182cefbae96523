"""bench/recovery.py's table (docs/benchmarks.md, "Recovery"): min / median / max per scenario,
of the right runs, in the scenarios' order; a scenario not run has no row."""

from __future__ import annotations

from bench.recovery import table


def run(scenario: str, gone: float, running: float) -> dict[str, object]:
    return {"scenario": scenario, "lost_pod_gone_s": gone, "replacement_running_s": running}


def test_the_table_gives_min_median_max_of_each_scenario() -> None:
    runs = [
        run("deleted", 0.4, 2.0),
        run("unreachable", 10.2, 11.0),
        run("unreachable", 9.6, 13.5),
        run("unreachable", 10.9, 12.1),
        run("deleted", 0.2, 1.5),
    ]
    rows = table(runs, 10).splitlines()
    assert rows[0].startswith("`--lost-node-seconds 10`")
    body = [r for r in rows if r.startswith("| ") and "---" not in r][1:]
    assert body == [
        "| unreachable | 3 | 9.6 / 10.2 / 10.9 | 11.0 / 12.1 / 13.5 |",
        "| deleted | 2 | 0.2 / 0.3 / 0.4 | 1.5 / 1.8 / 2.0 |",
    ]
