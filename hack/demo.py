"""`make demo`: the product end to end on a local control plane.

Starts the local cluster (building it the first time), installs the CRDs, starts the operator,
submits one example job of each kind, prints their progress until all have finished, shows
what they left behind, and tears everything down. A cluster that was already running is reused
and left running.

Two ways (docs/cluster.md):
* `make demo` (default): one real node, where every kind trains a small model for real on CPU
  from its runnable example (`examples/*/mlp-cpu.yaml`), and the demo prints a few lines of each
  job's training log: every rank, and its loss going down. Its cluster is the real tier's
  (`<cache>/cluster-real`), unless a real cluster runs at `T9KJOBS_CLUSTER_DIR`.
* `make demo-sim` (`--sim`): KWOK nodes, where each pod of four other examples runs 8 s and
  exits 0 (the simulation annotations `sim.t9kjobs.dev/*`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.testing.harness.crds import install_crds
from t9kjobs.testing.harness.simulation import simulate, without_claims

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "t9k-demo"
# Trained for real on the real node: the examples that say they run as written there.
REAL_EXAMPLES = [
    "examples/genericjob/mlp-cpu.yaml",
    "examples/pytorchtrainingjob/mlp-cpu.yaml",
    "examples/deepspeedjob/mlp-cpu.yaml",
    "examples/colossalaijob/mlp-cpu.yaml",
]
# Simulated on KWOK nodes: pods run RUN_SECONDS and exit 0.
SIM_EXAMPLES = [
    "examples/genericjob/torch-ddp.yaml",
    "examples/pytorchtrainingjob/master-worker.yaml",
    "examples/deepspeedjob/gpt-pretrain.yaml",
    "examples/colossalaijob/minimal.yaml",
]
RUN_SECONDS = 8
TIMEOUT = 600
# What examples/../mlp.py prints when a rank finished.
DONE = re.compile(
    r"done rank=(\d+) world=\d+ first_loss=\S+ last_loss=\S+ steps=\d+ in_sync=(?:True|False)"
)


def cache_root() -> Path:
    return Path(os.environ.get("T9KJOBS_CACHE") or Path.home() / ".cache" / "t9kjobs")


def configured_dir() -> Path:
    if os.environ.get("T9KJOBS_CLUSTER_DIR"):
        return Path(os.environ["T9KJOBS_CLUSTER_DIR"])
    return cache_root() / "cluster"


def running_mode(directory: Path) -> str | None:
    """ "kwok" or "real" when a cluster runs at `directory`, else None."""
    env = {**os.environ, "T9KJOBS_CLUSTER_DIR": str(directory)}
    status = subprocess.run(
        ["bash", str(REPO / "hack/cluster/status.sh")], capture_output=True, env=env
    )
    if status.returncode != 0:
        return None
    text = (directory / "cluster.env").read_text()
    return "real" if "\nMODE=real" in f"\n{text}" else "kwok"


def cluster_dir(real: bool) -> Path:
    """Where the demo's cluster runs: the configured one when it is of the right mode (or
    nothing runs there, for KWOK); for a real node otherwise the real tier's dir beside it."""
    configured = configured_dir()
    mode = running_mode(configured)
    if not real:
        return configured
    return configured if mode == "real" else cache_root() / "cluster-real"


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def cluster_env(directory: Path) -> dict[str, str]:
    env = {}
    for line in (directory / "cluster.env").read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            env[key] = value
    return env


class Kubectl:
    def __init__(self, env: dict[str, str]) -> None:
        self.argv = [f"{env['BIN_DIR']}/kubectl", "--kubeconfig", env["KUBECONFIG"]]

    def __call__(self, *args: str, input: str | None = None, check: bool = True) -> str:
        proc = subprocess.run(
            [*self.argv, *args], input=input, capture_output=True, text=True, check=False
        )
        if check and proc.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)} failed:\n{proc.stderr}")
        return proc.stdout


def demo_jobs(real: bool) -> list[dict[str, Any]]:
    jobs = []
    for path in REAL_EXAMPLES if real else SIM_EXAMPLES:
        doc = yaml.safe_load((REPO / path).read_text())
        doc["metadata"]["namespace"] = NAMESPACE
        if not real:
            doc = simulate(without_claims(doc), exit_code=0, seconds=RUN_SECONDS)
        jobs.append(doc)
    return jobs


def training_lines(kubectl: Kubectl, job: dict[str, Any]) -> list[str]:
    """Each rank's last line (`done rank=R world=W first_loss=X last_loss=Y ...`), from the
    logs of the job's pods that are left (the launchers print their workers' lines too)."""
    name = job["metadata"]["name"]
    selector = f"tensorstack.dev/owner-name={name}"
    pods = json.loads(kubectl("get", "pods", "-n", NAMESPACE, "-l", selector, "-o", "json"))
    by_rank: dict[int, str] = {}
    for pod in pods["items"]:
        log = kubectl("logs", "-n", NAMESPACE, pod["metadata"]["name"], check=False)
        for found in DONE.finditer(log):
            by_rank[int(found.group(1))] = found.group(0)
    return [by_rank[rank] for rank in sorted(by_rank)]


