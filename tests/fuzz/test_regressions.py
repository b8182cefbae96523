"""One case for each crash, hang and false verdict that the issue's corpus found (#20), with the
answer `validate` and `render` must give now.

Each runs in a forked child with a time and a memory limit (tests/fuzz/runner.py): before the
fixes these crashed with a traceback, hung, aborted, or answered wrongly.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from tests.fuzz.generator import BASES, Case, dump, set_at, with_raw
from tests.fuzz.runner import Outcome, run_cases

GENERIC = BASES["GenericJob"]
TEMPLATE = ("spec", "replicaSpecs", 0, "template")
CONTAINER = (*TEMPLATE, "spec", "containers", 0)
REPLICAS = ("spec", "replicaSpecs", 0, "replicas")

# Nine levels of ten aliases each: 10^9 strings once expanded. Indented for a pod spec.
_BOMB = "".join(
    f"{' ' * 8}l{i}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(9)
)

# (case id, file bytes, verdict, text every command's stderr must contain)
REGRESSIONS: list[tuple[str, bytes, str, str]] = [
    # validate: tracebacks
    (
        "template-spec-not-a-mapping",
        dump(set_at(GENERIC, (*TEMPLATE, "spec"), "x")).encode(),
        "invalid",
        "template.spec: must be a mapping",
    ),
    (
        "containers-not-a-list",
        dump(set_at(GENERIC, (*TEMPLATE, "spec", "containers"), {"name": "a"})).encode(),
        "invalid",
        "containers: must be a list",
    ),
    (
        "container-not-a-mapping",
        dump(set_at(GENERIC, CONTAINER, "main")).encode(),
        "invalid",
        "containers[0]: must be a mapping",
    ),
    (
        "nesting-1000",
        with_raw(GENERIC, (*TEMPLATE, "spec", "x"), "[" * 1000 + "]" * 1000).encode(),
        "invalid",
        "nested deeper than",
    ),
    (
        "kind-a-mapping",
        dump({**GENERIC, "kind": {"name": "GenericJob"}}).encode(),
        "invalid",
        "kind: must be a string",
    ),
    ("utf-16", dump(GENERIC).encode("utf-16"), "valid", ""),
    (
        "invalid-utf-8",
        dump(GENERIC).replace("name: base", "name: b\xe9se").encode("latin-1"),
        "unreadable",
        "not UTF-8 text: byte 0xe9",
    ),
    # render: crashes and hangs
    ("replicas-2^31", dump(set_at(GENERIC, REPLICAS, 2**31)).encode(), "invalid", "<= 1000"),
    ("replicas-2^63", dump(set_at(GENERIC, REPLICAS, 2**63)).encode(), "invalid", "an integer"),
    (
        "replicas-10^30",
        with_raw(GENERIC, REPLICAS, "1" + "0" * 30).encode(),
        "invalid",
        "must be an integer",
    ),
    (
        # Inside a pod template, which keeps unknown fields: expanded by whatever walks it.
        "alias-bomb-10^9",
        with_raw(GENERIC, (*TEMPLATE, "spec", "bomb"), "BOMB")
        .replace("bomb: BOMB", "lol: &a [x, x, x, x, x, x, x, x, x, x]\n" + _BOMB)
        .encode(),
        "invalid",
        "excessive aliasing",
    ),
    (
        "literal-10^23",
        with_raw(
            GENERIC, ("spec", "replicaSpecs", 0, "restartPolicy", "limit"), "1" + "0" * 23
        ).encode(),
        "invalid",
        "must be an integer",
    ),
    (
        "self-referencing-anchor",
        dump(GENERIC).replace("spec:\n", "spec: &s\n  loop: *s\n", 1).encode(),
        "invalid",
        "contains itself",
    ),
    (
        "date-in-env-value",
        with_raw(GENERIC, (*CONTAINER, "env", 0, "value"), "2024-01-31").encode(),
        "valid",
        "",
    ),
    # validate: false positives
    ("replicas-1e1", with_raw(GENERIC, REPLICAS, "1e1").encode(), "valid", ""),
    (
        "clean-up-policy-null",
        dump(set_at(GENERIC, ("spec", "cleanUpPolicy"), None)).encode(),
        "valid",
        "",
    ),
    # validate: lax coercions the API server refuses
    (
        "replicas-quoted",
        dump(set_at(GENERIC, REPLICAS, "1")).encode(),
        "invalid",
        "replicas: must be an integer, got the string",
    ),
    (
        "yes-for-a-string",
        with_raw(GENERIC, (*CONTAINER, "env", 0, "value"), "yes").encode(),
        "invalid",
        "YAML reads an unquoted yes",
    ),
    (
        "33-replica-types",
        dump(
            set_at(
                GENERIC,
                ("spec", "replicaSpecs"),
                [
                    {"type": f"t{i}", "template": GENERIC["spec"]["replicaSpecs"][0]["template"]}
                    for i in range(33)
                ],
            )
        ).encode(),
        "invalid",
        "replicaSpecs",
    ),
    (
        "name-53-characters",
        dump(set_at(GENERIC, ("metadata", "name"), "a" * 53)).encode(),
        "invalid",
        "metadata.name",
    ),
    (
        "misspelt-field",
        dump(GENERIC).replace("cleanUpPolicy:", "cleanupPolicy:").encode(),
        "invalid",
        "did you mean `cleanUpPolicy`?",
    ),
    (
        "misspelt-value",
        dump(set_at(GENERIC, ("spec", "cleanUpPolicy"), "all")).encode(),
        "invalid",
        "did you mean `All`?",
    ),
]

MISSING = Case("missing-file", b"", special="missing")
DIRECTORY = Case("a-directory", b"", special="directory")


def _cases() -> list[Case]:
    return [Case(name, data) for name, data, _, _ in REGRESSIONS] + [MISSING, DIRECTORY]


@pytest.fixture(scope="module", params=["validate", "render"])
def outcomes(request: pytest.FixtureRequest) -> dict[str, Outcome]:
    return {o.case_id: o for o in run_cases(_cases(), request.param)}


@pytest.mark.parametrize(
    ("name", "verdict", "says"),
    [(n, v, s) for n, _, v, s in REGRESSIONS],
    ids=[n for n, _, _, _ in REGRESSIONS],
)
def test_each_crash_class_gets_its_answer(
    outcomes: dict[str, Outcome], name: str, verdict: str, says: str
) -> None:
    got = outcomes[name]
    assert (got.verdict, says in got.stderr) == (verdict, True), (got.detail, got.stderr[-800:])


def test_unreadable_files_get_one_line_and_exit_2(outcomes: dict[str, Outcome]) -> None:
    for case, says in ((MISSING, "No such file"), (DIRECTORY, "Is a directory")):
        got = outcomes[case.id]
        assert got.verdict == "unreadable" and got.exit_code == 2, got
        assert len(got.stderr.strip().splitlines()) == 1 and says in got.stderr, got.stderr


def test_scalars_reach_render_as_kubectl_sends_them() -> None:
    chosen = [c for c in _cases() if c.id in ("replicas-1e1", "date-in-env-value")]
    got = {o.case_id: o for o in run_cases(chosen, "render")}
    pods = [o for o in yaml.safe_load_all(got["replicas-1e1"].stdout) if o["kind"] == "Pod"]
    assert len(pods) == 10
    objects: list[dict[str, Any]] = list(yaml.safe_load_all(got["date-in-env-value"].stdout))
    pod = next(o for o in objects if o["kind"] == "Pod")
    env = pod["spec"]["containers"][0]["env"]
    assert {"name": "GREETING", "value": "2024-01-31"} in env, json.dumps(env)
