"""CPU profiles of the control plane during a phase (`python -m bench --profile-control-plane`).

The operator's own CPU is a tenth of a burst's; the rest is kube-apiserver's, the scheduler's
and kube-controller-manager's work for what a job has (issue #50). Their request counts say
what they were asked; a profile says what the asking cost. Each component serves
`/debug/pprof/profile` on its secure port when the cluster was started with
`T9KJOBS_PROFILING=1` (hack/cluster/up.sh); the admin client certificate is authorised for it.
The profiles are Go's own format, symbolised: `go tool pprof -top FILE` reads them without the
binaries, and `summarize` writes that table beside each.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import threading
import urllib.request
from pathlib import Path

__all__ = ["ControlPlaneProfiler", "summarize"]

COMPONENTS = {
    "kube-apiserver": "APISERVER_PORT",
    "kube-scheduler": "SCHEDULER_PORT",
    "kube-controller-manager": "KCM_PORT",
}


class ControlPlaneProfiler:
    """One CPU profile of `seconds` of each component, taken at once in the background."""

    def __init__(self, facts: dict[str, str], output: Path, seconds: int) -> None:
        self.facts = facts
        self.output = output
        self.seconds = seconds
        self.errors: dict[str, str] = {}
        self._threads: list[threading.Thread] = []

    def _context(self) -> ssl.SSLContext:
        pki = Path(self.facts["CLUSTER_DIR"]) / "pki"
        context = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        # The scheduler and controller-manager serve self-signed certificates for 127.0.0.1.
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        context.load_cert_chain(str(pki / "admin.crt"), str(pki / "admin.key"))
        return context

    def _take(self, component: str, port: str) -> None:
        url = f"https://127.0.0.1:{port}/debug/pprof/profile?seconds={self.seconds}"
        try:
            with urllib.request.urlopen(
                url, context=self._context(), timeout=self.seconds + 60
            ) as response:
                (self.output / f"pprof-{component}.pb.gz").write_bytes(response.read())
        except OSError as e:
            self.errors[component] = str(e)

    def start(self) -> None:
        for component, key in COMPONENTS.items():
            thread = threading.Thread(
                target=self._take,
                args=(component, self.facts[key]),
                name=f"pprof-{component}",
                daemon=True,
            )
            thread.start()
            self._threads.append(thread)

    def join(self) -> dict[str, str]:
        """Wait for every profile; the components that gave none, with the reason."""
        for thread in self._threads:
            thread.join()
        return self.errors


def summarize(directory: Path, nodecount: int = 30) -> None:
    """`go tool pprof -top` of every profile in `directory`, beside it as `.top.txt`, when Go
    is on the PATH (the profiles stay for a later look otherwise)."""
    go = shutil.which("go")
    if go is None:
        return
    for profile in sorted(directory.glob("pprof-*.pb.gz")):
        done = subprocess.run(
            [go, "tool", "pprof", "-top", f"-nodecount={nodecount}", str(profile)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        text = done.stdout if done.returncode == 0 else done.stderr
        profile.with_name(profile.name.replace(".pb.gz", ".top.txt")).write_text(text)
