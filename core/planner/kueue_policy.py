"""`KueuePolicy`: what the cluster administrator makes of Kueue for every job, an input of every
plan (`Observed.kueue_policy`).

Kueue's Workload is the engine's own queueing (`t9kjobs.planner.queueing`), not a plugin's: the
policy is the engine's too, set by `t9kjobs operator --kueue-*` (the chart's `kueue.*`) and
handed to the planner with what the cluster holds, never read from a process global; without
the options (a plan by hand, `t9kjobs render`) nothing is required.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from t9kjobs.validation import is_dns_subdomain, is_namespace_name

__all__ = ["KueuePolicy"]


@dataclass(frozen=True)
class KueuePolicy:
    """What the cluster administrator makes of Kueue for every job (docs/scheduling.md):

    * `require_all` / `require_namespaces`: a job must wait in a Kueue queue in every
      namespace, or in these (Kueue's `manageJobsWithoutQueueName` and its
      `managedJobsNamespaceSelector`). A job there that names no queue goes to the LocalQueue
      `default_queue` of its namespace where one of that name exists (as Kueue's
      LocalQueueDefaulting does with the LocalQueue `default`), and is refused otherwise: no
      pod, its `Admitted` condition and a Warning Event say so;
    * `resource_claim_templates`: Kueue counts the devices of a pod's ResourceClaimTemplates
      (its DynamicResourceAllocation feature gate is on, and its deviceClassMappings name the
      DeviceClasses the jobs use). Without it a queued job whose pods have a
      `resourceClaimTemplateName` is refused: Kueue would admit it without counting them.
    """

    require_all: bool = False
    require_namespaces: tuple[str, ...] = ()
    default_queue: str = ""
    resource_claim_templates: bool = False

    def __post_init__(self) -> None:
        for name in self.require_namespaces:
            if not is_namespace_name(name):
                raise ValueError(f"{name!r} is not a namespace name")
        queue = self.default_queue
        # It is a label's value too (kueue.x-k8s.io/queue-name): at most 63 characters.
        if queue and (len(queue) > 63 or not is_dns_subdomain(queue)):
            raise ValueError(f"{queue!r} is not a LocalQueue name")
        if queue and not self.requires_some():
            raise ValueError("a default queue needs namespaces that require a queue")

    @classmethod
    def of(
        cls, require: Sequence[str] = (), default_queue: str = "", claim_templates: bool = False
    ) -> KueuePolicy:
        """From command-line values: `all`, or namespaces (repeated or comma-separated)."""
        names = {n.strip() for value in require for n in value.split(",") if n.strip()}
        every = "all" in names
        return cls(
            require_all=every,
            require_namespaces=() if every else tuple(sorted(names)),
            default_queue=default_queue.strip(),
            resource_claim_templates=claim_templates,
        )

    def requires_some(self) -> bool:
        return self.require_all or bool(self.require_namespaces)

    def requires_queue(self, namespace: str) -> bool:
        """Whether a job of `namespace` must wait in a Kueue queue."""
        return self.require_all or namespace in self.require_namespaces
