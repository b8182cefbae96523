"""`t9kjobs operator`: run the controller for every kind of every installed plugin."""

from __future__ import annotations

import argparse
import sys

from t9kjobs.cli.plugin_options import add_plugin_options, configure_plugins
from t9kjobs.manager import PluginManager
from t9kjobs.planner.kueue_policy import KueuePolicy

__all__ = ["add_operator_parser"]


def _run(args: argparse.Namespace, manager: PluginManager) -> int:
    # Imported here: the CLI's offline commands must not pay for the controller's imports.
    from t9kjobs.controller.operator import Operator
    from t9kjobs.controller.options import Options
    from t9kjobs.controller.startup import StartupError
    from t9kjobs.controller.structured_logs import configure_logging

    refused = configure_plugins(args, manager, "operator")
    if refused is not None:
        print(refused, file=sys.stderr)
        return 2
    kueue_policy = _kueue_policy(args)
    if isinstance(kueue_policy, str):
        print(f"t9kjobs operator: {kueue_policy}", file=sys.stderr)
        return 2
    configure_logging(args.log_level, args.log_format)
    namespaces = [n for value in args.namespace for n in value.split(",") if n]
    options = Options(
        kubeconfig=args.kubeconfig,
        namespaces=namespaces,
        workers=args.workers,
        qps=args.qps,
        burst=args.burst,
        leader_elect=args.leader_elect,
        leader_election_namespace=args.leader_election_namespace,
        leader_election_id=args.leader_election_id,
        metrics_address=args.metrics_bind_address,
        health_address=args.health_probe_bind_address,
        webhook_address=args.webhook_bind_address,
        webhook_cert_dir=args.webhook_cert_dir,
        identity=args.identity,
        discovery_interval=args.discovery_interval,
        resync_period=args.resync_period,
        routine_events=args.routine_events,
        progress_interval=args.progress_interval,
        progress_qps=args.progress_qps,
        lost_node_seconds=args.lost_node_seconds,
        lease_duration=args.leader_election_lease_duration,
        renew_deadline=args.leader_election_renew_deadline,
        retry_period=args.leader_election_retry_period,
        kueue=args.kueue,
        kueue_policy=kueue_policy,
    )
    try:
        return Operator(options, manager).run()
    except StartupError as exc:
        print(f"t9kjobs operator: {exc}", file=sys.stderr)
        return 2


def _kueue_policy(args: argparse.Namespace) -> KueuePolicy | str:
    """The Kueue policy of the command line, or why it is refused."""
    given = args.kueue_require_queue or args.kueue_default_queue or args.kueue_claim_templates
    if given and args.kueue == "off":
        return (
            "--kueue-require-queue, --kueue-default-queue and --kueue-resource-claim-templates"
            " need --kueue auto"
        )
    try:
        return KueuePolicy.of(
            args.kueue_require_queue, args.kueue_default_queue, args.kueue_claim_templates
        )
    except ValueError as exc:
        return f"--kueue-require-queue, --kueue-default-queue: {exc}"


