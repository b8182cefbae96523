"""The operators under test, each started as its own process against the phase's cluster:
ours (`t9kjobs operator`) and Kubeflow's training operator v1, built by bench/build.sh.

Both run with the admin kubeconfig, outside the cluster, with their default settings unless
the phase says otherwise (the training operator once more with our client QPS and burst).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from bench.cluster import Cluster
from bench.workload import kubeflow_job, ours_job
from t9kjobs.kube.resources import Resource
from t9kjobs.testing.harness.crds import install_crds
from t9kjobs.testing.harness.process import ServerProcess, free_port, http_get, operator_command
from t9kjobs.vocabulary import Obj

__all__ = ["KubeflowOperator", "OperatorUnderTest", "OurOperator"]

REPO = Path(__file__).resolve().parents[1]


def scrape(url: str, metric: str, by: tuple[str, ...]) -> dict[str, float]:
    """Sum of a counter's samples grouped by the `by` labels ("POST pods")."""
    totals: dict[str, float] = {}
    _, text = http_get(url)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == metric:
                key = " ".join(sample.labels.get(k, "") for k in by)
                totals[key] = totals.get(key, 0.0) + sample.value
    return totals


class OperatorUnderTest(ServerProcess):
    """One operator process: what it needs installed, how to start it, what it reports."""

    name = ""
    title = ""
    jobs: Resource
    job_label = ""  # the pod label naming the job

    def __init__(self, extra_args: list[str] | None = None) -> None:
        super().__init__()
        self.extra_args = list(extra_args or [])

    def job(self, name: str, replicas: int, seconds: int) -> Obj:
        raise NotImplementedError

    def minimum_requests(self, replicas: int) -> int:
        """Requests one job needs at the least: its children's creations and two status
        writes (one recording its start, one its verdict; Running is seen only by a reconcile
        that happens while the pods run)."""
        raise NotImplementedError

    def outcome(self, job: Obj) -> str | None:
        raise NotImplementedError

    def status_label(self, job: Obj) -> str:
        """What a write of the job's status said, in a word or two: the benchmark counts
        each job's writes by what they said (`status_writes` in results.json)."""
        status = job.get("status") or {}
        done = self.outcome(job)
        return done or str(status.get("phase") or "-")

    def prepare(self, cluster: Cluster) -> None:
        raise NotImplementedError

    def command(self, cluster: Cluster) -> list[str]:
        raise NotImplementedError

    def api_requests(self) -> dict[str, float]:
        raise NotImplementedError

    def work_counters(self) -> dict[str, float]:
        """What the operator says it did, where it says it ("reconciles ok", "gc seconds 2");
        nothing for an operator without such counters."""
        return {}

    def start(self, cluster: Cluster, log_path: Path) -> None:
        # PYTHONPATH: the harness runs from the repo, and so does our operator; the caller's
        # PYTHONPATH after it, so that a worktree's layout (`t9kjobs` of that tree) is the
        # operator measured, not the one the venv installed in editable mode.
        path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        self.launch(self.command(cluster), log_path, {**os.environ, "PYTHONPATH": path})


