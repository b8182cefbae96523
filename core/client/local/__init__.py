"""The local backend: `Client(backend="local")` runs jobs as process groups of this machine.

`LocalClient` (`client`) is the client; `launch` turns the pods the operator would create into
processes (and refuses what cannot run here: `LocalUnsupported`); `jobs` keeps each job's
processes, logs and status.
"""

from t9kjobs.client.local.client import LocalClient, LocalReader
from t9kjobs.client.local.launch import LocalUnsupported

__all__ = ["LocalClient", "LocalReader", "LocalUnsupported"]
