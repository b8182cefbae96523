"""Plugin loading: entry points, conflicts, blocking, owner-only framework hooks."""

from __future__ import annotations

import pytest

from t9kjobs.hooks import hookimpl
from t9kjobs.kinds import KindInfo
from t9kjobs.manager import PluginError, PluginManager, load_plugins
from tests.unit.tinyjob import KIND, TinyJobSpec, TinyPlugin


def test_bundled_plugins_load_through_the_entry_point_group() -> None:
    manager = load_plugins()
    names = {p.name for p in manager.plugins()}
    assert {"generic"} <= names
    assert manager.owner_of("GenericJob") == "generic"
    assert all(p.distribution == "t9k-jobs" for p in manager.plugins())


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
    from tests.unit.tinyjob import tiny_job

    job = parse_job(tiny_job(replicas=1), manager)
    pods = manager.hooks_for(KIND).build_pods(job)
    assert [p.name for p in pods] == ["tiny-worker-0"]
    assert calls == []


def test_unknown_kind_names_the_served_ones() -> None:
    with pytest.raises(PluginError, match=r"unknown kind 'Nope'.*GenericJob"):
        load_plugins().kind_info("Nope")