class OurOperator(OperatorUnderTest):
    name = "ours"
    title = "t9k-jobs (ours)"
    jobs = Resource("batch.tensorstack.dev", "v1beta1", "pytorchtrainingjobs", "PyTorchTrainingJob")
    job_label = "tensorstack.dev/owner-name"

    def __init__(self, extra_args: list[str] | None = None, *, reserving: bool = False) -> None:
        """`reserving`: the jobs' pods request something (the bench's `--pod-cpu`)."""
        super().__init__(extra_args)
        self.reserving = reserving

    def job(self, name: str, replicas: int, seconds: int) -> Obj:
        return ours_job(name, replicas, seconds)

    def minimum_requests(self, replicas: int) -> int:
        # pods, one headless Service, status writes; a gang's PodGroup created and deleted
        # (kube-scheduler's gang scheduling, on by default where the cluster serves it) for
        # jobs whose pods reserve something (docs/scheduling.md, "Gangs that buy nothing").
        gangs = self.reserving and "--gang-scheduling=none" not in self.extra_args
        return replicas + 1 + 2 + (2 if gangs else 0) + self.queued

    # Set for a workload whose jobs wait in a Kueue queue: their Workload created, and
    # declared Finished (t9kjobs.planner.queueing).
    queued = 0

    def outcome(self, job: Obj) -> str | None:
        phase = (job.get("status") or {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    def status_label(self, job: Obj) -> str:
        """The phase and its replicas' counts: "Succeeded running=3 succeeded=1"."""
        status = job.get("status") or {}
        counts = " ".join(f"{k}={v}" for k, v in (status.get("aggregate") or {}).items() if v)
        return f"{status.get('phase') or '-'} {counts}".strip()

    def prepare(self, cluster: Cluster) -> None:
        install_crds(cluster.kubectl_path, cluster.kubeconfig)
        cluster.wait_for_garbage_collector(self.jobs.api_version, self.jobs.kind)

    def command(self, cluster: Cluster) -> list[str]:
        command = operator_command(cluster.kubeconfig, self.metrics_port, self.health_port)
        return [*command, *self.extra_args]

    def api_requests(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        return scrape(url, "t9kjobs_api_requests_total", ("verb", "resource"))

    def work_counters(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        reconciles = scrape(url, "t9kjobs_reconciles_total", ("result",))
        gc_seconds = scrape(url, "t9kjobs_gc_seconds_total", ("generation",))
        return {
            **{f"reconciles {k}": v for k, v in reconciles.items()},
            **{f"gc seconds {k}": v for k, v in gc_seconds.items()},
        }


# Where controller-runtime's webhook server reads its certificate; in a cluster, a volume of
# the Secret that the operator's cert rotator fills. Fixed in the training operator's code.
_WEBHOOK_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
_WEBHOOK_SECRET = ("kubeflow", "training-operator-webhook-cert")


class KubeflowOperator(OperatorUnderTest):
    name = "training-operator"
    title = "Kubeflow training operator"
    jobs = Resource("kubeflow.org", "v1", "pytorchjobs", "PyTorchJob")
    job_label = "training.kubeflow.org/job-name"

    def __init__(self, bin_dir: Path, extra_args: list[str] | None = None) -> None:
        super().__init__(extra_args)
        self.bin_dir = bin_dir
        self.webhook_port = free_port()
        self._mounter: threading.Thread | None = None

    def job(self, name: str, replicas: int, seconds: int) -> Obj:
        return kubeflow_job(name, replicas, seconds)

    def minimum_requests(self, replicas: int) -> int:
        return 2 * replicas + 2  # pods, one Service per pod, status writes

    def outcome(self, job: Obj) -> str | None:
        for c in (job.get("status") or {}).get("conditions") or []:
            if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
                return str(c["type"])
        return None

    def prepare(self, cluster: Cluster) -> None:
        # Every CRD of its default schemes: it starts a controller for each.
        cluster.kubectl("apply", "--server-side", "-f", str(self.bin_dir / "crds"))
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", "crd/pytorchjobs.kubeflow.org"
        )
        cluster.wait_for_garbage_collector(self.jobs.api_version, self.jobs.kind)
        # Its cert rotator fills this Secret; the manifests create it empty.
        namespace, secret = _WEBHOOK_SECRET
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("-n", namespace, "create", "secret", "generic", secret)

    def command(self, cluster: Cluster) -> list[str]:
        return [
            str(self.bin_dir / "training-operator"),
            "--kubeconfig",
            cluster.kubeconfig,
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
            f"--webhook-server-port={self.webhook_port}",
            *self.extra_args,
        ]

    def start(self, cluster: Cluster, log_path: Path) -> None:
        shutil.rmtree(_WEBHOOK_CERT_DIR, ignore_errors=True)
        super().start(cluster, log_path)
        self._mounter = threading.Thread(
            target=self._mount_certs, args=(cluster,), name="mount-certs", daemon=True
        )
        self._mounter.start()

    def _mount_certs(self, cluster: Cluster) -> None:
        """Do what the kubelet does with the Secret volume: write its keys as files."""
        namespace, secret = _WEBHOOK_SECRET
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            data = (
                json.loads(
                    cluster.kubectl("-n", namespace, "get", "secret", secret, "-o", "json")
                ).get("data")
                or {}
            )
            if "tls.crt" in data and "tls.key" in data:
                _WEBHOOK_CERT_DIR.mkdir(parents=True, exist_ok=True)
                for key in ("tls.key", "tls.crt"):  # the certificate last: its presence means ready
                    (_WEBHOOK_CERT_DIR / key).write_bytes(base64.b64decode(data[key]))
                return
            time.sleep(0.3)

    def ready(self) -> bool:
        """Ready, and the PyTorchJob controller started (it is set up only once the webhook
        certificates are in place)."""
        started = '"controller": "pytorchjob-controller", "worker count"'
        return super().ready() and started in self.log.read_text(errors="replace")

    def api_requests(self) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        return scrape(url, "rest_client_requests_total", ("method",))

    def stop(self, grace: float = 15) -> int | None:
        code = super().stop(grace)
        shutil.rmtree(_WEBHOOK_CERT_DIR.parent, ignore_errors=True)
        return code
