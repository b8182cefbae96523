"""The pure lifecycle planner: `plan(job, observed, now, hooks) -> Plan`.

`plan` judges a job in order (`plan`), through one `Situation` and the `Changes` of each step
(`situation`): a job that keeps running (`running`), one that stops (`stopping`), the status
they write (`status`), the pods it wants (`desired`) and how its replicas stand (`replicas`),
where its pods are placed together (`placement`), its place in a Kueue queue (`queueing`) and
its training progress (`progress`), the pods it loses with their nodes (`nodes`), a hung
job's verdict (`stall`) and its ranks' stacks (`stacks`).
`failure` builds the status of a job that cannot go on. No module here does I/O.
"""

from t9kjobs.planner.kueue_policy import KueuePolicy
from t9kjobs.planner.plan import FOLDED_REPLICAS_SECONDS, FOLDED_STATUS_SECONDS, plan
from t9kjobs.planner.types import (
    EngineHooks,
    Event,
    Kueue,
    NodeState,
    ObjectRef,
    Observed,
    Plan,
    ProgressSource,
    Reading,
    Stacks,
)

__all__ = [
    "FOLDED_REPLICAS_SECONDS",
    "FOLDED_STATUS_SECONDS",
    "EngineHooks",
    "Event",
    "Kueue",
    "KueuePolicy",
    "NodeState",
    "ObjectRef",
    "Observed",
    "Plan",
    "ProgressSource",
    "Reading",
    "Stacks",
    "plan",
]
