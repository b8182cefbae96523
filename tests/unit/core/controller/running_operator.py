"""An operator's `run()` in a thread against the stand-in API server, with its health endpoint."""

from __future__ import annotations

import threading
from typing import Any

from t9kjobs.controller.operator import Operator, Options
from t9kjobs.manager import PluginManager
from t9kjobs.testing.harness.process import free_port, http_get
from tests.unit.core.kube.standin_api import StandInApi


class Running:
    """An operator's `run()` in a thread, with its health endpoint."""

    def __init__(self, api: StandInApi, manager: PluginManager, **options: Any) -> None:
        self.port = free_port()
        defaults: dict[str, Any] = {
            "metrics_address": "127.0.0.1:0",
            "health_address": f"127.0.0.1:{self.port}",
            "identity": "replica-a",
            "leader_election_namespace": "ns",
            "workers": 2,
        }
        self.operator = Operator(Options(**{**defaults, **options}), manager, api.configuration())
        self.result: list[int] = []
        self.thread = threading.Thread(target=lambda: self.result.append(self.operator.run()))

    def start(self) -> Running:
        self.thread.start()
        return self

    def get(self, path: str) -> int:
        try:
            return http_get(f"http://127.0.0.1:{self.port}{path}", timeout=2)[0]
        except OSError:
            return 0

    def stop(self) -> None:
        self.operator.stop.set()
        self.thread.join(15)
