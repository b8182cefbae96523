"""Worked examples of the hooks for docs/plugin-reference.md, run whenever it is rendered.

Each example is a few Python lines, run in order in one namespace as in a REPL: the value of
the last line of each step is shown under it, in the guide, as the hook returned it. Rendering
the guide runs them, so `hack/gen_plugin_guide.py --check` (a unit test) fails as soon as a
hook's answer changes or an example stops running: the examples cannot rot.

The MPIJob template (examples/plugin-template/) is loaded by hand beside the installed plugins,
from the repository, whether or not it is installed; the cross-cutting hooks are shown with the
bundled `scheduling` and `networkpolicy` plugins, `t9kjobs_update_status` with
PyTorchTrainingJob's TensorBoard.
"""

from __future__ import annotations

import importlib
import pprint
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.kinds import FunctionRun, ReplicaState
from t9kjobs.loading import parse_job
from t9kjobs.manager import PluginManager
from t9kjobs.models import dump
from t9kjobs.testing.fixtures import job_from_yaml

__all__ = ["EXAMPLES", "namespace", "render_example"]

REPO = Path(__file__).resolve().parents[1]
TEMPLATE = REPO / "examples" / "plugin-template"

# hook → steps; a step is (what it shows, Python lines: the last one's value is shown).
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "t9kjobs_kinds": [
        ("The template declares one kind:", "mpijob.t9kjobs_kinds()"),
    ],
    "t9kjobs_options": [
        (
            "The `networkpolicy` feature plugin declares three options: each the flag `--NAME`"
            " of `t9kjobs operator` and `t9kjobs render`, the chart's value beside it:",
            "[(o.flag_name, o.helm, o.default_value()) for o in networkpolicy.t9kjobs_options()]",
        ),
    ],
    "t9kjobs_configure": [
        (
            "With the defaults (`--network-policy` not given) it stays as registered, and adds"
            " nothing:",
            'off = {"network-policy": False, "network-policy-allow-namespace": (),'
            ' "network-policy-allow-pods": ()}\n'
            "networkpolicy.t9kjobs_configure(options=off)",
        ),
        (
            "The `scheduling` plugin configured as by `--gang-scheduling t9k`: the object that"
            " the plugin manager holds in its place (its hooks are methods; below: `gangs`):",
            'gangs = scheduling.t9kjobs_configure(options={"gang-scheduling": "t9k"})\n'
            "type(gangs).__name__, gangs.mode",
        ),
    ],
    "t9kjobs_child_kinds": [
        (
            "Under `t9k`, the one kind it creates, the T9k scheduler's PodGroup: updated in"
            " place, deleted while the job has no pods:",
            "gangs.t9kjobs_child_kinds()",
        ),
        (
            "Under `auto`, kube-scheduler's too (an alpha API: its spec is immutable, so it is"
            " replaced when it changes); under `none`, the plugin as registered declares none:",
            'auto = scheduling.t9kjobs_configure(options={"gang-scheduling": "auto"})\n'
            "[c.key for c in auto.t9kjobs_child_kinds()],"
            ' scheduling.t9kjobs_configure(options={"gang-scheduling": "none"})',
        ),
    ],
    "t9kjobs_validate": [
        (
            "An invalid example whose launcher has no container parses (the spec model allows"
            " an empty template), and the hook names the field:",
            'bad = parse_job(manifest("invalid/launcher-without-container.yaml"), manager)\n'
            "mpijob.t9kjobs_validate(job=bad)",
        ),
        ("A valid job has no problem:", "mpijob.t9kjobs_validate(job=job)"),
    ],
    "t9kjobs_build_pods": [
        (
            "For `examples/pi.yaml` (2 workers): a launcher and one pod per worker, with what"
            " the engine needs to run them:",
            "pods = mpijob.t9kjobs_build_pods(job=job)\n"
            "[(p.name, p.restart, p.training_container, p.stop_when_finished,"
            " p.recreate_on_change) for p in pods]",
        ),
        (
            "Each manifest comes from `new_pod`: named, labelled, owned, `restartPolicy: Never`,"
            " on the job's headless Service; the template mounted the SSH Secret:",
            "pods[1].manifest",
        ),
    ],
    "t9kjobs_build_launch_command": [
        ("A worker runs sshd:", "mpijob.t9kjobs_build_launch_command(job=job, pod=pods[1])[:2]"),
        (
            "The launcher runs a script that waits for every worker's sshd, then its last line:",
            "argv = mpijob.t9kjobs_build_launch_command(job=job, pod=pods[0])\n"
            "argv[:2], argv[2].splitlines()[-1]",
        ),
    ],
    "t9kjobs_build_objects": [
        (
            "The SSH Secret (key material filled by the controller), the hostfile and the"
            " headless Service:",
            "objects = mpijob.t9kjobs_build_objects(job=job)\n"
            '[(o["kind"], o["metadata"]["name"]) for o in objects]',
        ),
        ("The hostfile:", 'objects[1]["data"]["hostfile"].splitlines()'),
    ],
    "t9kjobs_build_auxiliary_objects": [
        (
            "The `scheduling` plugin (configured: `gangs`), for `examples/debug.yaml`"
            " (`scheduler.t9kScheduler: {queue: default}`, 1 launcher and 3 workers): a PodGroup"
            " of all 4 pods:",
            'debug = job_from_yaml(TEMPLATE / "examples" / "debug.yaml", manager)\n'
            "debug_pods = mpijob.t9kjobs_build_pods(job=debug)\n"
            "none = frozenset()\n"
            "gangs.t9kjobs_build_auxiliary_objects(job=debug, pods=debug_pods, absent_kinds=none)",
        ),
        (
            "A job without `t9kScheduler` gets none:",
            "gangs.t9kjobs_build_auxiliary_objects(job=job, pods=pods, absent_kinds=none)",
        ),
    ],
    "t9kjobs_mutate_pod": [
        (
            "The `scheduling` plugin puts the pod in the PodGroup, in place:",
            "pod = debug_pods[1]\n"
            "gangs.t9kjobs_mutate_pod(job=debug, pod=pod, absent_kinds=frozenset())\n"
            'pod.manifest["spec"]["schedulerName"], pod.manifest["metadata"]["labels"]',
        ),
        (
            "Without the PodGroup CRD, it leaves the pod alone (the engine says `Degraded`):",
            "pod = mpijob.t9kjobs_build_pods(job=debug)[1]\n"
            'absent = frozenset({"PodGroup"})\n'
            "gangs.t9kjobs_mutate_pod(job=debug, pod=pod, absent_kinds=absent)\n"
            '"schedulerName" in pod.manifest["spec"]',
        ),
    ],
    "t9kjobs_compute_status": [
        (
            "The launcher succeeded for good: the job succeeded.",
            'done = ReplicaState("launcher", 0, "mpi-pi-launcher", "Succeeded", exit_code=0,'
            " final=True)\n"
            "mpijob.t9kjobs_compute_status(replicas=[done])",
        ),
        (
            "A worker failed for good (its restart policy or the budget says no more): the job"
            " failed, naming the pod, its exit code and container.",
            'lost = ReplicaState("worker", 1, "mpi-pi-worker-1", "Failed", exit_code=1,'
            ' final=True, container="mpi")\n'
            "mpijob.t9kjobs_compute_status(replicas=[lost])",
        ),
        (
            "A worker being restarted, others running: no verdict.",
            'again = ReplicaState("worker", 1, "mpi-pi-worker-1", "Restarting", exit_code=137,'
            ' container="mpi")\n'
            'running = ReplicaState("launcher", 0, "mpi-pi-launcher", "Running")\n'
            "mpijob.t9kjobs_compute_status(replicas=[running, again])",
        ),
    ],
    "t9kjobs_update_status": [
        (
            "PyTorchTrainingJob fills `status.tensorboard` (`t9kjobs.tensorboard`); with no"
            " TensorBoard in the cluster (not created yet, or its CRD absent):",
            'board_job = job_from_yaml(REPO / "examples/pytorchtrainingjob/master-worker.yaml")\n'
            "status = board_job.status\n"
            "pytorch.t9kjobs_update_status(job=board_job, status=status, children={})\n"
            'dump(status)["tensorboard"]',
        ),
        (
            "Once the TensorBoard reports Ready:",
            'board = {"metadata": {"uid": "tb-1"}, "status": {"conditions": [{"type": "Ready",'
            ' "status": "True"}]}}\n'
            'children = {("TensorBoard", board_job.name): board}\n'
            "pytorch.t9kjobs_update_status(job=board_job, status=status, children=children)\n"
            'dump(status)["tensorboard"]',
        ),
    ],
    "t9kjobs_function_spec": [
        (
            "GenericJob runs a function on `nodes` workers, one process each, with torch's"
            " env:// variables (`run.env` is the function, its arguments and the runner:"
            " shortened here):",
            'run = FunctionRun(command=("python3", "-c", "<runner>"), env={"T9KJOBS_FUNCTION_NAME":'
            ' "train"}, image="trainer:1", nodes=2)\n'
            "generic.t9kjobs_function_spec(run=run)",
        ),
    ],
}


