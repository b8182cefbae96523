"""`ContractViolation`, the one failure the kit reports: a module of its own, so that every
part of the kit (the subject, the admission tier, the contracts) can raise it without importing
another part."""

from __future__ import annotations

__all__ = ["ContractViolation"]


class ContractViolation(AssertionError):
    """A plugin broke a contract; the message says what was expected and what it did."""
