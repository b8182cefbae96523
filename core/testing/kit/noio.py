"""The conformance kit's I/O guard: hooks are pure, so a hook that does I/O fails, named.

While a hook runs under `IOGuard.during`, these raise `HookIOError` naming the hook and what it
tried: opening a file for writing, or for reading outside the folders the guard was given (the
plugin's own package folder, where its jinja2 templates live, and core's `templates/`, which
`t9kjobs.ssh` renders); connecting a socket or resolving a host name; starting a process.
Python's import system reads modules through `_io` directly, so a lazy import inside a hook is
not mistaken for I/O.

The guard watches the plugin manager (`watch`): every hook call, whoever makes it (the
planner, the manager's hook callers), runs guarded, whatever the hooks' signatures. The patches
are process-wide and only in place while a hook runs: the kit's own file reading (examples,
reports) and the engine's work between hooks are unaffected.
"""

from __future__ import annotations

import builtins
import io
import os
import socket
import subprocess
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pluggy

from t9kjobs.manager import PluginManager

__all__ = ["HookIOError", "IOGuard"]

_INHERITED = object()
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


class HookIOError(Exception):
    """A hook tried to do I/O; the message names the hook and the file, address or program."""


class IOGuard:
    """Refuses I/O while a hook runs, except reading files under `readable` folders."""

    def __init__(self, readable: Sequence[Path]) -> None:
        self.readable = tuple(Path(p).resolve() for p in readable)
        # Every refusal, also those a hook caught and swallowed.
        self.violations: list[str] = []
        self._hook: str | None = None
        self._depth = 0
        self._originals: dict[tuple[Any, str], Any] = {}

    def watch(self, pm: PluginManager) -> None:
        """Guard every hook call of `pm` from now on, whoever makes it (the planner, the kit)."""

        def before(hook: str, impls: Sequence[pluggy.HookImpl], kwargs: object) -> None:
            self._enter(hook)

        def after(
            outcome: object, hook: str, impls: Sequence[pluggy.HookImpl], kwargs: object
        ) -> None:
            self._exit()

        pm.add_hookcall_monitoring(before, after)

    @contextmanager
    def during(self, hook: str) -> Iterator[None]:
        """Guard the body, a direct call of `hook` (not through pluggy)."""
        self._enter(hook)
        try:
            yield
        finally:
            self._exit()

    def call(self, hook: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        with self.during(hook):
            return fn(*args, **kwargs)

    def _enter(self, hook: str) -> None:
        self._depth += 1
        if self._depth == 1:  # nested calls keep the outermost hook's name
            self._hook = hook
            self._originals = self._install()

    def _exit(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            for (owner, attr), value in self._originals.items():
                if value is _INHERITED:
                    delattr(owner, attr)
                else:
                    setattr(owner, attr, value)
            self._originals = {}
            self._hook = None

    # -- the patches ---------------------------------------------------------------------------

    def _refuse(self, what: str) -> HookIOError:
        folders = ", ".join(str(p) for p in self.readable) or "none"
        message = (
            f"{self._hook} {what}: hooks must do no I/O (they may only read files under"
            f" {folders}, e.g. their templates)"
        )
        self.violations.append(message)
        return HookIOError(message)

    def _check_path(self, file: Any, writing: bool) -> None:
        if isinstance(file, int):
            return  # wraps a descriptor opened before the hook ran
        raw = os.fsdecode(os.fspath(file))
        if writing:
            raise self._refuse(f"opened {raw} for writing")
        path = Path(raw).resolve()
        if not any(path.is_relative_to(root) for root in self.readable):
            raise self._refuse(f"opened {raw}")

    def _install(self) -> dict[tuple[Any, str], Any]:
        originals: dict[tuple[Any, str], Any] = {}

        def patch(owner: Any, attr: str, value: Any) -> None:
            # A class attribute it inherits (socket.socket.connect) is restored by deleting it.
            own = attr in vars(owner)
            originals[(owner, attr)] = getattr(owner, attr) if own else _INHERITED
            setattr(owner, attr, value)

        real_open = builtins.open
        real_os_open = os.open

        def guarded_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            self._check_path(file, writing=any(c in mode for c in "wax+"))
            return real_open(file, mode, *args, **kwargs)

        def guarded_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            self._check_path(path, writing=bool(flags & _WRITE_FLAGS))
            return real_os_open(path, flags, *args, **kwargs)

        def no_network(what: str) -> Callable[..., Any]:
            def refuse(*args: Any, **kwargs: Any) -> Any:
                target = next((a for a in args if not isinstance(a, socket.socket)), "")
                raise self._refuse(f"{what} {target!r}")

            return refuse

        def no_process(*args: Any, **kwargs: Any) -> Any:
            command = next((a for a in args if not isinstance(a, subprocess.Popen)), "")
            raise self._refuse(f"started a process {command!r}")

        patch(builtins, "open", guarded_open)
        patch(io, "open", guarded_open)
        patch(os, "open", guarded_os_open)
        patch(socket.socket, "connect", no_network("connected a socket to"))
        patch(socket.socket, "connect_ex", no_network("connected a socket to"))
        patch(socket, "create_connection", no_network("connected to"))
        patch(socket, "getaddrinfo", no_network("resolved"))
        patch(subprocess.Popen, "__init__", no_process)
        patch(os, "system", no_process)
        return originals
