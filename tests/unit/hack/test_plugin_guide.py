"""docs/plugin-guide.md and docs/plugin-reference.md: generated from the code, linked by anchors.

The reference (every hook's contract and worked example, the value types, shared models,
builders and conformance contracts) is rendered whole by hack/gen_plugin_guide.py, which runs the
worked examples, and so are the guide's generated sections (the versioning policy, its links to
the reference): this fails as soon as one of them drifts from the code (a hook docstring edited,
a hook answering otherwise, a model field changed, a contract added). The guide is read by hand:
it names hooks and value types by links to their headings in the reference, links to the plugin
template instead of copying it, and every link into either document lands on an anchor.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel

from t9kjobs import kinds, models, objects
from t9kjobs.hooks import JobHooks
from t9kjobs.testing.kit.contracts import (
    EXAMPLE_CONTRACTS,
    INVALID_CONTRACTS,
    KIND_CONTRACTS,
    PLUGIN_CONTRACTS,
)
from tests.repo import REPO
from tests.unit.hack.hack_scripts import load_script

DOCS = REPO / "docs"
GUIDE = DOCS / "plugin-guide.md"
REFERENCE = DOCS / "plugin-reference.md"
TEMPLATE = REPO / "examples" / "plugin-template"
HOOKS = [name for name in vars(JobHooks) if name.startswith("t9kjobs_")]


def generator() -> ModuleType:
    return load_script("gen_plugin_guide")


# --- reading Markdown as GitHub does (independently of the generator) ------------------------

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_GENERATED = re.compile(r"<!-- BEGIN GENERATED: ([\w-]+) -->\n.*?<!-- END GENERATED: \1 -->", re.S)


def fenced_blocks(text: str) -> list[str]:
    return [m.group(1) for m in re.finditer(r"^```[^\n]*\n(.*?)^```", text, re.S | re.M)]


def github_slug(heading: str) -> str:
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def headings(text: str) -> dict[str, str]:
    """anchor → heading text, as GitHub names them (`-1`, `-2`... for a repeated one)."""
    found: dict[str, str] = {}
    for match in re.finditer(r"^#{1,6} (.+)$", _FENCE.sub("", text), re.M):
        anchor = base = github_slug(match.group(1))
        count = 0
        while anchor in found:
            count += 1
            anchor = f"{base}-{count}"
        found[anchor] = match.group(1)
    return found


def explicit_anchors(text: str) -> list[str]:
    return re.findall(r'<a (?:id|name)="([^"]+)"', _FENCE.sub("", text))


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    return set(headings(text)) | set(explicit_anchors(text))


def link_targets(text: str) -> Iterator[str]:
    """The targets of the inline links and link definitions of `text`, outside code blocks."""
    prose = _FENCE.sub("", text)
    prose = re.sub(r"`[^`\n]*`", lambda m: " " * len(m.group(0)), prose)  # code spans
    yield from re.findall(r"\]\(([^)\s]+)\)", prose)
    yield from re.findall(r"^\[[^\]]+\]:\s*(\S+)", prose, re.M)


# --- generated from the code --------------------------------------------------------------


def test_both_documents_are_up_to_date() -> None:
    for path, text in generator().fresh().items():
        assert path.read_text() == text, (
            f"{path.relative_to(REPO)} is stale: run `python hack/gen_plugin_guide.py` (make"
            " plugin-guide) and review the diff"
        )


def test_check_fails_when_either_document_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gen = generator()
    reference = gen.render_reference()
    monkeypatch.setattr(gen, "render_reference", lambda: reference)
    for name in ("GUIDE", "REFERENCE"):
        copy = tmp_path / getattr(gen, name).name
        copy.write_text(getattr(gen, name).read_text())
        monkeypatch.setattr(gen, name, copy)
    assert gen.main(["--check"]) == 0
    # the reference is generated whole; the guide, in its sections (its links here)
    edits = {gen.GUIDE: "plugin-reference.md#kindinfo\n", gen.REFERENCE: "hook"}
    for doc, before in edits.items():
        text = doc.read_text()
        assert before in text
        doc.write_text(text.replace(before, before.upper(), 1))
        assert gen.main(["--check"]) == 1
        assert f"{doc} is stale" in capsys.readouterr().err
        doc.write_text(text)
    assert gen.main(["--check"]) == 0


def test_every_hook_and_contract_is_in_the_reference() -> None:
    text = REFERENCE.read_text()
    assert len(HOOKS) >= 9
    for name in HOOKS:
        assert f"### `{name}`" in text
    for found in (PLUGIN_CONTRACTS, KIND_CONTRACTS, EXAMPLE_CONTRACTS, INVALID_CONTRACTS):
        for contract in found:
            assert f'<a id="test_{contract.name}"></a>`test_{contract.name}`' in text


def test_a_changed_docstring_makes_the_reference_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    text = REFERENCE.read_text()
    assert "Declare the kinds this plugin serves" in text
    doc = JobHooks.t9kjobs_kinds.__doc__ or ""
    monkeypatch.setattr(JobHooks.t9kjobs_kinds, "__doc__", doc.replace("the kinds", "kinds", 1))
    assert gen.render_reference() != text


def test_the_guide_s_generated_sections_are_rewritten() -> None:
    gen = generator()
    text = GUIDE.read_text()
    reference = REFERENCE.read_text()
    edited = text.replace("The hook API (the hookspecs here", "The hook API (hookspecs", 1)
    edited = edited.replace("[`KindInfo`]: plugin-reference.md#kindinfo\n", "", 1)
    assert edited.count("[`KindInfo`]") == text.count("[`KindInfo`]") - 1
    assert gen.update(edited, reference) == text


def test_a_guide_link_to_a_name_the_reference_lacks_is_an_error() -> None:
    gen = generator()
    text = GUIDE.read_text().replace("[`KindInfo`]", "[`KindInfos`]", 1)
    with pytest.raises(SystemExit, match="KindInfos"):
        gen.update(text, REFERENCE.read_text())


def test_every_hook_has_a_worked_example() -> None:
    examples = load_script("guide_examples").EXAMPLES
    assert sorted(examples) == sorted(HOOKS)
    assert REFERENCE.read_text().count("**Worked example.**") == len(HOOKS)


def test_the_worked_examples_run_the_hooks(monkeypatch: pytest.MonkeyPatch) -> None:
    gen = generator()
    plugin = load_script("guide_examples").namespace()["mpijob"]
    monkeypatch.setattr(plugin, "t9kjobs_compute_status", lambda replicas: None)
    assert gen.render_reference() != REFERENCE.read_text(), (
        "a hook answering otherwise must make the reference stale"
    )


def _shared_models() -> list[type[BaseModel]]:
    exported = [getattr(models, name) for name in models.__all__]
    return [m for m in exported if isinstance(m, type) and issubclass(m, BaseModel)]


def test_every_shared_model_is_in_the_reference_field_by_field() -> None:
    text = REFERENCE.read_text()
    shared = _shared_models()
    assert len(shared) >= 20
    for model in shared:
        assert f"#### `{model.__name__}`" in text
    assert "| `backoffLimit` (`backoff_limit`) | `int` (≥ 0, ≤ 2147483647) | `3` |" in text


def test_a_changed_field_description_makes_the_reference_stale(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    gen = generator()
    monkeypatch.setattr(models.RunPolicy.model_fields["backoff_limit"], "description", "Changed.")
    assert gen.render_reference() != REFERENCE.read_text()


# --- every hook and value type is a heading -------------------------------------------------


def _classes(annotation: Any) -> Iterator[type]:
    if isinstance(annotation, type) and not typing.get_args(annotation):
        yield annotation
    for arg in typing.get_args(annotation):
        yield from _classes(arg)


def value_types() -> list[type]:
    """The classes of the hook API: what `t9kjobs.kinds` exports, `DesiredPod`, `Lifecycle`,
    and every class of t9k-jobs a hookspec takes or returns."""
    found: list[type] = [getattr(kinds, name) for name in kinds.__all__]
    found += [objects.DesiredPod, models.Lifecycle]
    for name in HOOKS:
        for annotation in typing.get_type_hints(getattr(JobHooks, name)).values():
            found += [c for c in _classes(annotation) if c.__module__.startswith("t9kjobs.")]
    return list(dict.fromkeys(t for t in found if isinstance(t, type)))


def test_every_hook_and_value_type_has_a_heading_in_the_reference() -> None:
    found = headings(REFERENCE.read_text())
    for name in HOOKS:
        assert found.get(name) == f"`{name}`", f"no heading `### {name}` (#{name})"
    types = value_types()
    assert {"KindInfo", "Problem", "ReplicaState", "Verdict", "DesiredPod", "Job"} <= {
        t.__name__ for t in types
    }
    named = [*types, *_shared_models()]
    for t in named:
        anchor = t.__name__.lower()
        assert found.get(anchor) == f"`{t.__name__}`", f"no heading for {t.__name__} (#{anchor})"
    assert found.get("obj") == "`Obj`"  # objects.Obj, the alias of every hook's objects


def test_every_builder_and_models_name_has_an_anchor_in_the_reference() -> None:
    text = REFERENCE.read_text()
    found = headings(text)
    for module, names in generator().BUILDERS:
        assert found.get(github_slug(f"`{module.__name__}`")) == f"`{module.__name__}`"
        for name in names:
            assert found.get(name) == f"`{name}`", f"no heading for {module.__name__}.{name}"
    ids = explicit_anchors(text)
    for name in models.__all__:
        value = getattr(models, name)
        if typing.get_origin(value) in (typing.Literal, typing.Annotated):  # a type alias
            assert name.lower() in ids, f"no anchor for the type alias {name}"


def test_the_reference_s_anchors_are_unique_and_indexed() -> None:
    text = REFERENCE.read_text()
    found = headings(text)
    ids = explicit_anchors(text)
    assert len(ids) == len(set(ids))
    assert not set(ids) & set(found), "an explicit anchor shadows a heading's"
    repeated = [a for a in found if re.search(r"-\d+$", a) and a.rsplit("-", 1)[0] in found]
    assert not repeated, f"headings with the same anchor: {repeated}"
    index = text[text.index("Contents:") : text.index("\n## ")]
    linked = set(re.findall(r"\]\(#([^)]+)\)", index))
    assert linked == set(found) - {"plugin-api-reference"}, "the index misses headings"


def test_the_guide_links_every_hook_and_value_type_it_names() -> None:
    prose = _FENCE.sub("", _GENERATED.sub("", GUIDE.read_text()))
    names = [*HOOKS, *(t.__name__ for t in value_types()), *(m.__name__ for m in _shared_models())]
    bare = sorted(
        {m.group(1) for m in re.finditer(r"(?<!\[)`(\w+)`", prose) if m.group(1) in names}
    )
    assert not bare, f"the guide names {bare} without linking them to the reference"


# --- links and the template ---------------------------------------------------------------


def _linking_documents() -> list[Any]:
    paths = [*sorted(DOCS.glob("*.md")), REPO / "README.md", TEMPLATE / "README.md"]
    return [pytest.param(path, id=str(path.relative_to(REPO))) for path in paths]


@pytest.mark.parametrize("path", _linking_documents())
def test_links_into_the_guide_and_the_reference_resolve(path: Path) -> None:
    """Every link to plugin-guide.md or plugin-reference.md (and, within them, to `#anchor` or
    a file) lands on an anchor or a file that exists."""
    own = path in (GUIDE, REFERENCE)
    broken = []
    for target in link_targets(path.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        destination = (path.parent / file).resolve() if file else path
        if destination not in (GUIDE, REFERENCE) and not own:
            continue
        if not destination.exists():
            broken.append(f"{target}: no such file")
        elif anchor and anchor not in anchors(destination):
            broken.append(f"{target}: no such anchor in {destination.name}")
    assert not broken, f"{path.relative_to(REPO)}: {broken}"


_BUILT = (".egg-info", "_cache")  # what installing or checking the template leaves in it


def _template_files() -> Iterator[Path]:
    for path in sorted(TEMPLATE.rglob("*")):
        parts = path.relative_to(TEMPLATE).parts
        built = any(p in {"build", "__pycache__", ".venv"} or p.endswith(_BUILT) for p in parts)
        if path.is_file() and not built:
            yield path


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def _longest_shared_run(block: list[str], file: list[str]) -> int:
    """The most consecutive lines of `block` that are also consecutive in `file`."""
    best = 0
    previous = [0] * (len(file) + 1)
    for line in block:
        current = [0] * (len(file) + 1)
        for j, other in enumerate(file, 1):
            if line == other:
                current[j] = previous[j - 1] + 1
                best = max(best, current[j])
        previous = current
    return best


MAX_EXCERPT = 8  # lines of a template file a document may quote (an excerpt, not a copy)


@pytest.mark.parametrize("doc", [GUIDE, REFERENCE], ids=lambda p: p.name)
def test_the_documents_do_not_copy_the_template(doc: Path) -> None:
    blocks = [_lines(block) for block in fenced_blocks(doc.read_text())]
    files = {path: _lines(path.read_text()) for path in _template_files()}
    assert TEMPLATE / "t9kjobs_mpijob" / "plugin.py" in files
    for path, file in files.items():
        for block in blocks:
            assert not block or block != file, f"{doc.name} copies {path.relative_to(TEMPLATE)}"
            run = _longest_shared_run(block, file)
            assert run <= MAX_EXCERPT, (
                f"{doc.name} copies {run} lines of {path.relative_to(TEMPLATE)}: link to it"
            )


def test_the_guide_links_to_the_template_s_files() -> None:
    text = GUIDE.read_text()
    for name in ("pyproject.toml", "t9kjobs_mpijob/spec.py", "t9kjobs_mpijob/plugin.py", "ci.sh"):
        assert f"(../examples/plugin-template/{name})" in text


# The doors a plugin may import t9kjobs through (docs/plugin-api.txt lists both).
_DOORS = ("t9kjobs.plugin", "t9kjobs.testing.fixtures")


def test_the_template_imports_t9kjobs_only_through_its_public_doors() -> None:
    """What the template shows is what the stability promise covers: its code and its tests
    import `t9kjobs.plugin` and `t9kjobs.testing.fixtures`, nothing internal (an author who
    copies `t9kjobs.loading` from it would lean on a module any release may change)."""
    imports = re.compile(r"^\s*(?:from|import)\s+(t9kjobs[\w.]*)", re.M)
    found = {
        (str(path.relative_to(TEMPLATE)), module)
        for path in _template_files()
        if path.suffix == ".py"
        for module in imports.findall(path.read_text())
    }
    assert found, "the template imports nothing from t9kjobs: the pattern is wrong"
    inner = sorted((f, m) for f, m in found if m not in _DOORS and not m.startswith("t9kjobs_"))
    assert not inner, f"the template imports internal modules: {inner}"
