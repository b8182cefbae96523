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

The setting is operator-wide and read from `t9kjobs.settings` at each call (why there, and
not from the environment: that module's docstring). Off, the plugin adds nothing, and jobs
look exactly as without it. The policy is among the objects the engine creates before the pods,
so no pod of the job runs unprotected; a policy is only as good as the network plugin that
enforces it (docs/install.md).

Within a namespace, whoever may create pods may label them as they like: the policy keeps
other namespaces and other jobs' pods out, not a namespace's own members who forge a job's
labels.
"""

from __future__ import annotations

from collections.abc import Sequence

from t9kjobs.plugin import (
    LABEL_REPLICA_TYPE,
    DesiredPod,
    Job,
    KindInfo,
    NetworkPolicySettings,
    Obj,
    current,
    hookimpl,
    owner_labels,
    owner_reference,
)

__all__ = [
    "NAMESPACE_NAME_LABEL",
    "NETWORK_POLICY_API_VERSION",
    "NETWORK_POLICY_KIND",
    "NOT_A_REPLICA",
    "network_policy",
    "t9kjobs_build_auxiliary_objects",
    "t9kjobs_kinds",
]

NETWORK_POLICY_API_VERSION = "networking.k8s.io/v1"
NETWORK_POLICY_KIND = "NetworkPolicy"
# What an `allowPods` peer must not carry: the label of every job's pods.
NOT_A_REPLICA = {"key": LABEL_REPLICA_TYPE, "operator": "DoesNotExist"}
# Set by the API server on every namespace (Kubernetes >= 1.21): a namespace by its name.
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


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


@hookimpl
def t9kjobs_kinds() -> list[KindInfo]:
    return []  # a feature plugin: it serves no kind of its own


@hookimpl
def t9kjobs_build_auxiliary_objects(job: Job, pods: Sequence[DesiredPod]) -> list[Obj]:
    settings = current().network_policy
    if not settings.enabled:
        return []
    return [network_policy(job, settings)]
