"""`t9kjobs.client`: jobs from Python, from a notebook or a pipeline step.

    from t9kjobs.client import Client

    client = Client()                                # kubeconfig, or the pod's service account
    job = client.create("examples/genericjob/mlp.yaml")
    for line in client.logs(job, follow=True):
        print(line)                                  # [worker-0] step 40 ...
    job = client.wait(job)                           # Succeeded (JobEnded if Failed)
    print(job.status.progress)                       # step, percent, time left, metrics
    client.delete(job, wait=True)

Every method is in `Client` (`client`), its exceptions in `errors`, a log line is a `LogLine`
(`logs`); the walkthrough is docs/python.md. `client.train(fn, ...)` runs a Python function as a
job (`training`, `functions`, `runner`), and `Client(backend="local")` runs jobs as processes
of this machine (`local`). `t9kjobs describe` and `t9kjobs logs` are this
package too, so the CLI and the client say the same.

The package stands above the operator's I/O boundary (`t9kjobs.kube`) and below the CLI; it
never imports the controller.
"""

from t9kjobs.client.client import Client, JobEvent
from t9kjobs.client.errors import (
    ApiFailure,
    ClientError,
    Forbidden,
    JobEnded,
    JobExists,
    JobInvalid,
    JobNotFound,
    NoCluster,
    NoLog,
    UnknownKind,
    WaitTimeout,
)
from t9kjobs.client.functions import FunctionNotSendable
from t9kjobs.client.job_logs import LogLine
from t9kjobs.client.local import LocalClient, LocalUnsupported

__all__ = [
    "ApiFailure",
    "Client",
    "ClientError",
    "Forbidden",
    "FunctionNotSendable",
    "JobEnded",
    "JobEvent",
    "JobExists",
    "JobInvalid",
    "JobNotFound",
    "LocalClient",
    "LocalUnsupported",
    "LogLine",
    "NoCluster",
    "NoLog",
    "UnknownKind",
    "WaitTimeout",
]
