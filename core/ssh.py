"""SSH between a job's pods: one fresh key pair per job, in a Secret owned by the job.

Hooks are pure, so they declare the Secret with placeholder values and the annotation
`batch.tensorstack.dev/generate: ssh-keypair`; the controller fills it with a new ed25519 key
pair (`generate_keypair`) when it creates the Secret. Keys are never logged and never written to
a ConfigMap. The Secret is mounted read-only with mode 0600 files, which sshd accepts.
"""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9kjobs.models import Job
from t9kjobs.objects import Obj, secret
from t9kjobs.templating import render_template

__all__ = [
    "GENERATED_PLACEHOLDER",
    "GENERATE_ANNOTATION",
    "SSH_PORT",
    "SSH_VOLUME",
    "fill_generated_secret",
    "generate_keypair",
    "mount_ssh",
    "ssh_secret",
    "ssh_secret_name",
    "start_sshd_script",
    "wait_for_sshd_script",
]

GENERATE_ANNOTATION = "batch.tensorstack.dev/generate"
GENERATED_PLACEHOLDER = "<generated when the Secret is created>"
SSH_PORT = 22
SSH_VOLUME = "t9k-ssh"  # the volume name the SSH Secret is mounted under
_PACKAGE = "t9kjobs"


def ssh_secret_name(job: Job) -> str:
    return f"{job.name}-ssh"


def ssh_secret(job: Job, mount_path: str = "/root/.ssh") -> Obj:
    """The job's SSH Secret; key material is a placeholder until the controller creates it."""
    data = {
        "id_ed25519": GENERATED_PLACEHOLDER,
        "id_ed25519.pub": GENERATED_PLACEHOLDER,
        "authorized_keys": GENERATED_PLACEHOLDER,
        "config": render_template(
            _PACKAGE, "ssh_config.j2", mount_path=mount_path.rstrip("/"), port=SSH_PORT
        ),
    }
    return secret(job, ssh_secret_name(job), data, {GENERATE_ANNOTATION: "ssh-keypair"})


def mount_ssh(
    pod: Obj, job: Job, container_names: list[str], mount_path: str = "/root/.ssh"
) -> None:
    """Mount the job's SSH Secret read-only at `mount_path` in the named containers."""
    spec = pod["spec"]
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != SSH_VOLUME]
    volumes.append(
        {"name": SSH_VOLUME, "secret": {"secretName": ssh_secret_name(job), "defaultMode": 0o600}}
    )
    spec["volumes"] = volumes
    for c in spec.get("containers") or []:
        if c.get("name") in container_names:
            mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") != SSH_VOLUME]
            mounts.append({"name": SSH_VOLUME, "mountPath": mount_path, "readOnly": True})
            c["volumeMounts"] = mounts


def start_sshd_script(sshd_path: str = "/usr/sbin/sshd", mount_path: str = "/root/.ssh") -> str:
    """Shell that runs sshd in the foreground, trusting the job's key."""
    return render_template(
        _PACKAGE,
        "start_sshd.sh.j2",
        sshd_path=sshd_path,
        mount_path=mount_path.rstrip("/"),
        port=SSH_PORT,
    )


def wait_for_sshd_script(
    hosts: list[str], mount_path: str = "/root/.ssh", timeout: int = 300
) -> str:
    """Shell that waits (bounded) until every host's sshd answers, else exits 1 naming it."""
    return render_template(
        _PACKAGE,
        "wait_for_sshd.sh.j2",
        hosts=hosts,
        mount_path=mount_path.rstrip("/"),
        port=SSH_PORT,
        timeout=timeout,
    )


def generate_keypair() -> dict[str, str]:
    """A new ed25519 key pair in OpenSSH format (private, public, authorized_keys)."""
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
        + " t9k-jobs\n"
    )
    return {"id_ed25519": private, "id_ed25519.pub": public, "authorized_keys": public}


def fill_generated_secret(obj: Obj) -> Obj:
    """A copy of a planned Secret with its placeholders replaced by fresh key material."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if obj.get("kind") != "Secret" or annotations.get(GENERATE_ANNOTATION) != "ssh-keypair":
        return obj
    filled = dict(obj)
    filled["stringData"] = {**obj.get("stringData", {}), **generate_keypair()}
    return filled
