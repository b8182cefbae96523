"""The pure lifecycle planner: `plan(job, observed, now, hooks) -> Plan`."""

from t9kjobs.planner.plan import plan
from t9kjobs.planner.types import EngineHooks, Event, ObjectRef, Observed, Plan

__all__ = ["EngineHooks", "Event", "ObjectRef", "Observed", "Plan", "plan"]
