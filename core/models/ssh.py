"""Where a job's SSH keys go and where its sshd listens: settings of the ssh-based kinds.

The defaults are the seeds' (`/root/.ssh`, sshd as root on port 22). A job whose pods run as a
normal user (`runAsNonRoot`, `runAsUser`) sets `authMountPath` to that user's `~/.ssh` and a
port above 1023: its sshd then runs as that user (docs/security.md, "Non-root"). Paths are held
by shell scripts and ssh configs as they are, so they may only be plain absolute paths.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from t9kjobs.models._base import ApiModel

__all__ = [
    "SAFE_PATH_PATTERN",
    "SAFE_PATH_SAID",
    "SSH_PORT",
    "SshSettings",
    "safe_path_field",
    "safe_path_problem",
    "ssh_port_field",
]

SSH_PORT = 22
# A path segment other than `..`: letters, digits and `._+-`, none of them special to a shell.
_SEGMENT = (
    r"([A-Za-z0-9_+-][A-Za-z0-9._+-]*|[.]([A-Za-z0-9_+-][A-Za-z0-9._+-]*)?|[.][.][A-Za-z0-9._+-]+)"
)
# An absolute path that a shell script or an ssh config may hold as it is: `/` and segments (no
# `..`, no space, no shell character), then an optional `/`. The CRD's `pattern` (RE2, at the
# API server) and the model's check (Python) are this one expression.
SAFE_PATH_PATTERN = rf"^(/{_SEGMENT})+/?$"
_SAFE_PATH = re.compile(SAFE_PATH_PATTERN)
SAFE_PATH_SAID = "an absolute path of letters, digits and `._+-` between `/`, without `..`"


def safe_path_field(default: str, description: str) -> Any:
    return Field(
        default=default, json_schema_extra={"pattern": SAFE_PATH_PATTERN}, description=description
    )


def safe_path_problem(field: str, value: str) -> str | None:
    """Why `value` cannot be held by a script as it is, naming `field`; None when it can."""
    if _SAFE_PATH.fullmatch(value):
        return None
    return f"{field} must be {SAFE_PATH_SAID} (shell scripts hold it as it is), got {value!r}"


def ssh_port_field() -> Any:
    return Field(
        default=SSH_PORT,
        ge=1,
        le=65535,
        description="The port every sshd of the job listens on, and the launcher's ssh connects"
        " to. Defaults to 22; a job whose pods run as a normal user needs one above 1023.",
    )


class SshSettings(ApiModel):
    """Where the job's SSH keys are mounted and where its sshd listen."""

    auth_mount_path: str = safe_path_field(
        "/root/.ssh",
        "Directory where the job's SSH keys, authorized_keys, known_hosts and ssh config are"
        " mounted (read-only); it should be the home `.ssh` directory of the user the"
        f" containers run as, and {SAFE_PATH_SAID}. Defaults to /root/.ssh.",
    )
    port: int = ssh_port_field()

    @field_validator("auth_mount_path")
    @classmethod
    def _safe_path(cls, value: str, info: ValidationInfo) -> str:
        problem = safe_path_problem("authMountPath", value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @property
    def home(self) -> str:
        """The user's home: the folder that holds `authMountPath`."""
        path = self.auth_mount_path.rstrip("/")
        return path.rsplit("/", 1)[0] or "/"
