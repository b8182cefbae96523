"""`t9kjobs validate` and a real API server agree on the template refusals of issue #40.

The CRDs generated from the models now are created on the unit tier's API server (etcd and
kube-apiserver of the local control plane, `kit_kubeconfig`), which compiles their CEL rules and
estimates their cost; each manifest of tests/unit/core/test_template_refusals.py's kinds is then
submitted as `kubectl apply --dry-run=server` submits it. A manifest `validate` refuses at a path
is refused by the server with a message naming that path; one `validate` accepts is admitted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from t9kjobs.crds import crd_for
from t9kjobs.manager import PluginManager
from t9kjobs.testing.kit.admission import AdmissionTier, refusal_names
from tests.unit.core.refusals import (
    BUILDERS,
    CONTAINER,
    FOREIGN,
    TEMPLATE_PATH,
    Obj,
    colossalai,
    deepspeed,
    generic,
    problems,
    pytorch,
    template,
)

OWNER_NAME = {"tensorstack.dev/owner-name": "victim"}
STOP = {"batch.tensorstack.dev/stop-when-finished": "true"}
GP, PP = TEMPLATE_PATH["GenericJob"], TEMPLATE_PATH["PyTorchTrainingJob"]
DP, CP = TEMPLATE_PATH["DeepSpeedJob"], TEMPLATE_PATH["ColossalAIJob"]

# (case, manifest, the path both refuse it at; "" for one both accept, with the server's words
# that must be in its refusal)
CASES: list[tuple[str, Obj, str, str]] = [
    (
        "generic-owner-label",
        generic(template(labels=OWNER_NAME)),
        f"{GP}.metadata.labels",
        "label key `tensorstack.dev/owner-name` is reserved for the operator",
    ),
    (
        "generic-subdomain-label",
        generic(template(labels={"app": "x", "scheduler.tensorstack.dev/queue": "q"})),
        f"{GP}.metadata.labels",
        "label key `scheduler.tensorstack.dev/queue` is reserved",
    ),
    (
        "generic-reserved-annotation",
        generic(template(annotations=STOP)),
        f"{GP}.metadata.annotations",
        "annotation key `batch.tensorstack.dev/stop-when-finished` is reserved",
    ),
    (
        "deepspeed-owner-label",
        deepspeed(template(labels=OWNER_NAME)),
        f"{DP}.metadata.labels",
        "label key `tensorstack.dev/owner-name` is reserved",
    ),
    (
        "deepspeed-reserved-annotation",
        deepspeed(template(annotations=STOP)),
        f"{DP}.metadata.annotations",
        "annotation key `batch.tensorstack.dev/stop-when-finished` is reserved",
    ),
    (
        "generic-257-labels",
        generic(template(labels={f"l{i}": "x" for i in range(257)})),
        f"{GP}.metadata.labels",
        "must have at most 256 items",
    ),
    ("pytorch-hostname", pytorch(template({"hostname": "h"})), f"{PP}.spec.hostname", ""),
    ("pytorch-subdomain", pytorch(template({"subdomain": "s"})), f"{PP}.spec.subdomain", ""),
    ("deepspeed-hostname", deepspeed(template({"hostname": "h"})), f"{DP}.spec.hostname", ""),
    ("deepspeed-subdomain", deepspeed(template({"subdomain": "s"})), f"{DP}.spec.subdomain", ""),
    (
        "deepspeed-host-network",
        deepspeed(template({"hostNetwork": True})),
        f"{DP}.spec.hostNetwork",
        "its pods run sshd on port 22",
    ),
    ("colossalai-hostname", colossalai(template({"hostname": "h"})), f"{CP}.spec.hostname", ""),
    ("colossalai-subdomain", colossalai(template({"subdomain": "s"})), f"{CP}.spec.subdomain", ""),
    (
        "colossalai-host-network",
        colossalai(template({"hostNetwork": True})),
        f"{CP}.spec.hostNetwork",
        "its pods run sshd on port 22",
    ),
    (
        "deepspeed-host-port",
        deepspeed(
            template(
                {"containers": [{**CONTAINER, "ports": [{"containerPort": 22, "hostPort": 22}]}]}
            )
        ),
        f"{DP}.spec.containers[0].ports[0].hostPort",
        "`hostPort` is not allowed in this kind",
    ),
    (
        "colossalai-init-container-host-port",
        colossalai(
            template(
                {
                    "initContainers": [
                        {
                            "name": "init",
                            "image": "b",
                            "ports": [{"containerPort": 1, "hostPort": 2}],
                        }
                    ]
                }
            )
        ),
        f"{CP}.spec.initContainers[0].ports[0].hostPort",
        "`hostPort` is not allowed in this kind",
    ),
    (
        "generic-scheduling-group",
        generic(template({"schedulingGroup": {"podGroupName": "victim"}})),
        f"{GP}.spec.schedulingGroup",
        "`schedulingGroup` is set by the operator",
    ),
    (
        "deepspeed-scheduling-group",
        deepspeed(template({"schedulingGroup": {"podGroupName": "victim"}})),
        f"{DP}.spec.schedulingGroup",
        "`schedulingGroup` is set by the operator",
    ),
    (
        "colossalai-injected-sshd-path",
        colossalai(template(), ssh={"sshdPath": "/usr/sbin/sshd; touch /tmp/PWNED # -D"}),
        "spec.ssh.sshdPath",
        "",
    ),
    (
        "colossalai-sshd-path-newline",
        colossalai(template(), ssh={"sshdPath": "/usr/sbin/sshd\n"}),
        "spec.ssh.sshdPath",
        "",
    ),
    (
        "colossalai-dotdot-auth-mount-path",
        colossalai(template(), ssh={"authMountPath": "/root/../etc"}),
        "spec.ssh.authMountPath",
        "",
    ),
    (
        "colossalai-injected-extra-arg",
        colossalai(template(), torchConfig={"script": ["train.py"], "extraArgs": ["--a=$(id)"]}),
        "spec.torchConfig.extraArgs[0]",
        "",
    ),
    (
        "colossalai-module-newline",
        colossalai(template(), torchConfig={"script": ["-m", "pkg.train\n"]}),
        "spec.torchConfig.script",
        "",
    ),
    # Accepted by both.
    (
        "generic-host-fields-and-other-domains",
        generic(
            template(
                {"hostname": "h", "subdomain": "s", "hostNetwork": True},
                labels={"app": "x", "eviltensorstack.dev/x": "1"},
                annotations={
                    "sim.t9kjobs.dev/exit-code": "0",
                    "tensorstack.dev.example.com/x": "1",
                    "tensorstack.dev": "no prefix",
                },
            )
        ),
        "",
        "",
    ),
    ("pytorch-host-network", pytorch(template({"hostNetwork": True})), "", ""),
    ("deepspeed-host-network-false", deepspeed(template({"hostNetwork": False})), "", ""),
    (
        "deepspeed-ports-without-host-port",
        deepspeed(
            template(
                {"containers": [{**CONTAINER, "ports": [{"containerPort": 22, "hostPort": 0}]}]}
            )
        ),
        "",
        "",
    ),
    (
        "pytorch-host-port",
        pytorch(
            template(
                {"containers": [{**CONTAINER, "ports": [{"containerPort": 1, "hostPort": 1}]}]}
            )
        ),
        "",
        "",
    ),
    (
        "colossalai-plain-paths-and-options",
        colossalai(
            template(),
            ssh={"sshdPath": "/opt/openssh-9.6/sbin/sshd", "authMountPath": "/home/u_1/.ssh/"},
            torchConfig={"script": ["train.py"], "extraArgs": ["--log_dir /tmp/x", "--tee=3"]},
        ),
        "",
        "",
    ),
]


# The operator's Secrets and ConfigMaps, wherever a template names one, in every kind.
CASES += [
    (
        f"{kind.lower()}-{case}",
        BUILDERS[kind](template({"containers": [CONTAINER], **spec})),
        f"{TEMPLATE_PATH[kind]}.spec.{where}",
        "a template may not name one, as it could only be another job's",
    )
    for kind in ("GenericJob", "DeepSpeedJob")
    for case, spec, where, _ in FOREIGN
]


@pytest.fixture(scope="module")
def tier(kit_kubeconfig: Path, manager: PluginManager) -> Iterator[AdmissionTier]:
    """The four bundled CRDs, generated now, on the session's API server (deleted after)."""
    tier = AdmissionTier(str(kit_kubeconfig))
    try:
        crds = [crd_for(info) for info in manager.kinds.values()]
        tier.install(crds)
        refused = [p for p in map(tier.problem, crds) if p is not None]
        assert refused == [], "\n".join(refused)
        yield tier
    finally:
        tier.close()


@pytest.mark.parametrize(
    ("manifest", "path", "says"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_validate_and_the_api_server_agree(
    tier: AdmissionTier, manager: PluginManager, manifest: Obj, path: str, says: str
) -> None:
    by_validate = problems(manager, manifest)
    answer = tier.dry_run(manifest)
    if not path:
        assert by_validate == {}
        assert answer.admitted, answer.message
        return
    assert list(by_validate) == [path]
    assert refusal_names(answer, (path,)) == [], answer.message
    assert says in answer.message, answer.message
