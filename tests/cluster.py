"""The local cluster of hack/cluster for test tiers: start or reuse it, and namespaces in it.

Two tiers use it, each with its own package-scoped ``cluster`` fixture so that one cluster runs
at a time in a ``pytest tests`` run (the e2e package's ends before the real tier's starts):

* ``tests/e2e``: KWOK nodes (simulated pods), ``T9KJOBS_CLUSTER_DIR`` (default in the cache);
* ``tests/real``: one real node (``T9KJOBS_NODES=real``), in ``cluster-real`` beside it, unless
  a real cluster already runs at ``T9KJOBS_CLUSTER_DIR``.

A cluster found running is reused and left running; one started here is always stopped with
``hack/cluster/down.sh``: when its tier ends, and through ``atexit`` and a SIGTERM handler when
the run is interrupted. Environment: ``T9KJOBS_CACHE``, ``T9KJOBS_CLUSTER_DIR`` (docs/cluster.md).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import signal
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.repo import REPO
from tests.waiting import until

HACK = REPO / "hack" / "cluster"

T = TypeVar("T")


def cache_root() -> Path:
    if os.environ.get("T9KJOBS_CACHE"):
        return Path(os.environ["T9KJOBS_CACHE"])
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "t9kjobs"


def cluster_dir() -> Path:
    """The cluster dir the scripts use (``$T9KJOBS_CLUSTER_DIR``, default in the cache)."""
    if os.environ.get("T9KJOBS_CLUSTER_DIR"):
        return Path(os.environ["T9KJOBS_CLUSTER_DIR"])
    return cache_root() / "cluster"


def _read_env(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            values[key] = value
    return values


class Cluster:
    """A running local cluster.

    Attributes: ``dir`` (cluster dir), ``kubeconfig`` (admin kubeconfig, group
    system:masters), ``bin_dir`` (etcd, kube-*, kubectl, kwok), ``kubectl_path``,
    ``server`` (API server URL), ``env`` (everything in ``cluster.env``: ports, CIDRs),
    ``started_here`` (whether this test run started it and so will stop it).
    """

    def __init__(self, directory: Path, started_here: bool) -> None:
        self.dir = directory
        self.env = _read_env(directory / "cluster.env")
        self.kubeconfig = Path(self.env["KUBECONFIG"])
        self.bin_dir = Path(self.env["BIN_DIR"])
        self.kubectl_path = self.bin_dir / "kubectl"
        self.server = self.env["APISERVER_URL"]
        self.started_here = started_here
        self._stopped = False

    def api_client(self) -> Any:
        """A new ``kubernetes.client.ApiClient`` configured from the admin kubeconfig."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))

    def kubectl(
        self,
        *args: str,
        check: bool = True,
        input: str | None = None,
        timeout: float = 120,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl with the admin kubeconfig; text output captured.

        Raises ``AssertionError`` with kubectl's stderr when ``check`` and it fails.
        """
        proc = subprocess.run(
            [str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}{proc.stdout}"
            )
        return proc

    @staticmethod
    def poll(
        fn: Callable[[], T | None],
        *,
        timeout: float = 120,
        interval: float = 0.25,
        message: str = "condition",
    ) -> T:
        """Call ``fn`` until it returns a truthy value and return that value
        (``tests.waiting.until``; any exception of ``fn`` is retried).

        Fails the test after ``timeout`` seconds; the last exception ``fn`` raised (if any) is
        chained. Use generous timeouts: this checks that something happens, not how fast.
        """
        return until(fn, timeout, interval=interval, what=message, retry=Exception)

    def stop(self) -> None:
        """Stop the cluster if this run started it (idempotent)."""
        if not self.started_here or self._stopped:
            return
        _run_script("down.sh", {**os.environ, "T9KJOBS_CLUSTER_DIR": str(self.dir)})
        self._stopped = True


def _run_script(name: str, env: dict[str, str] | None = None) -> int:
    """Run ``hack/cluster/<name>`` to completion, even through Ctrl-C or SIGTERM.

    The script runs in its own session, so a Ctrl-C at the terminal does not reach it (a
    half-run down.sh would leave processes behind). An interrupt while up.sh runs stops
    up.sh and its build (up.sh's exit trap then removes what it started) and is re-raised
    once up.sh has exited;
    an interrupt while down.sh runs is re-raised after down.sh finished.
    """
    proc = subprocess.Popen(["bash", str(HACK / name)], env=env, start_new_session=True)
    interrupt: BaseException | None = None
    while True:
        try:
            rc = proc.wait()
            break
        except (KeyboardInterrupt, SystemExit) as exc:
            interrupt = interrupt or exc
            if name == "up.sh":  # its process group: up.sh and a build it runs
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
    if interrupt is not None:
        raise interrupt
    return rc


def running_mode(directory: Path) -> str | None:
    """``"kwok"`` or ``"real"`` when a cluster runs at ``directory``, else None."""
    if not _running(directory):
        return None
    return _read_env(directory / "cluster.env").get("MODE", "kwok")


def _running(directory: Path) -> bool:
    proc = subprocess.run(
        ["bash", str(HACK / "status.sh")],
        capture_output=True,
        text=True,
        env={**os.environ, "T9KJOBS_CLUSTER_DIR": str(directory)},
    )
    return proc.returncode == 0


@contextlib.contextmanager
def local_cluster(
    pytestconfig: pytest.Config, directory: Path, mode: str, env: dict[str, str]
) -> Iterator[Cluster]:
    """The cluster of ``mode`` (kwok or real) at ``directory``: reused when running, else
    started with ``env`` (up.sh's variables) and stopped when the block ends."""
    running = running_mode(directory)
    if running == mode:
        yield Cluster(directory, started_here=False)
        return
    if running is not None:
        pytest.fail(
            f"a {running} cluster runs at {directory}, these tests need a {mode} one: stop it "
            "(make cluster-down) or point T9KJOBS_CLUSTER_DIR elsewhere"
        )

    env = {**env, "T9KJOBS_CLUSTER_DIR": str(directory)}
    capman = pytestconfig.pluginmanager.getplugin("capturemanager")
    # Show build/start progress live (a cold build takes a while).
    show = capman.global_and_fixture_disabled() if capman else contextlib.nullcontext()
    started: Cluster | None = None

    def teardown() -> None:
        if started is not None:
            started.stop()
        else:  # up.sh failed or was interrupted half-way: down.sh cleans what exists
            _run_script("down.sh", env)

    atexit.register(teardown)
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_DFL, None):
        # Turn SIGTERM into an exception so finalizers and atexit run.
        def _on_sigterm(signum: int, frame: object) -> None:
            raise SystemExit(128 + signum)

        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        with show:
            print(f"\n[tests] starting the local cluster in {directory}", file=sys.stderr)
            rc = _run_script("up.sh", env)
        if rc != 0:
            pytest.fail(f"hack/cluster/up.sh failed (exit {rc}); logs in {directory}/logs")
        started = Cluster(directory, started_here=True)
        yield started
    finally:
        teardown()
        atexit.unregister(teardown)
        if previous in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def kwok_tier(marker: str, description: str, folder: Path) -> tuple[Any, Any, Any]:
    """What the conftest of a tier on the KWOK cluster needs, to bind at its module level:
    `pytest_configure` (registers `marker`), `pytest_collection_modifyitems` (marks every test
    under `folder`) and the package's `cluster` fixture (kwok_cluster, started once for the
    package and stopped after it)."""

    def pytest_configure(config: pytest.Config) -> None:
        config.addinivalue_line("markers", f"{marker}: {description}")

    def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
        for item in items:
            if folder in Path(str(item.fspath)).parents:
                item.add_marker(getattr(pytest.mark, marker))

    @pytest.fixture(scope="package")
    def cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
        """The KWOK cluster: reused when already running, else built (if needed) and started.
        Its audit log lets tests see the requests a client made."""
        with kwok_cluster(pytestconfig) as started:
            yield started

    return pytest_configure, pytest_collection_modifyitems, cluster


@contextlib.contextmanager
def kwok_cluster(pytestconfig: pytest.Config) -> Iterator[Cluster]:
    """The KWOK cluster at ``T9KJOBS_CLUSTER_DIR`` with its audit log (tiers that read it:
    the RBAC check, the chaos tier) and Kueue (tests/e2e/test_kueue.py; jobs without a queue
    are as without it): reused when already running, else started."""
    env = {"T9KJOBS_AUDIT": "1", "T9KJOBS_KUEUE": "1", **os.environ}
    if env.get("T9KJOBS_NODES") == "real":  # that is for tests/real; here the default 4 KWOK nodes
        del env["T9KJOBS_NODES"]
    with local_cluster(pytestconfig, cluster_dir(), "kwok", env) as started:
        yield started


def _namespace_name(node_name: str) -> str:
    base = re.sub(r"[^a-z0-9-]+", "-", node_name.lower()).strip("-")[:40].strip("-")
    return f"e2e-{base}-{uuid.uuid4().hex[:6]}"


@contextlib.contextmanager
def fresh_namespace(cluster: Cluster, test_name: str) -> Iterator[str]:
    """A new namespace for one test (its ``default`` ServiceAccount exists); deleted after."""
    from kubernetes import client

    name = _namespace_name(test_name)
    with cluster.api_client() as api:
        core = client.CoreV1Api(api)
        core.create_namespace(
            client.V1Namespace(
                metadata=client.V1ObjectMeta(name=name, labels={"t9kjobs.dev/e2e": "true"})
            )
        )
        # Pods are rejected until kube-controller-manager created the default ServiceAccount.
        cluster.poll(
            lambda: core.read_namespaced_service_account("default", name),
            timeout=60,
            message=f"ServiceAccount {name}/default",
        )
        try:
            yield name
        finally:
            with contextlib.suppress(Exception):
                core.delete_namespace(name)
