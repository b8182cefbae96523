"""The conformance kit on feature plugins (no kind of their own): a good one passes the feature
contracts on its examples of a bundled kind; one that creates a kind it does not declare, or
declares a malformed option, fails the contract that says so."""

from __future__ import annotations

import textwrap

import pytest

from tests.unit.core.testing.kit_runs import install_plugin, run_kit

pytest_plugins = ["pytester"]

FEATURE = '''
"""A feature plugin: a ConfigMap-free, made-up `Budget` per job, declared as a child kind."""

from t9kjobs.plugin import ChildKind, Option, hookimpl, owner_labels, owner_reference

API_VERSION = "example.com/v1"


class Budgets:
    def __init__(self, least):
        self.least = least

    @hookimpl
    def t9kjobs_child_kinds(self):
        return [ChildKind(API_VERSION, "Budget", "budgets")]

    @hookimpl
    def t9kjobs_build_auxiliary_objects(self, job, pods):
        meta = {"name": job.name, "namespace": job.namespace, "labels": owner_labels(job),
                "ownerReferences": [owner_reference(job)]}
        return [{"apiVersion": API_VERSION, "kind": "Budget", "metadata": meta,
                 "spec": {"least": self.least}}]


@hookimpl
def t9kjobs_options():
    return [Option("budget-least", "the least pods a budget keeps", default="1")]


@hookimpl
def t9kjobs_configure(options):
    return Budgets(int(options["budget-least"]))
'''

GENERIC = """
apiVersion: batch.tensorstack.dev/v1beta1
kind: GenericJob
metadata:
  name: g
spec:
  successRules: [{"worker": [0]}]
  replicaSpecs:
    - type: worker
      replicas: 2
      template:
        spec:
          containers: [{name: main, image: busybox, command: [sh, -c, "true"]}]
"""

FEATURE_CONTRACTS = {
    "test_loads_through_entry_point",
    "test_declares_options_and_child_kinds",
    *(
        f"test_{name}[job.yaml]"
        for name in (
            "example_is_valid",
            "hooks_do_no_io",
            "children_carry_owner_labels_and_references",
            "children_are_of_declared_kinds",
        )
    ),
}


def _kit(pytester: pytest.Pytester, name: str, source: str) -> tuple[set[str], dict[str, str]]:
    install_plugin(pytester, name, textwrap.dedent(source))
    (pytester.path / "examples").mkdir()
    (pytester.path / "examples" / "job.yaml").write_text(GENERIC)
    run = run_kit(pytester, name)
    return run.passed, run.failed


def test_a_good_feature_plugin_passes_the_feature_contracts(pytester: pytest.Pytester) -> None:
    passed, failed = _kit(pytester, "feat_good", FEATURE)
    assert failed == {}
    assert passed == FEATURE_CONTRACTS


def test_a_child_of_an_undeclared_kind_fails(pytester: pytest.Pytester) -> None:
    undeclared = FEATURE.replace(
        'return [ChildKind(API_VERSION, "Budget", "budgets")]', "return []"
    )
    passed, failed = _kit(pytester, "feat_undeclared", undeclared)
    report = failed["test_children_are_of_declared_kinds[job.yaml]"]
    assert "Budget g is of a kind no plugin declares (t9kjobs_child_kinds)" in report
    assert "test_declares_options_and_child_kinds" in passed


def test_a_malformed_option_fails(pytester: pytest.Pytester) -> None:
    bad = FEATURE.replace('Option("budget-least"', 'Option("Budget_Least"').replace(
        'options["budget-least"]', 'options["Budget_Least"]'
    )
    _, failed = _kit(pytester, "feat_bad_option", bad)
    report = failed["test_declares_options_and_child_kinds"]
    assert "option 'Budget_Least': a flag name is lowercase words and dashes" in report
