"""The public surface plugins rely on changes only on purpose, and the changelog says so.

docs/plugin-api.txt (hack/gen_plugin_api.py) lists every name of the public modules with its
signature, fields and defaults, and the kit's contracts. A change in the code that a plugin could
feel (a renamed argument, a field's new default, a contract added) fails here until the file is
regenerated, and CHANGELOG.md has an entry for the version the file names.
"""

from __future__ import annotations

import difflib
import re

from tests.repo import REPO
from tests.unit.hack.hack_scripts import load_script

CHANGELOG = REPO / "CHANGELOG.md"


def _version() -> str:
    found = re.search(r'^version = "([^"]+)"', (REPO / "pyproject.toml").read_text(), re.M)
    assert found is not None
    return found.group(1)


def test_the_plugin_api_is_what_docs_plugin_api_txt_says() -> None:
    gen = load_script("gen_plugin_api")
    expected, actual = gen.OUTPUT.read_text(), gen.surface()
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            "docs/plugin-api.txt",
            "the code",
        )
    )
    assert not diff, (
        "the API plugins rely on changed:\n"
        f"{diff}\nIf on purpose: `make plugin-api`, and say in CHANGELOG.md, under the version"
        " being made, what changed for plugins (a break needs the next minor version before 1.0)"
    )


def test_the_changelog_says_what_this_version_changed_for_plugins() -> None:
    text = CHANGELOG.read_text()
    version = _version()
    heading = re.search(rf"^## {re.escape(version)}\b.*$", text, re.M)
    assert heading is not None, f"CHANGELOG.md has no section `## {version}`"
    section = text[heading.end() :].split("\n## ", 1)[0]
    assert "### For plugins" in section, f"the section of {version} has no `### For plugins`"
    # The file follows the code: between releases it also holds what CHANGELOG.md calls
    # Unreleased, and its header says so (no addition passed off as released in `version`).
    header = (REPO / "docs" / "plugin-api.txt").read_text().splitlines()[0]
    assert f"t9k-jobs {version}" in header, header
    unreleased = load_script("gen_plugin_api")._unreleased_for_plugins()
    assert ("under Unreleased" in header) == unreleased, header


def test_a_changed_signature_is_caught(monkeypatch: object) -> None:
    """The check can fail: a keyword renamed in a public helper shows in the surface."""
    import t9kjobs.plugin as kinds  # the door's name is what a plugin imports

    gen = load_script("gen_plugin_api")
    before = gen.surface()
    original = kinds.replicas_lost

    def replicas_lost(replicas, least=None):  # type: ignore[no-untyped-def]
        return original(replicas, least)

    setattr(kinds, "replicas_lost", replicas_lost)  # noqa: B010
    try:
        after = gen.surface()
    finally:
        setattr(kinds, "replicas_lost", original)  # noqa: B010
    assert before != after
    assert "least=None" in after
