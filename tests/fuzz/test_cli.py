"""`t9kjobs validate` and `render` on the whole corpus: never a crash, never a hang, a location
on every line of a refusal.

The corpus is over 3,000 generated manifests (tests/fuzz/generator.py); each command runs in a
forked child with a time and a memory limit, so a regression shows as a failure naming the
cases, not as a stuck or killed test run.
"""

from __future__ import annotations

from collections import Counter

from t9kjobs.manager import PluginManager
from tests.fuzz.generator import BASES, Case
from tests.fuzz.runner import Outcome, run_cases
from tests.fuzz.verdicts import cli_verdict

FAILURES = ("crash", "hang")


def _report(bad: list[Outcome]) -> str:
    lines = [f"{len(bad)} case(s):"]
    for o in bad[:20]:
        last = (o.stderr.strip().splitlines() or [""])[-1]
        lines.append(f"  {o.case_id}: {o.verdict} ({o.detail}) {last[:300]}")
    return "\n".join(lines)


def test_the_corpus_covers_every_kind_and_family(corpus: list[Case]) -> None:
    assert len(corpus) >= 1000
    kinds = Counter(c.kind for c in corpus)
    assert all(kinds[kind] >= 300 for kind in BASES), kinds
    families = {c.id.split(":", 2)[1].split("=")[0].split(".")[0] for c in corpus if c.kind}
    for family in ("spec", "metadata", "yaml", "encoding", "file", "conflict", "kind"):
        assert family in families, family


def test_the_bases_are_valid_so_each_mutation_is_the_only_fault(
    corpus: list[Case], manager: PluginManager
) -> None:
    for case in corpus:
        if case.id.endswith(":base"):
            assert cli_verdict(case, manager).outcome == "accept", case.id


def test_validate_never_crashes_hangs_or_refuses_without_a_location(
    validated: dict[str, Outcome],
) -> None:
    bad = [o for o in validated.values() if o.verdict in FAILURES]
    assert not bad, _report(bad)
    verdicts = Counter(o.verdict for o in validated.values())
    # Both answers occur: a corpus all refused (or all accepted) would test nothing.
    assert verdicts["valid"] > 100 and verdicts["invalid"] > 1000, verdicts


def test_render_never_crashes_or_hangs_and_renders_what_validate_accepts(
    corpus: list[Case], validated: dict[str, Outcome]
) -> None:
    # render reads files exactly as validate does: run it where the paths part, on every job
    # validate accepts (the planner runs) and every case of the file or its text.
    chosen = [c for c in corpus if validated[c.id].verdict == "valid" or not c.batchable]
    rendered = list(run_cases(chosen, "render"))
    bad = [o for o in rendered if o.verdict in FAILURES]
    assert not bad, _report(bad)
    differ = [o for o in rendered if o.verdict != validated[o.case_id].verdict]
    assert not differ, _report(differ)
