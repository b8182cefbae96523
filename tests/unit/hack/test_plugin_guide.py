"""docs/plugin-guide.md: its generated sections match the code they document.

The guide's hook contracts and their worked examples, value types, shared models, builders,
conformance contracts, versioning policy and template listing are rendered by
hack/gen_plugin_guide.py, which runs the worked examples; this fails as soon as one of them
drifts from the code (a hook docstring edited, a hook answering otherwise, a model field
changed, a contract added, the template changed).
"""

from __future__ import annotations

from types import ModuleType

import pytest
from pydantic import BaseModel

from t9kjobs import models
from t9kjobs.hooks import JobHooks
from t9kjobs.testing.kit.contracts import EXAMPLE_CONTRACTS, KIND_CONTRACTS, PLUGIN_CONTRACTS
from tests.unit.conftest import REPO
from tests.unit.hack.hack_scripts import load_script


def generator() -> ModuleType:
    return load_script("gen_plugin_guide")


def test_the_guide_is_up_to_date() -> None:
    gen = generator()
    text = gen.GUIDE.read_text()
    assert gen.update(text) == text, (
        "docs/plugin-guide.md is stale: run `python hack/gen_plugin_guide.py` and review the diff"
    )


def test_every_hook_and_contract_is_in_the_guide() -> None:
    text = (REPO / "docs" / "plugin-guide.md").read_text()
    hooks = [name for name in vars(JobHooks) if name.startswith("t9kjobs_")]
    assert len(hooks) >= 9
    for name in hooks:
        assert f"### `{name}`" in text
    for contract in [*PLUGIN_CONTRACTS, *KIND_CONTRACTS, *EXAMPLE_CONTRACTS]:
        assert f"`test_{contract.name}`" in text


def test_a_changed_docstring_makes_the_guide_stale() -> None:
    gen = generator()
    text = gen.GUIDE.read_text()
    edited = text.replace("Declare the kinds this plugin serves", "Declare kinds", 1)
    assert edited != text
    assert gen.update(edited) == text


def test_every_hook_has_a_worked_example() -> None:
    examples = load_script("guide_examples").EXAMPLES
    hooks = [name for name in vars(JobHooks) if name.startswith("t9kjobs_")]
    assert sorted(examples) == sorted(hooks)
    text = (REPO / "docs" / "plugin-guide.md").read_text()
    assert text.count("**Worked example.**") == len(hooks)


def test_the_worked_examples_run_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    text = gen.GUIDE.read_text()
    plugin = load_script("guide_examples").namespace()["mpijob"]
    monkeypatch.setattr(plugin, "t9kjobs_compute_status", lambda replicas: None)
    assert gen.update(text) != text, "a hook answering otherwise must make the guide stale"


def test_every_shared_model_is_in_the_guide_field_by_field() -> None:
    text = (REPO / "docs" / "plugin-guide.md").read_text()
    exported = [getattr(models, name) for name in models.__all__]
    shared = [m for m in exported if isinstance(m, type) and issubclass(m, BaseModel)]
    assert len(shared) >= 20
    for model in shared:
        assert f"#### `{model.__name__}`" in text
    assert "| `backoffLimit` (`backoff_limit`) | `int` (≥ 0, ≤ 2147483647) | `3` |" in text


def test_a_changed_field_description_makes_the_guide_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    text = gen.GUIDE.read_text()
    monkeypatch.setattr(models.RunPolicy.model_fields["backoff_limit"], "description", "Changed.")
    assert gen.update(text) != text
