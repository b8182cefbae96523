"""GenericJob: pods, substitutions, per-replica Services, finish rules, validation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from t9kjobs.kinds import ReplicaState
from t9kjobs.loading import JobError, load_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import MAX_PODS, RestartRule
from t9kjobs.render import render_job
from tests.unit.core.planner.sim import Sim
from tests.unit.golden import assert_golden
from tests.unit.plugins.generic.jobs import generic_example

GOLDEN = Path(__file__).parent / "golden"


def _env(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in pod["spec"]["containers"][0].get("env", [])}


def test_render_example_matches_golden(manager: PluginManager) -> None:
    job, _ = load_job(generic_example(), manager)
    assert_golden(GOLDEN / "torch-ddp.yaml", render_job(job, manager))


def test_pods_services_and_substitutions(manager: PluginManager) -> None:
    job, _ = load_job(generic_example(), manager)
    objects = render_job(job, manager)
    pods = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Pod"}
    services = [o["metadata"]["name"] for o in objects if o["kind"] == "Service"]
    assert sorted(pods) == [
        "generic-ddp-master-0",
        "generic-ddp-worker-0",
        "generic-ddp-worker-1",
        "generic-ddp-worker-2",
    ]
    assert sorted(services) == sorted(pods)  # one Service per replica
    worker2 = _env(pods["generic-ddp-worker-2"])
    assert worker2 == {
        "RANK": "2",
        "WORKERS": "3",
        "MASTER_ADDR": "generic-ddp-master-0",
        "MASTER_PORT": "2222",
    }
    assert pods["generic-ddp-master-0"]["spec"]["containers"][0]["command"][-1] == "--rank=0"
    for pod in pods.values():
        ref = pod["metadata"]["ownerReferences"][0]
        assert (ref["kind"], ref["name"], ref["controller"]) == ("GenericJob", "generic-ddp", True)
        assert pod["metadata"]["labels"]["tensorstack.dev/owner-name"] == "generic-ddp"


def test_no_service_without_spec_service(manager: PluginManager) -> None:
    doc = generic_example()
    del doc["spec"]["service"]
    for rs in doc["spec"]["replicaSpecs"]:
        rs["template"]["spec"]["containers"][0]["env"] = [{"name": "T", "value": "$(type)-$(rank)"}]
    job, _ = load_job(doc, manager)
    objects = render_job(job, manager)
    assert {o["kind"] for o in objects} == {"Pod"}
    assert _env(objects[-1]) == {"T": "worker-2"}


@pytest.mark.parametrize(
    ("mutate", "path", "words"),
    [
        (
            lambda d: d["spec"].pop("service"),
            "spec.replicaSpecs[0].template.spec.containers[0].env[2].value",
            "service.master[0].host",
        ),
        (
            lambda d: d["spec"]["successRules"].append({"chief": [0]}),
            "spec.successRules[1].chief",
            "no replica type",
        ),
        (
            lambda d: d["spec"]["failureRules"].append({"worker": [5]}),
            "spec.failureRules[2].worker[0]",
            "out of range",
        ),
        (
            lambda d: d["spec"]["replicaSpecs"][1].update(replicas=-1),
            "spec.replicaSpecs[1].replicas",
            "must be >= 0",
        ),
        (
            lambda d: d["spec"]["replicaSpecs"][1].update(type="master"),
            "spec.replicaSpecs",
            "unique",
        ),
        (
            lambda d: d["spec"].update(cleanUpPolicy="Some"),
            "spec.cleanUpPolicy",
            "one of `All`, `Unfinished` or `None`",
        ),
        (
            lambda d: d["spec"]["replicaSpecs"][0].update(restartPolicy="Sometimes"),
            "spec.replicaSpecs[0].restartPolicy",
            "Always",
        ),
        (lambda d: d["spec"].update(unknownField=1), "spec.unknownField", "unknown field"),
        (
            lambda d: d["spec"].update(
                runMode={"debug": {"enabled": True, "replicaSpecs": [{"type": "ps"}]}}
            ),
            "spec.runMode.debug.replicaSpecs[0].type",
            "no replica type",
        ),
        (
            lambda d: d["spec"].update(
                runMode={"pause": {"enabled": True, "resumeSpecs": [{"type": "chief"}]}}
            ),
            "spec.runMode.pause.resumeSpecs[0].type",
            "no replica type 'chief' in the job (it has: master, worker)",
        ),
    ],
)
def test_invalid_jobs_name_the_field(
    manager: PluginManager, mutate: Any, path: str, words: str
) -> None:
    doc = generic_example()
    mutate(doc)
    with pytest.raises(JobError) as err:
        load_job(doc, manager)
    messages = [str(p) for p in err.value.problems]
    assert any(m.startswith(path + ":") and words in m for m in messages), messages


def _states(**states: str) -> list[ReplicaState]:
    out = []
    for key, state in states.items():
        rtype, index = key.rsplit("_", 1)
        final = state in ("Succeeded", "Failed")
        out.append(
            ReplicaState(
                rtype,
                int(index),
                f"j-{rtype}-{index}",
                state,
                1 if state == "Failed" else None,
                final,
            )
        )
    return out


def test_finish_rules(manager: PluginManager) -> None:
    job, _ = load_job(generic_example(), manager)
    hooks = manager.hooks_for("GenericJob")
    running = dict(master_0="Running", worker_0="Running", worker_1="Running", worker_2="Running")
    assert hooks.compute_status(job, _states(**running)) is None
    done = hooks.compute_status(job, _states(**{**running, "master_0": "Succeeded"}))
    assert done is not None and (done.outcome, done.reason) == ("Succeeded", "SuccessRuleMatched")
    # One worker failing for good does not match failureRules[1] (all three workers) ...
    assert hooks.compute_status(job, _states(**{**running, "worker_0": "Failed"})) is None
    # ... all three do.
    all_failed = {**running, "worker_0": "Failed", "worker_1": "Failed", "worker_2": "Failed"}
    verdict = hooks.compute_status(job, _states(**all_failed))
    assert verdict is not None and verdict.outcome == "Failed"
    assert "j-worker-0 failed with exit code 1" in verdict.message


def test_default_rules_without_any(manager: PluginManager) -> None:
    doc = generic_example()
    doc["spec"].pop("successRules")
    doc["spec"].pop("failureRules")
    job, _ = load_job(doc, manager)
    hooks = manager.hooks_for("GenericJob")
    all_ok = dict(
        master_0="Succeeded", worker_0="Succeeded", worker_1="Succeeded", worker_2="Succeeded"
    )
    assert hooks.compute_status(job, _states(**all_ok)).outcome == "Succeeded"  # type: ignore[union-attr]
    one_failed = {**all_ok, "worker_1": "Failed"}
    assert hooks.compute_status(job, _states(**one_failed)).outcome == "Failed"  # type: ignore[union-attr]


def _services(manager: PluginManager, ports: list[dict[str, Any]]) -> list[dict[str, Any]]:
    doc = generic_example()
    doc["spec"]["service"] = {"ports": ports}
    if not any(p.get("name") == "torch" for p in ports):
        for rs in doc["spec"]["replicaSpecs"]:  # MASTER_PORT: $(service.port[torch])
            rs["template"]["spec"]["containers"][0]["env"].pop()
    job, _ = load_job(doc, manager)
    return [o for o in render_job(job, manager) if o["kind"] == "Service"]


def test_per_replica_services_are_headless(manager: PluginManager) -> None:
    """Each name resolves to its pod's own address, ready or not: no kube-proxy needed (found
    on the real node, which has none: a ClusterIP name was unreachable from the pods)."""
    for svc in _services(manager, [{"name": "torch", "port": 2222}]):
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["publishNotReadyAddresses"] is True
        assert svc["spec"]["ports"] == [
            {"name": "torch", "port": 2222, "targetPort": 2222, "protocol": "TCP"}
        ]


def test_a_port_mapped_to_another_target_port_keeps_a_cluster_ip(manager: PluginManager) -> None:
    ports = [{"name": "torch", "port": 2222}, {"name": "web", "port": 80, "targetPort": 8080}]
    for svc in _services(manager, ports):
        assert "clusterIP" not in svc["spec"]  # a ClusterIP: only kube-proxy can map 80 -> 8080
        assert svc["spec"]["ports"][1] == {
            "name": "web",
            "port": 80,
            "targetPort": 8080,
            "protocol": "TCP",
        }


@pytest.mark.parametrize(
    "policy", ["OnFailure", "Always", None], ids=["OnFailure", "Always", "unset"]
)
def test_the_string_form_and_the_default_have_the_default_limit_0(
    manager: PluginManager, policy: str | None
) -> None:
    """The GenericJob reference: `limit` defaults to 0. The string form has no limit of its own
    and GenericJob no backoffLimit: by the one restart rule, it restarts nothing either."""
    doc = generic_example()
    for rs in doc["spec"]["replicaSpecs"]:
        rs.pop("restartPolicy")
        if policy is not None:
            rs["restartPolicy"] = policy
    job, _ = load_job(doc, manager)
    rules = [p.restart for p in manager.hooks_for("GenericJob").build_pods(job)]
    assert rules == [RestartRule(policy=policy or "OnFailure")] * 4
    doc["metadata"].update(namespace="ns", uid="job-uid")
    sim = Sim(doc, manager)
    sim.step()
    sim.set("generic-ddp-master-0", "Failed", 1)
    p = sim.step()
    # Not restarted (limit 0); cleanUpPolicy Unfinished deletes only the running workers.
    assert "generic-ddp-master-0" not in {d.name for d in p.delete}
    assert p.status.phase == "Failed" and p.status.backoff_count == 0
    failed = p.status.condition("Failed")
    assert failed is not None and failed.reason == "FailureRuleMatched"
    assert (
        failed.message == "generic-ddp-master-0 failed with exit code 1 (container pytorch)"
        " (failureRules[0] is fulfilled)"
    )


def test_a_single_unnamed_port_and_app_protocol_are_accepted(manager: PluginManager) -> None:
    """What a Service accepts: one port needs no name; `appProtocol` is passed on."""
    ports = [{"port": 2222, "appProtocol": "kubernetes.io/h2c"}]
    for svc in _services(manager, ports):
        assert svc["spec"]["ports"] == [
            {
                "port": 2222,
                "targetPort": 2222,
                "protocol": "TCP",
                "appProtocol": "kubernetes.io/h2c",
            }
        ]


def test_named_ports_still_resolve_with_app_protocol_and_long_names(
    manager: PluginManager,
) -> None:
    doc = generic_example()
    name = "torch-distributed"  # a Service port name is a DNS label (63), not IANA (15)
    doc["spec"]["service"] = {
        "ports": [
            {"name": name, "port": 2222, "appProtocol": "grpc"},
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53},  # the same port with another protocol
        ]
    }
    for rs in doc["spec"]["replicaSpecs"]:
        rs["template"]["spec"]["containers"][0]["env"][-1]["value"] = f"$(service.port[{name}])"
    job, _ = load_job(doc, manager)
    objects = render_job(job, manager)
    pod = next(o for o in objects if o["kind"] == "Pod")
    assert _env(pod)["MASTER_PORT"] == "2222"
    svc = next(o for o in objects if o["kind"] == "Service")
    assert svc["spec"]["ports"][0]["appProtocol"] == "grpc"


@pytest.mark.parametrize(
    ("ports", "path", "words"),
    [
        ([{"name": "a", "port": 1}, {"port": 2}], "spec.service.ports[1].name", "required"),
        ([{"port": 1}, {"port": 2}], "spec.service.ports[0].name", "required"),
        ([{"name": "a", "port": 1}, {"name": "a", "port": 2}], "spec.service.ports", "'a'"),
        (
            [{"name": "a", "port": 80}, {"name": "b", "port": 80, "protocol": "TCP"}],
            "spec.service.ports[1]",
            "port 80/TCP is repeated",
        ),
        (
            [{"port": 1, "protocol": "HTTP"}],
            "spec.service.ports[0].protocol",
            "one of `TCP`, `UDP` or `SCTP`",
        ),
        ([{"port": 1, "appProtocol": "not a name"}], "spec.service.ports[0].appProtocol", ""),
        ([{"name": "Torch", "port": 1}], "spec.service.ports[0].name", "pattern"),
    ],
    ids=["one-unnamed", "both-unnamed", "same-name", "same-port", "protocol", "app", "name"],
)
def test_ports_a_service_refuses_are_refused(
    manager: PluginManager, ports: list[dict[str, Any]], path: str, words: str
) -> None:
    doc = generic_example()
    doc["spec"]["service"] = {"ports": ports}
    with pytest.raises(JobError) as err:
        load_job(doc, manager)
    messages = [str(p) for p in err.value.problems]
    assert any(m.startswith(path + ":") and words in m for m in messages), messages


def _problems(manager: PluginManager, doc: dict[str, Any]) -> list[str]:
    with pytest.raises(JobError) as err:
        load_job(doc, manager)
    return [str(p) for p in err.value.problems]


@pytest.mark.parametrize(
    ("group", "key", "text", "path"),
    [
        ("containers", "command", "$(replicas[chief])", "containers[0].command[2]"),
        ("containers", "args", "--n=$(replicas[chief])", "containers[0].args[1]"),
        ("initContainers", "command", "$(replicas[chief])", "initContainers[0].command[2]"),
        ("initContainers", "args", "$(replicas[chief])", "initContainers[0].args[1]"),
    ],
)
def test_unresolved_variables_in_command_and_args_name_the_item(
    manager: PluginManager, group: str, key: str, text: str, path: str
) -> None:
    doc = generic_example()
    pod_spec = doc["spec"]["replicaSpecs"][1]["template"]["spec"]
    pod_spec.setdefault(group, [{"name": "c", "image": "busybox"}])
    pod_spec[group][0][key] = ["python", "t.py", text] if key == "command" else ["t.py", text]
    assert _problems(manager, doc) == [
        f"spec.replicaSpecs[1].template.spec.{path}: cannot resolve $(replicas[chief])"
    ]


def test_unresolved_service_variables_say_when_the_job_has_no_service(
    manager: PluginManager,
) -> None:
    doc = generic_example()
    env = doc["spec"]["replicaSpecs"][0]["template"]["spec"]["containers"][0]["env"]
    env[3]["value"] = "$(service.port[web])"  # no such port
    assert _problems(manager, doc) == [
        "spec.replicaSpecs[0].template.spec.containers[0].env[3].value:"
        " cannot resolve $(service.port[web])"
    ]
    del doc["spec"]["service"]
    assert _problems(manager, doc)[:2] == [
        "spec.replicaSpecs[0].template.spec.containers[0].env[2].value:"
        " cannot resolve $(service.master[0].host) (the job has no spec.service)",
        "spec.replicaSpecs[0].template.spec.containers[0].env[3].value:"
        " cannot resolve $(service.port[web]) (the job has no spec.service)",
    ]


def test_repeated_service_port_names_are_refused(manager: PluginManager) -> None:
    doc = generic_example()
    doc["spec"]["service"]["ports"] += [
        {"name": "web", "port": 80},
        {"name": "torch", "port": 2223},
        {"name": "web", "port": 81},
    ]
    assert _problems(manager, doc) == [
        "spec.service.ports: port name 'torch' is repeated",
        "spec.service.ports: port name 'web' is repeated",
    ]


def test_kind_info(manager: PluginManager) -> None:
    info = manager.kind_info("GenericJob")
    assert (info.plural, info.short_names) == ("genericjobs", ("gj",))


def test_variables_are_substituted_in_init_containers_and_args_too(
    manager: PluginManager,
) -> None:
    doc = generic_example()
    pod_spec = doc["spec"]["replicaSpecs"][1]["template"]["spec"]
    pod_spec["containers"][0]["args"] = ["--rank=$(rank)", "--of=$(replicas[worker])"]
    pod_spec["initContainers"] = [
        {"name": "wait", "image": "busybox", "command": ["wait-for", "$(service.master[0].host)"]}
    ]
    job, _ = load_job(doc, manager)
    pods = {o["metadata"]["name"]: o for o in render_job(job, manager) if o["kind"] == "Pod"}
    pod = pods["generic-ddp-worker-2"]
    assert pod["spec"]["containers"][0]["args"] == ["--rank=2", "--of=3"]
    assert pod["spec"]["initContainers"][0]["command"] == ["wait-for", "generic-ddp-master-0"]


@pytest.mark.parametrize(
    ("rules", "found"),
    [
        ([{}], ["spec.successRules[1]: a rule must name at least one replica type"]),
        ([{"chief": [0]}], ["spec.successRules[1].chief: no replica type 'chief' in the job"]),
        (
            [{"worker": [2, 3, 5]}],
            [
                "spec.successRules[1].worker[1]: index 3 is out of range: worker has 3 replicas",
                "spec.successRules[1].worker[2]: index 5 is out of range: worker has 3 replicas",
            ],
        ),
        ([{"worker": [-1]}], ["spec.successRules[1].worker[0]: must be >= 0"]),
    ],
)
def test_finish_rule_problems_word_for_word(
    manager: PluginManager, rules: list[dict[str, Any]], found: list[str]
) -> None:
    doc = generic_example()
    doc["spec"]["successRules"] += rules
    assert _problems(manager, doc) == found


def test_a_replica_type_without_containers(manager: PluginManager) -> None:
    doc = generic_example()
    doc["spec"]["replicaSpecs"][1]["template"]["spec"]["containers"] = []
    assert _problems(manager, doc) == [
        "spec.replicaSpecs[1].template.spec.containers: at least one container"
    ]


def test_no_service_hint_for_a_variable_that_is_no_service_one(manager: PluginManager) -> None:
    doc = generic_example()
    del doc["spec"]["service"]
    for rs in doc["spec"]["replicaSpecs"]:
        rs["template"]["spec"]["containers"][0]["env"] = [{"name": "N", "value": "$(replicas[x])"}]
    assert _problems(manager, doc) == [
        f"spec.replicaSpecs[{i}].template.spec.containers[0].env[0].value:"
        " cannot resolve $(replicas[x])"
        for i in range(2)
    ]


def test_a_port_keeps_its_protocol(manager: PluginManager) -> None:
    ports = [{"name": "torch", "port": 2222, "protocol": "UDP"}]
    for svc in _services(manager, ports):
        assert svc["spec"]["ports"] == [
            {"name": "torch", "port": 2222, "targetPort": 2222, "protocol": "UDP"}
        ]


def _verdict(manager: PluginManager, doc: dict[str, Any], **states: str) -> Any:
    job, _ = load_job(doc, manager)
    verdict = manager.hooks_for("GenericJob").compute_status(job, _states(**states))
    return None if verdict is None else (verdict.outcome, verdict.reason, verdict.message)


def test_verdicts_word_for_word(manager: PluginManager) -> None:
    doc = generic_example()
    ok = dict(master_0="Succeeded", worker_0="Running", worker_1="Running", worker_2="Running")
    assert _verdict(manager, doc, **ok) == (
        "Succeeded",
        "SuccessRuleMatched",
        "successRules[0] is fulfilled",
    )
    failed = {**ok, "master_0": "Failed", "worker_1": "Failed"}
    assert _verdict(manager, doc, **failed) == (
        "Failed",
        "FailureRuleMatched",
        "j-master-0 failed with exit code 1; j-worker-1 failed with exit code 1"
        " (failureRules[0] is fulfilled)",
    )
    del doc["spec"]["successRules"], doc["spec"]["failureRules"]
    assert _verdict(manager, doc, **{**ok, "worker_2": "Failed"}) == (
        "Failed",
        "ReplicaFailed",
        "j-worker-2 failed with exit code 1",
    )
    done = {k: "Succeeded" for k in ok}
    assert _verdict(manager, doc, **done) == ("Succeeded", "AllSucceeded", "all replicas succeeded")


def test_every_replica_finished_without_a_rule_fulfilled(manager: PluginManager) -> None:
    doc = generic_example()
    doc["spec"]["successRules"] = [{"worker": [0, 1]}]
    doc["spec"]["failureRules"] = [{"master": [0]}]
    states = dict(master_0="Succeeded", worker_0="Succeeded", worker_1="Failed", worker_2="Failed")
    assert _verdict(manager, doc, **states) == (
        "Failed",
        "NoRuleMatched",
        "every replica finished but no success or failure rule is fulfilled",
    )
    assert _verdict(manager, doc, **{**states, "worker_2": "Running"}) is None


def test_every_repeated_replica_type_is_named(manager: PluginManager) -> None:
    doc = generic_example()
    master, worker = doc["spec"]["replicaSpecs"]
    doc["spec"]["replicaSpecs"] = [master, worker, copy.deepcopy(master), copy.deepcopy(worker)]
    assert _problems(manager, doc) == [
        "spec.replicaSpecs: replica types must be unique; repeated: master, worker"
    ]


def test_a_job_has_at_most_max_pods_replicas_in_all(manager: PluginManager) -> None:
    doc = generic_example()
    master, worker = doc["spec"]["replicaSpecs"]
    master["replicas"], worker["replicas"] = 1, MAX_PODS - 1
    load_job(doc, manager)  # exactly MAX_PODS: accepted
    worker["replicas"] = MAX_PODS
    assert _problems(manager, doc) == [
        f"spec.replicaSpecs: a job has at most {MAX_PODS} replicas in all, this one {MAX_PODS + 1}"
    ]
