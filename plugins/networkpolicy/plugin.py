"""A NetworkPolicy per job, for every kind: only the job's own pods may connect to its pods.

Users share namespaces and clusters; a job's ranks listen on ports (rendezvous, gloo, sshd)
that nothing outside the job should reach. With the operator's `--network-policy` (the Helm
value `networkPolicy.jobs.enabled`), each job owns a NetworkPolicy named after it
(`networking.k8s.io/v1`, its controller ownerReference the job, so it goes with the job):

* `podSelector`: the job's owner labels (`tensorstack.dev/owner-kind`, `owner-name`), which
  the engine sets on every pod of the job and templates cannot override;
* `policyTypes: [Ingress]`: egress is left alone (DNS, the API server, data stores);
* one ingress rule, from the pods with the same owner labels in the job's namespace, plus the
  peers the operator was told to admit for every job (`--network-policy-allow-namespace`:
  every pod of a namespace; `--network-policy-allow-pods`: pods of the job's namespace with
  some labels, but never a job's pod). No `ports`: every port, to those peers only.

An `allowPods` peer is a pod with the entry's labels **and without
`tensorstack.dev/replica-type`**, the label the engine gives every pod of every job (of every
kind: the conformance kit checks it) and that a template can neither set nor remove (its domain
is the operator's). Without that, any job's template could give its pods the peer's labels
(`app: notebook`) and so reach every other job's pods in the namespace (issue #47); a notebook
or a TensorBoard beside the jobs is no replica and stays a peer.

The plugin declares its options (`t9kjobs_options`: the flags above, the chart's values beside
them) and is configured with their values (`t9kjobs_configure`): the plugin manager then holds
a `NetworkPolicies` in its place, with the `NetworkPolicySettings` as a value, and only that
object declares the child kind (`t9kjobs_child_kinds`): off, the operator neither watches
NetworkPolicies nor needs the right to. Off, the plugin adds nothing, and jobs look exactly as
without it. The policy is among the objects the engine creates before the pods,
so no pod of the job runs unprotected; a policy is only as good as the network plugin that
enforces it (docs/install.md).

Within a namespace, whoever may create pods may label them as they like: the policy keeps
other namespaces and other jobs' pods out, not a namespace's own members who forge a job's
labels.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from t9kjobs.plugin import (
    LABEL_REPLICA_TYPE,
    ChildKind,
    DesiredPod,
    Job,
    KindInfo,
    Obj,
    Option,
    OptionValue,
    hookimpl,
    is_label_key,
    is_label_value,
    is_namespace_name,
    owner_labels,
    owner_reference,
    parse_labels,
)

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "NETWORK_POLICY_API_VERSION",
    "NETWORK_POLICY_KIND",
    "NOT_A_REPLICA",
    "OPTIONS",
    "NetworkPolicies",
    "NetworkPolicySettings",
    "network_policy",
    "t9kjobs_configure",
    "t9kjobs_kinds",
    "t9kjobs_options",
]

NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"
NETWORK_POLICY_KIND = "NetworkPolicy"
# What an `allowPods` peer must not carry: the label of every job's pods.
NOT_A_REPLICA = {"key": LABEL_REPLICA_TYPE, "operator": "DoesNotExist"}
# Set by the API server on every namespace (Kubernetes >= 1.21): a namespace by its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _namespace(name: str) -> str:
    if not is_namespace_name(name):
        raise ValueError(f"{name!r} is not a namespace name")
    return name


@dataclass(frozen=True)
class NetworkPolicySettings:
    """What the policies admit: with `enabled`, each job owns one selecting its pods, which
    admits ingress from the job's own pods only, plus:

    * `allow_namespaces`: every pod of these namespaces (e.g. the monitoring namespace that
      scrapes the jobs' metrics);
    * `allow_pods`: pods of the job's own namespace that carry all the labels of one entry
      (e.g. a notebook or a TensorBoard beside the jobs), one peer per entry; never a pod of
      a job (`NOT_A_REPLICA`), whatever labels its template gives it.
    """

    enabled: bool = False
    allow_namespaces: tuple[str, ...] = ()
    allow_pods: tuple[tuple[tuple[str, str], ...], ...] = ()

    def __post_init__(self) -> None:
        for name in self.allow_namespaces:
            _namespace(name)
        for labels in self.allow_pods:
            if not labels:
                raise ValueError("an allowed pod selector needs at least one label")
            for key, value in labels:
                if not is_label_key(key) or not is_label_value(value):
                    raise ValueError(f"{key}={value} is not a label")

    @classmethod
    def of(
        cls, enabled: bool, namespaces: Sequence[str] = (), pods: Sequence[str] = ()
    ) -> NetworkPolicySettings:
        """From command-line values: namespaces and `KEY=VALUE[,KEY=VALUE]` selectors, each
        possibly repeated or comma-separated (namespaces); sorted, without duplicates."""
        names = sorted({n.strip() for value in namespaces for n in value.split(",") if n.strip()})
        selectors = sorted({parse_labels(value) for value in pods})
        return cls(enabled, tuple(names), tuple(selectors))


OPTIONS = (
    Option(
        "network-policy",
        "give each job a NetworkPolicy that admits only its own pods (and the peers below); off"
        " by default: it needs a network plugin that enforces NetworkPolicies",
        flag=True,
        helm="networkPolicy.jobs.enabled",
    ),
    Option(
        "network-policy-allow-namespace",
        "with --network-policy: every pod of this namespace may connect to every job's pods too"
        " (repeatable, or comma-separated)",
        repeatable=True,
        comma_separated=True,
        metavar="NS",
        helm="networkPolicy.jobs.allowNamespaces",
        parse=_namespace,
    ),
    Option(
        "network-policy-allow-pods",
        "with --network-policy: pods of a job's own namespace with all these labels may connect"
        " to its pods too, but never a job's pod (repeatable: one selector each)",
        repeatable=True,
        metavar="KEY=VALUE[,KEY=VALUE]",
        helm="networkPolicy.jobs.allowPods",
        parse=parse_labels,
    ),
)


def network_policy(job: Job, settings: NetworkPolicySettings) -> Obj:
    """The job's NetworkPolicy under `settings` (whether they are enabled is not asked)."""
    own = owner_labels(job)
    peers: list[Obj] = [{"podSelector": {"matchLabels": dict(own)}}]
    peers += [
        {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: name}}}
        for name in settings.allow_namespaces
    ]
    peers += [
        {"podSelector": {"matchLabels": dict(labels), "matchExpressions": [dict(NOT_A_REPLICA)]}}
        for labels in settings.allow_pods
    ]
    return {
        "apiVersion": NETWORK_POLICY_API_VERSION,
        "kind": NETWORK_POLICY_KIND,
        "metadata": {
            "name": job.name,
            "namespace": job.namespace,
            "labels": dict(own),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": {
            "podSelector": {"matchLabels": dict(own)},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": peers}],
        },
    }