def _template_plugin() -> Any:
    """The template's plugin module, from the repository (installed or not)."""
    if str(TEMPLATE) not in sys.path:
        sys.path.insert(0, str(TEMPLATE))
    return importlib.import_module("t9kjobs_mpijob.plugin")


def namespace() -> dict[str, Any]:
    """What the examples may use: the template plugin loaded beside the installed ones."""
    plugin = _template_plugin()
    manager = PluginManager()
    manager.register(plugin, "mpijob")
    manager.load_entry_points()  # the installed plugins; an installed `mpijob` is skipped
    examples = TEMPLATE / "examples"
    return {
        "REPO": REPO,
        "TEMPLATE": TEMPLATE,
        "FunctionRun": FunctionRun,
        "ReplicaState": ReplicaState,
        "dump": dump,
        "job": job_from_yaml(examples / "pi.yaml", manager),
        "job_from_yaml": job_from_yaml,
        "manager": manager,
        "manifest": lambda name: yaml.safe_load((examples / name).read_text()),
        "mpijob": plugin,
        "parse_job": parse_job,
        "generic": importlib.import_module("t9kjobs.plugins.generic.plugin"),
        "networkpolicy": importlib.import_module("t9kjobs.plugins.networkpolicy.plugin"),
        "pytorch": importlib.import_module("t9kjobs.plugins.pytorch.plugin"),
        "scheduling": importlib.import_module("t9kjobs.plugins.scheduling.plugin"),
    }


def _run(code: str, names: dict[str, Any]) -> Any:
    *statements, last = code.splitlines()
    for line in statements:
        exec(line, names)
    return eval(last, names)


def _shown(value: Any) -> str:
    """A Kubernetes object as YAML, as kubectl shows it; anything else as Python prints it."""
    if isinstance(value, dict) and "apiVersion" in value:
        return yaml.safe_dump(value, sort_keys=False, width=96).rstrip()
    return pprint.pformat(value, width=96, sort_dicts=False)


def render_example(hook: str, names: dict[str, Any]) -> Iterator[str]:
    """The worked example of `hook`, its steps run in `names` (shared by every hook, in order)."""
    for text, code in EXAMPLES[hook]:
        value = _run(code, names)
        prompt = "\n".join(f">>> {line}" for line in code.splitlines())
        yield f"{text}\n\n```python\n{prompt}\n{_shown(value)}\n```\n"
