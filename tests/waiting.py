"""Waiting in the cluster tiers (tests/e2e, tests/real, tests/chaos, tests/fuzz, tests/cluster.py):
the one polling loop they share.

* ``until(condition, timeout, interval=..., what=...)``: calls ``condition`` until it returns a
  truthy value, and returns that value. After ``timeout`` seconds it raises ``TimedOut`` (an
  ``AssertionError``: the test fails) naming what it waited for and the last value ``condition``
  returned, or the exception it last raised (chained).
* ``throughout(condition, seconds, interval=..., what=...)``: the opposite, a condition that must
  keep holding for a while (nothing happens that should not).

``condition`` is called at once, then every ``interval`` seconds; once the deadline has passed,
the look that finds it so is the last. Which exceptions of ``condition`` mean "not yet" is
``retry``'s to say (none by default): any other, a failed assertion say, fails at once.
Use generous timeouts: these check that something happens, not how fast.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Retry", "TimedOut", "throughout", "until"]

T = TypeVar("T")

# The exceptions of a condition that mean "not yet": exception types, or a test of the exception.
Retry = type[Exception] | tuple[type[Exception], ...] | Callable[[Exception], bool]

_SHOWN = 1000  # characters of the last value a failure message shows


class TimedOut(AssertionError):
    """``until`` gave up: its message names what it waited for and what it saw last."""


def until(
    condition: Callable[[], T | None],
    timeout: float = 120,
    *,
    interval: float = 0.25,
    what: str | Callable[[], str],
    retry: Retry = (),
) -> T:
    """``condition()``'s first truthy value, looked for every ``interval`` seconds.

    ``what`` names what is awaited (a callable is called when the wait fails, for a message
    that shows the state then). Raises ``TimedOut`` after ``timeout`` seconds, chained to the
    exception of the last look if it raised one that ``retry`` covers.
    """
    deadline = time.monotonic() + timeout
    value: T | None = None
    while True:
        error: Exception | None = None
        try:
            value = condition()
        except Exception as exc:
            if not _retried(exc, retry):
                raise
            error = exc
        else:
            if value:
                return value
        if time.monotonic() > deadline:
            seen = f"the last look raised {error!r}" if error else f"the last value was {value!r}"
            name = what() if callable(what) else what
            raise TimedOut(
                f"timed out after {timeout}s waiting for {name}; {_shorten(seen)}"
            ) from error
        time.sleep(interval)


def throughout(
    condition: Callable[[], object], seconds: float, *, interval: float, what: str
) -> None:
    """``condition()`` truthy at each of ``seconds / interval`` looks, ``interval`` apart (the
    first at once; the wait ends one interval after the last). Fails at the first falsy value,
    naming ``what`` and that value; exceptions, a failed assertion say, propagate."""
    for look in range(max(1, round(seconds / interval))):
        value = condition()
        if not value:
            raise AssertionError(
                f"{what} no longer held after {look * interval:g}s: {_shorten(repr(value))}"
            )
        time.sleep(interval)


def _retried(exc: Exception, retry: Retry) -> bool:
    if isinstance(retry, type | tuple):
        return isinstance(exc, retry)
    return retry(exc)


def _shorten(text: str) -> str:
    return text if len(text) <= _SHOWN else f"{text[:_SHOWN]}... ({len(text)} characters)"
