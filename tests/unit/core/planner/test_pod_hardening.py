"""The engine's safe defaults for every pod of every kind (`t9kjobs.planner.desired.harden`):
no ServiceAccount token, the runtime's seccomp profile, no privilege escalation; whatever the
template says itself wins (docs/security.md)."""

from __future__ import annotations

from typing import Any

from t9kjobs.loading import parse_job
from t9kjobs.planner.desired import harden
from t9kjobs.render import render_job
from tests.unit.core.planner.tinyjob import tiny_job, tiny_manager


def _pod(**spec: Any) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main"}], **spec}}


def test_a_template_that_says_nothing_gets_no_token_seccomp_and_no_escalation() -> None:
    pod = _pod(initContainers=[{"name": "init"}])
    harden(pod)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["securityContext"] == {"seccompProfile": {"type": "RuntimeDefault"}}
    for container in [*spec["initContainers"], *spec["containers"]]:
        assert container["securityContext"] == {"allowPrivilegeEscalation": False}


def test_what_the_template_says_wins() -> None:
    pod = _pod(
        automountServiceAccountToken=True,
        securityContext={"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}},
    )
    pod["spec"]["containers"] = [
        {"name": "a", "securityContext": {"allowPrivilegeEscalation": True}},
        {"name": "b", "securityContext": {"privileged": True}},
    ]
    harden(pod)
    spec = pod["spec"]
    assert spec["automountServiceAccountToken"] is True
    assert spec["securityContext"] == {"runAsUser": 0, "seccompProfile": {"type": "Unconfined"}}
    assert spec["containers"][0]["securityContext"] == {"allowPrivilegeEscalation": True}
    # A privileged container escalates by definition: nothing is added that the API refuses.
    assert spec["containers"][1]["securityContext"] == {"privileged": True}


def test_a_template_field_wins_only_for_that_field() -> None:
    # Issue #47: writing `privileged: false` (or any other securityContext field) skipped every
    # default of the container; each default is now added unless that very field is set.
    pod = _pod(securityContext={"runAsUser": 1000, "fsGroup": 1000})
    pod["spec"]["containers"] = [
        {"name": "unprivileged", "securityContext": {"privileged": False}},
        {"name": "read-only", "securityContext": {"readOnlyRootFilesystem": True}},
        {"name": "own-seccomp", "securityContext": {"seccompProfile": {"type": "Localhost"}}},
    ]
    harden(pod)
    spec = pod["spec"]
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    drop = {"drop": ["ALL"]}
    unprivileged, read_only, own = (c["securityContext"] for c in spec["containers"])
    assert unprivileged == {
        "privileged": False,
        "allowPrivilegeEscalation": False,
        "capabilities": drop,
    }
    assert read_only == {
        "readOnlyRootFilesystem": True,
        "allowPrivilegeEscalation": False,
        "capabilities": drop,
    }
    assert own == {
        "seccompProfile": {"type": "Localhost"},
        "allowPrivilegeEscalation": False,
        "capabilities": drop,
    }


def test_nothing_is_added_that_the_api_refuses_beside_sys_admin() -> None:
    # The API refuses `allowPrivilegeEscalation: false` beside `privileged: true` and beside
    # `capabilities.add: [CAP_SYS_ADMIN]` (spelled so; `SYS_ADMIN` is not compared).
    pod = _pod()
    pod["spec"]["containers"] = [
        {"name": "a", "securityContext": {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}},
        {"name": "b", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}},
    ]
    harden(pod)
    a, b = (c["securityContext"] for c in pod["spec"]["containers"])
    assert a == {"capabilities": {"add": ["CAP_SYS_ADMIN"]}}
    assert b == {"capabilities": {"add": ["SYS_ADMIN"]}, "allowPrivilegeEscalation": False}


def test_a_named_service_account_asks_for_its_token() -> None:
    pod = _pod(serviceAccountName="trainer")
    harden(pod)
    assert "automountServiceAccountToken" not in pod["spec"]


def test_every_rendered_pod_is_hardened() -> None:
    manager = tiny_manager()
    pods = [
        o
        for o in render_job(parse_job(tiny_job(replicas=2), manager), manager)
        if o["kind"] == "Pod"
    ]
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["automountServiceAccountToken"] is False
        assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_container_of_a_normal_user_drops_every_capability() -> None:
    pod = _pod(securityContext={"runAsUser": 1000, "runAsNonRoot": True})
    pod["spec"]["containers"] = [
        {"name": "user"},
        {"name": "root", "securityContext": {"runAsUser": 0}},
        {"name": "asks", "securityContext": {"capabilities": {"add": ["NET_BIND_SERVICE"]}}},
    ]
    harden(pod)
    user, root, asks = (c["securityContext"] for c in pod["spec"]["containers"])
    assert user == {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    assert "capabilities" not in root  # root keeps what the runtime gives it
    assert asks["capabilities"] == {"add": ["NET_BIND_SERVICE"]}
    root_pod = _pod()
    harden(root_pod)
    assert "capabilities" not in root_pod["spec"]["containers"][0]["securityContext"]