class NetworkPolicies:
    """The plugin configured on (`--network-policy`): a policy for every job under `settings`."""

    def __init__(self, settings: NetworkPolicySettings) -> None:
        self.settings = settings

    @hookimpl
    def t9kjobs_child_kinds(self) -> list[ChildKind]:
        # Updated in place when the peers change (the operator's options), kept while a job is
        # paused: its pods are gone, and its policy guards the ones it gets back.
        return [ChildKind(NETWORK_POLICY_API_VERSION, NETWORK_POLICY_KIND, "networkpolicies")]

    @hookimpl
    def t9kjobs_build_auxiliary_objects(self, job: Job, pods: Sequence[DesiredPod]) -> list[Obj]:
        return [network_policy(job, self.settings)]


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_options() -> Sequence[Option]:
    return OPTIONS


@hookimpl
def t9kjobs_configure(options: Mapping[str, OptionValue]) -> NetworkPolicies | None:
    """Off (the default): the module as registered, which adds nothing."""
    namespaces = options["network-policy-allow-namespace"]
    pods = options["network-policy-allow-pods"]
    assert isinstance(namespaces, tuple) and isinstance(pods, tuple)
    if not options["network-policy"]:
        if namespaces or pods:
            raise ValueError(
                "--network-policy-allow-namespace and --network-policy-allow-pods need"
                " --network-policy"
            )
        return None
    return NetworkPolicies(
        NetworkPolicySettings(True, tuple(sorted(set(namespaces))), tuple(sorted(set(pods))))
    )
