"""Plugin loading: entry points, conflicts, blocking, owner-only framework hooks."""

from __future__ import annotations

from importlib.metadata import distribution
from pathlib import Path

import pytest

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo
from t9kjobs.manager import ENTRY_POINT_GROUP, PluginError, PluginManager, load_plugins
from tests.unit.core.planner.tinyjob import KIND, TinyJobSpec, TinyPlugin

BUNDLED = {"colossalai", "deepspeed", "generic", "networkpolicy", "pytorch", "scheduling"}


def install_third_party_plugin(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A distribution `third-party-tiny` beside t9k-jobs, serving TinyJob through the group."""
    (path / "third_party_tiny.py").write_text(
        "from tests.unit.core.planner.tinyjob import TinyPlugin\n\nplugin = TinyPlugin()\n"
    )
    info = path / "third_party_tiny-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: third-party-tiny\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\ntiny = third_party_tiny:plugin\n"
    )
    monkeypatch.syspath_prepend(str(path))


@pytest.mark.parametrize("third_party", [False, True], ids=["alone", "with-a-third-party-plugin"])
def test_bundled_plugins_load_through_the_entry_point_group(
    third_party: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if third_party:
        install_third_party_plugin(tmp_path, monkeypatch)
    declared = {
        ep.name for ep in distribution("t9k-jobs").entry_points if ep.group == ENTRY_POINT_GROUP
    }
    assert declared == BUNDLED
    manager = load_plugins()
    loaded = {p.name: p.distribution for p in manager.plugins()}
    assert {name: loaded.get(name) for name in BUNDLED} == dict.fromkeys(BUNDLED, "t9k-jobs")
    assert manager.owner_of("GenericJob") == "generic"
    # Other installed plugins (the template's, when installed) come from their own distributions.
    others = {name: dist for name, dist in loaded.items() if name not in BUNDLED}
    assert "t9k-jobs" not in others.values()
    assert ("tiny" in others) is third_party
    if third_party:
        assert others["tiny"] == "third-party-tiny"
        assert manager.owner_of(KIND) == "tiny"


def test_two_plugins_claiming_one_kind_is_an_error_naming_both() -> None:
    manager = PluginManager()
    manager.register(TinyPlugin(), "first")
    with pytest.raises(
        PluginError, match=r"TinyJob is claimed by two plugins: 'first' and 'second'"
    ):
        manager.register(TinyPlugin(), "second")
    assert manager.owner_of(KIND) == "first"


def test_blocked_plugin_is_skipped() -> None:
    assert "generic" not in {p.name for p in load_plugins(blocked=["generic"]).plugins()}


def test_framework_hooks_reach_only_the_owner() -> None:
    calls: list[str] = []

    class Other:
        @hookimpl
        def t9kjobs_kinds(self) -> list[KindInfo]:
            return [KindInfo(kind="OtherJob", spec_model=TinyJobSpec, plural="otherjobs")]

        @hookimpl
        def t9kjobs_build_pods(self) -> list[object]:
            calls.append("other")
            return []

    manager = PluginManager()
    manager.register(TinyPlugin(), "tiny")
    manager.register(Other(), "other")
    from t9kjobs.loading import parse_job
    from tests.unit.core.planner.tinyjob import tiny_job

    job = parse_job(tiny_job(replicas=1), manager)
    pods = manager.hooks_for(KIND).build_pods(job)
    assert [p.name for p in pods] == ["tiny-worker-0"]
    assert calls == []


def test_unknown_kind_names_the_served_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown kind 'Nope'.*GenericJob"):
        load_plugins().kind_info("Nope")
