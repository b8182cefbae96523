"""`make demo`: the product end to end on a local control plane.

Starts the local cluster (building it the first time), installs the CRDs, starts the operator,
submits one example job of each kind with simulated pods, prints their progress until all have
finished, shows what they left behind, and tears everything down. A cluster that was already
running is reused and left running.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from t9kjobs.testing.crds import install_crds
from t9kjobs.testing.simulation import simulate, without_claims

REPO = Path(__file__).resolve().parents[1]
NAMESPACE = "t9k-demo"
EXAMPLES = [
    "examples/genericjob/torch-ddp.yaml",
    "examples/pytorchtrainingjob/master-worker.yaml",
    "examples/deepspeedjob/gpt-pretrain.yaml",
    "examples/colossalaijob/minimal.yaml",
]
RUN_SECONDS = 8
TIMEOUT = 300


def cluster_dir() -> Path:
    if os.environ.get("T9KJOBS_CLUSTER_DIR"):
        return Path(os.environ["T9KJOBS_CLUSTER_DIR"])
    cache = Path(os.environ.get("T9KJOBS_CACHE") or Path.home() / ".cache" / "t9kjobs")
    return cache / "cluster"


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def cluster_env() -> dict[str, str]:
    env = {}
    for line in (cluster_dir() / "cluster.env").read_text().splitlines():
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


def demo_jobs() -> list[dict[str, Any]]:
    jobs = []
    for path in EXAMPLES:
        doc = yaml.safe_load((REPO / path).read_text())
        doc["metadata"]["namespace"] = NAMESPACE
        jobs.append(simulate(without_claims(doc), exit_code=0, seconds=RUN_SECONDS))
    return jobs


def progress(kubectl: Kubectl) -> list[dict[str, Any]]:
    jobs = json.loads(kubectl("get", "t9k", "-n", NAMESPACE, "-o", "json"))["items"]
    return sorted(jobs, key=lambda j: (j["kind"], j["metadata"]["name"]))


def print_table(jobs: list[dict[str, Any]], elapsed: float) -> None:
    print(f"--- {elapsed:5.1f}s")
    for job in jobs:
        status = job.get("status") or {}
        agg = status.get("aggregate") or {}
        counts = " ".join(f"{k}={v}" for k, v in agg.items() if v)
        name = f"{job['kind']}/{job['metadata']['name']}"
        print(f"    {name:45} {status.get('phase') or '-':10} {counts}")


def run(kubectl: Kubectl, env: dict[str, str], log_path: Path) -> bool:
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
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        kubectl("create", "namespace", NAMESPACE, check=False)
        say(
            f"submitting one job of each kind; KWOK runs every pod {RUN_SECONDS}s and exits 0"
            " (annotations sim.t9kjobs.dev/*)"
        )
        for job in demo_jobs():
            print(kubectl("apply", "-f", "-", input=yaml.safe_dump(job)), end="")
        say("progress (kubectl get t9k -n t9k-demo), until every job has finished")
        started = time.monotonic()
        while True:
            jobs = progress(kubectl)
            print_table(jobs, time.monotonic() - started)
            done = [
                j for j in jobs if (j.get("status") or {}).get("phase") in ("Succeeded", "Failed")
            ]
            if len(done) == len(EXAMPLES):
                break
            if operator.poll() is not None or time.monotonic() - started > TIMEOUT:
                print(log_path.read_text()[-3000:])
                return False
            time.sleep(2)
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


def main() -> int:
    started_here = (
        subprocess.run(
            ["bash", str(REPO / "hack/cluster/status.sh")], capture_output=True
        ).returncode
        != 0
    )
    if started_here:
        say("starting the local control plane (the first run builds it from Go sources)")
        subprocess.run(["bash", str(REPO / "hack/cluster/up.sh")], check=True)
    env = cluster_env()
    kubectl = Kubectl(env)
    ok = False
    try:
        with tempfile.TemporaryDirectory(prefix="t9k-demo-") as tmp:
            ok = run(kubectl, env, Path(tmp) / "operator.log")
    finally:
        if started_here:
            say("tearing down the local control plane")
            subprocess.run(["bash", str(REPO / "hack/cluster/down.sh")], check=False)
        else:
            kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
    say("demo " + ("finished: every job Succeeded" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
