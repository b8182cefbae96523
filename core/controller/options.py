"""`Options`: how the operator runs, as `t9kjobs operator` sets them from its flags.

The options of plugins (gang scheduling, NetworkPolicies, ...) are not here: each plugin
declares its own (`t9kjobs_options`) and the plugin manager holds the plugin configured with
them (`PluginManager.configure`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from t9kjobs.planner import KueuePolicy

__all__ = ["Options"]


@dataclass
class Options:
    kubeconfig: str | None = None
    namespaces: list[str] = field(default_factory=list)  # empty: all namespaces
    workers: int = 8
    # A client limit only has to stop a runaway loop: the API server protects itself with
    # priority and fairness, and a 429 is waited out (transport). 200/400 came close to
    # bounding a burst of 500 jobs; 500/1,000 is about the most the benchmark's API server
    # took (527 pod creations a second; docs/benchmarks.md).
    qps: float = 500.0
    burst: int = 1000
    leader_elect: bool = False
    leader_election_namespace: str = ""
    leader_election_id: str = "t9k-jobs-operator"
    metrics_address: str = "127.0.0.1:8080"
    health_address: str = "127.0.0.1:8081"
    # The validating admission webhook (t9kjobs.controller.webhook), served by every replica:
    # port 0 is off; its TLS certificate and key are tls.crt and tls.key of webhook_cert_dir.
    webhook_address: str = "0"
    webhook_cert_dir: str = ""
    identity: str = ""
    impersonate: str | None = None
    discovery_interval: float = 30.0
    # Events that say only what a job's status says too (its first pods created, a success):
    # a request a job each, so off unless asked for (t9kjobs.planner.Event).
    routine_events: bool = False
    # A change of a child (or of a job's status) queues the job after this long, once per
    # window: the pods of a job that start or end together cost one reconcile and one status
    # write (the Job controller of kube-controller-manager batches its pod events by 1 s too).
    child_batch_period: float = 1.0
    # A pod that has just finished may decide its job: its job is queued after this shorter
    # window instead, so that the verdict follows the deciding replica within about it (pods
    # that finish together still share the window, and one status write).
    finished_pod_batch_period: float = 0.25
    # Every job is reconciled again this often (+-10%), so that a missed event is not missed
    # for ever; 0 turns it off.
    resync_period: float = 600.0
    # The Lease: held for lease_duration after a renewal; a leader that could not renew for
    # renew_deadline stops; attempts every retry_period (client-go's defaults).
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # Queues, quotas and preemption with Kueue (t9kjobs.planner.queueing, docs/scheduling.md):
    # `auto` speaks to Kueue where the cluster serves its Workloads; `off` ignores its labels.
    kueue: Literal["auto", "off"] = "auto"
    # Queueing made mandatory (namespaces, a default LocalQueue) and what Kueue is known to
    # count (t9kjobs.planner.KueuePolicy): only with `kueue` auto.
    kueue_policy: KueuePolicy = field(default_factory=KueuePolicy)
    # Training progress read from running jobs' logs (t9kjobs.controller.progress_reader): a job at
    # most once every progress_interval seconds, all jobs together at most progress_qps reads
    # a second (0: progress is not read).
    progress_interval: float = 30.0
    progress_qps: float = 5.0
    # Pods on a node not Ready this long (its Ready condition's lastTransitionTime), or on a
    # deleted node, are lost: force-deleted and replaced (t9kjobs.planner.nodes); a job's
    # recoveryPolicy.nodeLostAfterSeconds overrides it. 0: no Node informer, nothing lost.
    lost_node_seconds: float = 60.0
