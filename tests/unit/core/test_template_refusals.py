"""What a pod template may not set, refused by `t9kjobs validate` at its field path (issue #40).

* Label and annotation keys of the operator's domains (tensorstack.dev and *.tensorstack.dev),
  in every kind's templates; other domains (`sim.t9kjobs.dev`) stay the user's.
* `hostname` and `subdomain` where the operator names every pod in the job's headless Service
  (PyTorchTrainingJob, DeepSpeedJob, ColossalAIJob; GenericJob takes them), and `hostNetwork:
  true` and any `hostPort` where the pods run sshd (DeepSpeedJob, ColossalAIJob).
* `schedulingGroup`, in every kind's templates: the gang is the operator's (issue #47).
* ColossalAIJob's ssh paths and torchrun options, which shell scripts hold as they are.

The API server refuses the same manifests at the same paths:
tests/unit/core/test_template_refusals_admission.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from t9kjobs.cli.main import main
from t9kjobs.manager import PluginManager
from t9kjobs.vocabulary import Obj
from tests.unit.core.refusals import (
    BUILDERS,
    CONTAINER,
    FOREIGN,
    TEMPLATE_PATH,
    colossalai,
    generic,
    problems,
    pytorch,
    template,
)

KINDS = list(BUILDERS)


# -- reserved label and annotation keys ------------------------------------------------------

# (case, labels, annotations, path under the template, the key the message names)
RESERVED: list[tuple[str, Obj, Obj, str, str]] = [
    (
        "owner-name-label",
        {"tensorstack.dev/owner-name": "victim"},
        {},
        "metadata.labels",
        "label key `tensorstack.dev/owner-name` is reserved for the operator (tensorstack.dev"
        " and *.tensorstack.dev)",
    ),
    (
        "podgroup-label",
        {"app": "x", "scheduler.tensorstack.dev/group-name": "other"},
        {},
        "metadata.labels",
        "label key `scheduler.tensorstack.dev/group-name` is reserved",
    ),
    (
        "stop-when-finished-annotation",
        {},
        {"batch.tensorstack.dev/stop-when-finished": "true"},
        "metadata.annotations",
        "annotation key `batch.tensorstack.dev/stop-when-finished` is reserved",
    ),
]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("labels", "annotations", "where", "says"),
    [case[1:] for case in RESERVED],
    ids=[case[0] for case in RESERVED],
)
def test_reserved_keys_are_refused_at_their_field_path(
    manager: PluginManager, kind: str, labels: Obj, annotations: Obj, where: str, says: str
) -> None:
    meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v}
    found = problems(manager, BUILDERS[kind](template(**meta)))
    path = f"{TEMPLATE_PATH[kind]}.{where}"
    assert list(found) == [path]
    assert says in found[path]


def test_every_reserved_key_is_named(manager: PluginManager) -> None:
    labels = {"tensorstack.dev/owner-kind": "X", "tensorstack.dev/owner-name": "victim"}
    found = problems(manager, generic(template(labels=labels)))
    assert found == {
        "spec.replicaSpecs[0].template.metadata.labels": "label keys"
        " `tensorstack.dev/owner-kind`, `tensorstack.dev/owner-name` are reserved for the"
        " operator (tensorstack.dev and *.tensorstack.dev)"
    }


@pytest.mark.parametrize("kind", KINDS)
def test_other_domains_stay_the_users(manager: PluginManager, kind: str) -> None:
    annotations = {
        "sim.t9kjobs.dev/exit-code": "0",
        "sim.t9kjobs.dev/run-seconds": "8",
        "tensorstack.dev.example.com/x": "1",
        "eviltensorstack.dev/x": "1",
        "tensorstack.dev": "no prefix",
    }
    labels = {"app.kubernetes.io/name": "x", "team": "ml"}
    assert problems(manager, BUILDERS[kind](template(labels=labels, annotations=annotations))) == {}


def test_validate_prints_the_field_path_and_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(
        yaml.safe_dump(generic(template(labels={"tensorstack.dev/owner-name": "victim"})))
    )
    assert main(["validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert (
        f"{path}: spec.replicaSpecs[0].template.metadata.labels: label key"
        " `tensorstack.dev/owner-name` is reserved for the operator" in err
    )


def test_a_template_has_at_most_256_labels(manager: PluginManager) -> None:
    labels = {f"l{i}": "x" for i in range(257)}
    found = problems(manager, generic(template(labels=labels)))
    assert found == {
        "spec.replicaSpecs[0].template.metadata.labels": "must have at most 256 items, got 257"
    }
    labels.pop("l0")
    assert problems(manager, generic(template(labels=labels))) == {}


# -- hostname, subdomain, hostNetwork ----------------------------------------------------------

HEADLESS = ["PyTorchTrainingJob", "DeepSpeedJob", "ColossalAIJob"]
SSH = ["DeepSpeedJob", "ColossalAIJob"]


@pytest.mark.parametrize("kind", HEADLESS)
@pytest.mark.parametrize("field", ["hostname", "subdomain"])
def test_hostname_and_subdomain_are_refused_where_the_operator_sets_them(
    manager: PluginManager, kind: str, field: str
) -> None:
    found = problems(manager, BUILDERS[kind](template({field: "mine"})))
    path = f"{TEMPLATE_PATH[kind]}.spec.{field}"
    assert list(found) == [path]
    assert found[path].startswith(f"`{field}` is set by the operator in this kind")


def test_generic_job_keeps_hostname_subdomain_and_host_network(manager: PluginManager) -> None:
    spec = {"hostname": "mine", "subdomain": "my-service", "hostNetwork": True}
    assert problems(manager, generic(template(spec))) == {}


@pytest.mark.parametrize("kind", SSH)
def test_host_network_is_refused_for_the_ssh_kinds(manager: PluginManager, kind: str) -> None:
    found = problems(manager, BUILDERS[kind](template({"hostNetwork": True})))
    path = f"{TEMPLATE_PATH[kind]}.spec.hostNetwork"
    assert list(found) == [path]
    assert "its pods run sshd on port 22" in found[path]
    assert problems(manager, BUILDERS[kind](template({"hostNetwork": False}))) == {}


def _ports(*ports: Obj, init: bool = False) -> Obj:
    container = {**CONTAINER, "ports": list(ports)}
    if init:
        return {"initContainers": [{**container, "name": "init"}]}
    return {"containers": [container]}


@pytest.mark.parametrize("kind", SSH)
@pytest.mark.parametrize("init", [False, True], ids=["container", "init-container"])
@pytest.mark.parametrize("port", [22, 2222, 29500])
def test_a_host_port_is_refused_for_the_ssh_kinds(
    manager: PluginManager, kind: str, init: bool, port: int
) -> None:
    # Issue #47: `hostPort: 22` validated and rendered, a root sshd on the node's port. Any
    # hostPort is refused: the ssh port is the job's choice (spec.ssh.port), and the launchers'
    # rendezvous ports answer anyone too.
    spec = _ports({"containerPort": 22}, {"containerPort": port, "hostPort": port}, init=init)
    found = problems(manager, BUILDERS[kind](template(spec)))
    where = "initContainers" if init else "containers"
    path = f"{TEMPLATE_PATH[kind]}.spec.{where}[0].ports[1].hostPort"
    assert list(found) == [path]
    assert found[path].startswith("`hostPort` is not allowed in this kind: its pods run sshd")


@pytest.mark.parametrize("kind", SSH)
def test_ports_without_a_host_port_stay_allowed_for_the_ssh_kinds(
    manager: PluginManager, kind: str
) -> None:
    spec = _ports({"containerPort": 22}, {"containerPort": 29500, "hostPort": 0})
    assert problems(manager, BUILDERS[kind](template(spec))) == {}


@pytest.mark.parametrize("kind", ["GenericJob", "PyTorchTrainingJob"])
def test_the_other_kinds_keep_host_ports(manager: PluginManager, kind: str) -> None:
    spec = _ports({"containerPort": 8080, "hostPort": 8080})
    assert problems(manager, BUILDERS[kind](template(spec))) == {}


@pytest.mark.parametrize("kind", KINDS)
def test_a_template_may_not_name_a_gang(manager: PluginManager, kind: str) -> None:
    # Issue #47: a template's schedulingGroup passed through when the job got no gang of its
    # own, so its pods joined (and could complete) another job's gang.
    found = problems(manager, BUILDERS[kind](template({"schedulingGroup": {"podGroupName": "x"}})))
    path = f"{TEMPLATE_PATH[kind]}.spec.schedulingGroup"
    assert list(found) == [path]
    assert found[path].startswith("`schedulingGroup` is set by the operator")


def test_pytorch_keeps_host_network(manager: PluginManager) -> None:
    assert problems(manager, pytorch(template({"hostNetwork": True}))) == {}


def test_a_colossalai_launcher_template_is_held_to_the_same_rules(
    manager: PluginManager,
) -> None:
    doc = colossalai(template())
    launcher = {"type": "launcher", "template": template({"hostNetwork": True, "hostname": "x"})}
    doc["spec"]["replicaSpecs"].append(launcher)
    assert set(problems(manager, doc)) == {
        "spec.replicaSpecs[1].template.spec.hostNetwork",
        "spec.replicaSpecs[1].template.spec.hostname",
    }


# -- ColossalAIJob: what its shell scripts hold ------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("sshdPath", "exec /usr/sbin/sshd; touch /tmp/PWNED # -D"),
        ("sshdPath", "/usr/sbin/sshd; touch /tmp/PWNED # -D"),
        ("sshdPath", "/usr/sbin/sshd $(id)"),
        ("sshdPath", "/usr/sbin/sshd\n"),
        ("sshdPath", "usr/sbin/sshd"),
        ("authMountPath", "/root/../etc"),
        ("authMountPath", "/root/.ssh`id`"),
        ("authMountPath", "/"),
    ],
)
def test_colossalai_ssh_paths_must_be_plain_absolute_paths(
    manager: PluginManager, field: str, value: str
) -> None:
    found = problems(manager, colossalai(template(), ssh={field: value}))
    assert list(found) == [f"spec.ssh.{field}"]
    assert found[f"spec.ssh.{field}"] == (
        f"{field} must be an absolute path of letters, digits and `._+-` between `/`, without"
        f" `..` (shell scripts hold it as it is), got {value!r}"
    )


@pytest.mark.parametrize(
    "ssh",
    [
        {},
        {"sshdPath": "/usr/sbin/sshd", "authMountPath": "/root/.ssh"},
        {"sshdPath": "/opt/openssh-9.6/sbin/sshd", "authMountPath": "/home/user_1/.ssh/"},
        {"sshdPath": "/opt/...hidden/sshd"},
    ],
)
def test_plain_ssh_paths_are_accepted(manager: PluginManager, ssh: Obj) -> None:
    assert problems(manager, colossalai(template(), ssh=ssh)) == {}


@pytest.mark.parametrize(
    "arg", ["--max_restarts=$(id)", "--log_dir=/tmp/x;id", "--rdzv_conf=`id`", "--tee\n3"]
)
def test_colossalai_torchrun_options_cannot_hold_shell_characters(
    manager: PluginManager, arg: str
) -> None:
    config = {"script": ["train.py"], "extraArgs": ["--max_restarts=0", arg]}
    found = problems(manager, colossalai(template(), torchConfig=config))
    assert list(found) == ["spec.torchConfig.extraArgs[1]"]
    assert found["spec.torchConfig.extraArgs[1]"].startswith(
        "a torchrun option may hold only letters, digits, spaces and `_@%+=:,./-`"
    )


def test_colossalai_torchrun_options_of_plain_characters_are_accepted(
    manager: PluginManager,
) -> None:
    extra = ["--max_restarts=0", "--monitor_interval", "5", "--log_dir /tmp/logs", "--tee=3"]
    config = {"script": ["train.py"], "extraArgs": extra}
    assert problems(manager, colossalai(template(), torchConfig=config)) == {}


def test_a_colossalai_module_name_ending_in_a_newline_is_refused(manager: PluginManager) -> None:
    # Python's `$` also matches before a final newline; the API server's RE2 does not.
    config = {"script": ["-m", "pkg.train\n", "--epochs=1"]}
    found = problems(manager, colossalai(template(), torchConfig=config))
    assert list(found) == ["spec.torchConfig.script"]
    assert "must not contain spaces or shell characters" in found["spec.torchConfig.script"]


# -- the operator's Secrets and ConfigMaps (issue #47, docs/security.md threat 24) -----------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    ("spec", "where", "says"), [c[1:] for c in FOREIGN], ids=[c[0] for c in FOREIGN]
)
def test_a_template_may_not_name_the_operators_secrets_and_config_maps(
    manager: PluginManager, kind: str, spec: Obj, where: str, says: str
) -> None:
    """`victim-ssh` is another job's SSH keys (root ssh into its workers), `victim-hostfile`
    its launcher's hosts: no template of any kind may mount or read them."""
    if "containers" not in spec:
        spec = {"containers": [CONTAINER], **spec}
    found = problems(manager, BUILDERS[kind](template(spec)))
    path = f"{TEMPLATE_PATH[kind]}.spec.{where}"
    assert list(found) == [path], found
    assert found[path].startswith(says), found[path]
    assert "a template may not name one" in found[path]


@pytest.mark.parametrize("kind", KINDS)
def test_a_templates_own_secrets_and_config_maps_stay_allowed(
    manager: PluginManager, kind: str
) -> None:
    spec = {
        "containers": [
            CONTAINER
            | {
                "env": [
                    {"name": "T", "valueFrom": {"secretKeyRef": {"name": "token", "key": "t"}}}
                ],
                "envFrom": [{"secretRef": {"name": "ssh-keys"}}, {"prefix": "X_"}],
            }
        ],
        "volumes": [
            {"name": "a", "secret": {"secretName": "sshd-config"}},
            {"name": "b", "configMap": {"name": "hostfile-extra"}},
            {"name": "c", "emptyDir": {}},
            {"name": "d", "projected": {"sources": [{"downwardAPI": {"items": []}}]}},
        ],
    }
    assert problems(manager, BUILDERS[kind](template(spec))) == {}