def add_operator_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], manager: PluginManager
) -> None:
    """The `operator` command, with every option the loaded plugins declare."""
    p = sub.add_parser(
        "operator",
        help="run the controller",
        description="Run the controller. Without --kubeconfig: $KUBECONFIG, else ~/.kube/config,"
        " else the in-cluster config. Watches all namespaces unless --namespace is given.",
    )
    p.add_argument("--kubeconfig", help="path of a kubeconfig file")
    p.add_argument(
        "--namespace",
        action="append",
        default=[],
        metavar="NS",
        help="watch only these namespaces (repeatable, or comma-separated)",
    )
    p.add_argument("--workers", type=int, default=8, help="concurrent reconciles (default 8)")
    p.add_argument(
        "--qps", type=float, default=500.0, help="client QPS to the API server (500; 0: no limit)"
    )
    p.add_argument("--burst", type=int, default=1000, help="client burst (default 1000)")
    p.add_argument("--leader-elect", action="store_true", help="elect a leader through a Lease")
    p.add_argument(
        "--leader-election-namespace",
        default="",
        help="namespace of the Lease (default: the pod's own namespace, else default)",
    )
    p.add_argument("--leader-election-id", default="t9k-jobs-operator", help="name of the Lease")
    p.add_argument("--identity", default="", help="leader election identity (default host_pid)")
    for flag, default, what in (
        ("lease-duration", 15.0, "how long a Lease holds after its last renewal"),
        ("renew-deadline", 10.0, "a leader that could not renew for this long stops and exits"),
        ("retry-period", 2.0, "how often the Lease is tried and renewed"),
    ):
        p.add_argument(
            f"--leader-election-{flag}",
            type=float,
            default=default,
            metavar="SECONDS",
            help=f"{what} (default {default:g}; retry < renew < lease)",
        )
    p.add_argument(
        "--metrics-bind-address",
        default="127.0.0.1:8080",
        help="address of /metrics (host:port; :port for all interfaces; port 0 disables)",
    )
    p.add_argument(
        "--health-probe-bind-address",
        default="127.0.0.1:8081",
        help="address of /healthz and /readyz (host:port; port 0 disables)",
    )
    p.add_argument(
        "--webhook-bind-address",
        default="0",
        help="address of the validating admission webhook, HTTPS at /validate (host:port;"
        " :port for all interfaces; default 0: off); every replica serves it (docs/install.md)",
    )
    p.add_argument(
        "--webhook-cert-dir",
        default="",
        metavar="DIR",
        help="the webhook's TLS certificate and key: DIR/tls.crt and DIR/tls.key",
    )
    p.add_argument(
        "--discovery-interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how often to look for CRDs installed after start-up (default 30)",
    )
    p.add_argument(
        "--resync-period",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="reconcile every job again this often, +-10%% (default 600; 0: never), so that a"
        " missed event is not missed for ever",
    )
    p.add_argument(
        "--routine-events",
        action="store_true",
        help="also post the Events that say only what a job's status says (PodsCreated for its"
        " first pods, Succeeded); off by default: a request a job each",
    )
    p.add_argument(
        "--progress-interval",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="read a running job's training progress from its log at most this often (default 30)",
    )
    p.add_argument(
        "--progress-qps",
        type=float,
        default=5.0,
        metavar="READS",
        help="progress reads a second, all running jobs together (default 5; 0: progress is"
        " not read): at 500 running jobs, each is read every 100 s",
    )
    p.add_argument(
        "--lost-node-seconds",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a pod on a node not Ready this long, or on a deleted node, is lost: force-deleted"
        " and replaced (default 60; a job's recoveryPolicy.nodeLostAfterSeconds overrides it;"
        " 0: nodes are not watched, and no right on them is needed)",
    )
    p.add_argument(
        "--kueue",
        default="auto",
        choices=("auto", "off"),
        help="queues, quotas and preemption with Kueue (docs/scheduling.md): auto (default)"
        " holds a job labelled kueue.x-k8s.io/queue-name, with no pod, until Kueue admits its"
        " Workload, where the cluster serves kueue.x-k8s.io/v1beta2 Workloads; off: the"
        " operator neither reads nor writes anything of Kueue, and needs no right on it",
    )
    p.add_argument(
        "--kueue-require-queue",
        action="append",
        default=[],
        metavar="all|NS",
        help="queueing made mandatory (docs/scheduling.md; Kueue's manageJobsWithoutQueueName"
        " and managedJobsNamespaceSelector): a job of these namespaces (repeatable, or"
        " comma-separated; all: every namespace) that names no queue waits in the LocalQueue"
        " of --kueue-default-queue, or is refused: no pod, and a Warning Event naming the label"
        " kueue.x-k8s.io/queue-name. Needs --kueue auto",
    )
    p.add_argument(
        "--kueue-default-queue",
        default="",
        metavar="NAME",
        help="with --kueue-require-queue: the LocalQueue a job that names none waits in, where"
        " one of that name exists in its namespace (Kueue's own default LocalQueue is named"
        " default)",
    )
    p.add_argument(
        "--kueue-resource-claim-templates",
        dest="kueue_claim_templates",
        action="store_true",
        help="Kueue counts the devices of ResourceClaimTemplates (its DynamicResourceAllocation"
        " feature gate is on and its deviceClassMappings name the DeviceClasses jobs use): a"
        " queued job's pods may name one; without it such a job is refused, as Kueue would"
        " admit it without counting them",
    )
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.add_argument("--log-format", default="json", choices=("json", "text"))
    add_plugin_options(p, manager)
    p.set_defaults(func=_run)
