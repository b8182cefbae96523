"""docs/plugin-guide.md: its generated sections match the code they document.

The guide's hook contracts, value types, builders, conformance contracts, versioning policy and
template listing are rendered by hack/gen_plugin_guide.py; this fails as soon as one of them
drifts from the code (a hook docstring edited, a contract added, the template changed).
"""

from __future__ import annotations

from types import ModuleType

from t9kjobs.hooks import JobHooks
from t9kjobs.testing.contracts import EXAMPLE_CONTRACTS, KIND_CONTRACTS, PLUGIN_CONTRACTS
from tests.unit.conftest import REPO
from tests.unit.hack_scripts import load_script


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
