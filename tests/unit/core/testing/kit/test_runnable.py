"""The pure parts of the kit's run contracts: which host names resolve, which scripts a pod
runs, and what bash makes of an argument (`t9kjobs.testing.kit.runnable`, `shellwords`)."""

from __future__ import annotations

import shlex

import pytest

from t9kjobs.testing.kit.runnable import TRICKY_ARGUMENT, _carried, shell_script, unresolved
from t9kjobs.testing.kit.shellwords import words

_POD = {"kind": "Pod", "metadata": {"name": "j-worker-0", "labels": {"job": "j"}}}
_SERVICE = {
    "kind": "Service",
    "metadata": {"name": "j"},
    "spec": {"clusterIP": "None", "selector": {"job": "j"}},
}
CHILDREN = [{**_POD, "spec": {"subdomain": "j"}}, _SERVICE]


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("j-worker-0.j", None),
        ("j-worker-0.j.ns.svc.cluster.local", None),
        ("j.ns.svc", None),  # the Service itself
        ("j-ds-config.json", None),  # a file named after the job
        ("registry.example.com", None),  # not the job's
        ("j-worker-0.j-workers", "so j-worker-0.j-workers is no name of it"),
        ("j-worker-0.j.elsewhere", "not 'elsewhere'"),
        ("j-launcher.j", "j-launcher is no pod and no Service of the job"),
        ("j-worker-0", "a pod's bare name resolves only inside that pod"),
    ],
)
def test_which_host_names_resolve(host: str, why: str | None) -> None:
    found = unresolved(host, "j", "ns", CHILDREN)
    assert (found is None) if why is None else (found is not None and why in found), found


def test_a_subdomain_needs_a_headless_service_that_selects_the_pod() -> None:
    cluster_ip = {**_SERVICE, "spec": {**_SERVICE["spec"], "clusterIP": "10.0.0.1"}}
    unselected = {**_SERVICE, "spec": {"clusterIP": "None", "selector": {"job": "k"}}}
    for service in (cluster_ip, unselected):
        found = unresolved("j-worker-0.j", "j", "ns", [CHILDREN[0], service])
        assert found is not None and "no headless Service 'j'" in found
    without = unresolved("j-worker-0.j", "j", "ns", [{**_POD, "spec": {}}, _SERVICE])
    assert without is not None and "has no spec.subdomain" in without


@pytest.mark.parametrize(
    ("argv", "script"),
    [
        (["/bin/bash", "-c", "echo hi"], "echo hi"),
        (["sh", "-ec", "echo hi", "arg0"], "echo hi"),
        (["bash", "-x", "-c", "echo hi"], "echo hi"),
        (["python", "-c", "print()"], None),
        (["bash", "run.sh"], None),
        (["bash", "--norc", "run.sh"], None),
    ],
)
def test_the_script_of_a_shell_command(argv: list[str], script: str | None) -> None:
    assert shell_script(argv) == script


def test_bash_keeps_a_quoted_argument_whole_and_literal() -> None:
    quoted = "exec prog " + shlex.join(["--x", TRICKY_ARGUMENT])
    assert [w.text for w in words(quoted)] == ["exec", "prog", "--x", TRICKY_ARGUMENT]
    assert _carried(quoted, "t9kconformance", 1)
    joined = "exec prog " + " ".join(["--x", TRICKY_ARGUMENT])
    assert not _carried(joined, "t9kconformance", 3)


def test_a_double_quoted_dollar_is_an_expansion() -> None:
    [word] = words('"a $HOME b"')
    assert word.text == "a $HOME b" and not word.holds("$HOME")
    [single] = words("'a $HOME b'")
    assert single.holds("$HOME")


def test_an_argument_quoted_for_ssh_survives_two_shells() -> None:
    """`ssh host CMD`: the line is quoted once more for the remote shell (ColossalAIJob)."""
    remote = shlex.join(["torchrun", "train.py", TRICKY_ARGUMENT])
    local = "exec colossalai run " + shlex.quote(remote)
    assert not _carried(local, "t9kconformance", 1)
    assert _carried(local, "t9kconformance", 2)


def test_comments_and_operators_end_words() -> None:
    assert [w.text for w in words("a;b|c # d e\nf&&g")] == ["a", "b", "c", "f", "g"]