def progress(kubectl: Kubectl) -> list[dict[str, Any]]:
    jobs = json.loads(kubectl("get", "t9k", "-n", NAMESPACE, "-o", "json"))["items"]
    return sorted(jobs, key=lambda j: (j["kind"], j["metadata"]["name"]))


def print_table(kubectl: Kubectl, elapsed: float) -> None:
    """`kubectl get t9k`: phase, replicas running/desired, restarts, reason, age."""
    print(f"--- {elapsed:5.1f}s")
    for line in kubectl("get", "t9k", "-n", NAMESPACE).splitlines():
        print(f"    {line}")


def run(kubectl: Kubectl, env: dict[str, str], log_path: Path, real: bool) -> bool:
    say("installing the CRDs generated from the plugins' models")
    print(install_crds(f"{env['BIN_DIR']}/kubectl", env["KUBECONFIG"]), end="")

    say(f"starting the operator (logs: {log_path})")
    log = log_path.open("w")
    operator = subprocess.Popen(
        [
            sys.executable, "-m", "t9kjobs.cli.main", "operator",
            "--kubeconfig", env["KUBECONFIG"],
            "--metrics-bind-address", "127.0.0.1:0",
            "--health-probe-bind-address", "127.0.0.1:0",
            "--log-format", "text",
            "--progress-interval", "5",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        kubectl("create", "namespace", NAMESPACE, check=False)
        if real:
            say(
                "submitting one job of each kind (examples/*/mlp-cpu.yaml); each trains a small"
                " MLP for real over gloo on CPU, launched the way its kind launches it"
            )
        else:
            say(
                f"submitting one job of each kind; KWOK runs every pod {RUN_SECONDS}s and exits"
                " 0 (annotations sim.t9kjobs.dev/*)"
            )
        examples = demo_jobs(real)
        for job in examples:
            print(kubectl("apply", "-f", "-", input=yaml.safe_dump(job)), end="")
        say("progress (kubectl get t9k -n t9k-demo), until every job has finished")
        started = time.monotonic()
        while True:
            jobs = progress(kubectl)
            print_table(kubectl, time.monotonic() - started)
            done = [
                j for j in jobs if (j.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            ]
            if len(done) == len(examples):
                break
            if operator.poll() is not None or time.monotonic() - started > TIMEOUT:
                print(log_path.read_text()[-3000:])
                return False
            time.sleep(2)
        if real:
            say("what they trained: each rank's last line, its loss at the first and last step")
            for job in jobs:
                print(f"    {job['kind']}/{job['metadata']['name']}:")
                for line in training_lines(kubectl, job) or ["(no training log left)"]:
                    print(f"        {line}")
        say("their progress, as the operator read it from each job's log (status.progress)")
        for job in jobs:
            p = (job.get("status") or {}).get("progress")
            shown = (
                f"{p.get('percent')}% (step {p.get('step')}/{p.get('totalSteps')})"
                f" {' '.join(f'{k}={v:g}' for k, v in (p.get('metrics') or {}).items())}"
                if p
                else "(none reported)"
            )
            print(f"    {job['kind']}/{job['metadata']['name']}: {shown}")
        say("the jobs' events")
        ours = "involvedObject.apiVersion=batch.tensorstack.dev/v1beta1"
        events = ("events", "-n", NAMESPACE, "--sort-by=.lastTimestamp", "--field-selector", ours)
        print(kubectl("get", *events), end="")
        say("what the jobs left (cleanup policies at work)")
        children = (
            "pods,services,configmaps,secrets",
            "-n",
            NAMESPACE,
            "-l",
            "tensorstack.dev/owner-kind",
        )
        print(kubectl("get", *children), end="")
        return all(j["status"]["phase"] == "Succeeded" for j in jobs)
    finally:
        operator.terminate()
        operator.wait(20)
        log.close()


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--sim", action="store_true", help="KWOK nodes and simulated pods (make demo-sim)"
    )
    real = not parser.parse_args(argv).sim
    directory = cluster_dir(real)
    script_env = {**os.environ, "T9KJOBS_CLUSTER_DIR": str(directory)}
    if real:
        script_env["T9KJOBS_NODES"] = "real"
    mode = running_mode(directory)
    if mode is not None and mode != ("real" if real else "kwok"):
        print(
            f"a {mode} cluster runs at {directory}: stop it first (make cluster-down)",
            file=sys.stderr,
        )
        return 2
    started_here = mode is None
    if started_here:
        what = "with one real node" if real else "with KWOK nodes"
        say(f"starting the local control plane {what} (the first run builds it: docs/cluster.md)")
        subprocess.run(["bash", str(REPO / "hack/cluster/up.sh")], check=True, env=script_env)
    env = cluster_env(directory)
    kubectl = Kubectl(env)
    ok = False
    try:
        with tempfile.TemporaryDirectory(prefix="t9k-demo-") as tmp:
            ok = run(kubectl, env, Path(tmp) / "operator.log", real)
    finally:
        if started_here:
            say("tearing down the local control plane")
            subprocess.run(
                ["bash", str(REPO / "hack/cluster/down.sh")], check=False, env=script_env
            )
        else:
            kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    say("demo " + ("finished: every job Succeeded" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
