"""SSH between a job's pods: per job a client key and a host key, pinned both ways.

A job's pods trust only the job's own keys, and nothing else's:

* **The client key** (its private half mounted only where a launch happens) is the only key the
  workers' sshd accepts: `authorized_keys` holds its public half, with `restrict,pty` (no
  forwarding of any kind, no `~/.ssh/rc`; a terminal for debugging by hand).
* **The host key** is what every sshd of the job presents (`-h`); the launcher's `known_hosts`
  holds its public half under one alias (`HostKeyAlias`), so that `StrictHostKeyChecking yes`
  checks every host of the job, however many and on any port, and refuses any other key.
* **The ssh config** applies to the job's own hosts only (`Host *.<job>`), not `Host *`: an ssh
  to anywhere else from the pod is the image's ordinary ssh.
* **sshd** runs with no config file of the image (`-f /dev/null`: nothing in the image can turn
  a setting back on), public keys only, no forwarding, no tunnels, no user environment, and
  only for the user it runs as.

Hooks are pure, so they declare the Secret with placeholder values and the annotation
`batch.tensorstack.dev/generate: ssh-keypair`; the controller fills it with fresh ed25519 keys
(`fill_generated_secret`) when it creates the Secret, which is then never rewritten. The Secret
is of type `kubernetes.io/ssh-auth` (`ssh-privatekey` is the client key); keys are never logged
and never written to a ConfigMap. It is mounted read-only with 0600 files, each pod getting only
the files of its roles (`mount_ssh`): a server the host key and `authorized_keys`, a client the
client key, `known_hosts` and the config.
"""

from __future__ import annotations

import shlex

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9kjobs.models import Job
from t9kjobs.models.ssh import SSH_PORT
from t9kjobs.objects import Obj, secret
from t9kjobs.templating import render_template

__all__ = [
    "AUTHORIZED_KEYS",
    "CLIENT_KEY",
    "CONFIG",
    "GENERATED_PLACEHOLDER",
    "GENERATE_ANNOTATION",
    "HOST_KEY",
    "HOST_PUBLIC_KEY_PLACEHOLDER",
    "KNOWN_HOSTS",
    "SECRET_TYPE",
    "SSH_PORT",
    "SSH_VOLUME",
    "fill_generated_secret",
    "generate_keys",
    "host_key_alias",
    "host_patterns",
    "mount_ssh",
    "ssh_secret",
    "ssh_secret_name",
    "start_sshd_script",
    "wait_for_sshd_script",
]

GENERATE_ANNOTATION = "batch.tensorstack.dev/generate"
GENERATED_PLACEHOLDER = "<generated when the Secret is created>"
HOST_PUBLIC_KEY_PLACEHOLDER = "<the job's host public key, generated when the Secret is created>"
SECRET_TYPE = "kubernetes.io/ssh-auth"
SSH_VOLUME = "t9k-ssh"  # the volume name the SSH Secret is mounted under
# Keys of the Secret, and the files they become in the mount directory.
CLIENT_KEY = "ssh-privatekey"  # the type's own key; mounted as `id_ed25519`
CLIENT_KEY_FILE = "id_ed25519"
HOST_KEY = "ssh_host_ed25519_key"
AUTHORIZED_KEYS = "authorized_keys"
KNOWN_HOSTS = "known_hosts"
CONFIG = "config"
_SERVER_FILES = (HOST_KEY, AUTHORIZED_KEYS)
_CLIENT_FILES = (CLIENT_KEY, KNOWN_HOSTS, CONFIG)
# The options of authorized_keys' one entry: nothing but commands (and a terminal for them).
AUTHORIZED_KEY_OPTIONS = "restrict,pty"
_PACKAGE = "t9kjobs"


def ssh_secret_name(job: Job) -> str:
    return f"{job.name}-ssh"


def host_key_alias(job: Job) -> str:
    """The name every host of the job has in `known_hosts` (ssh's `HostKeyAlias`)."""
    return f"t9k-jobs.{job.name}"


def host_patterns(job: Job) -> list[str]:
    """The host names the job's ssh config applies to: its pods through its headless Service,
    `<pod>.<job>`, and the same names fully qualified."""
    return [f"*.{job.name}", f"*.{job.name}.{job.namespace}.svc.*"]


def ssh_secret(job: Job, mount_path: str = "/root/.ssh", port: int = SSH_PORT) -> Obj:
    """The job's SSH Secret; key material is a placeholder until the controller creates it.
    `port` is the port the job's sshd listen on (its ssh config's `Port`)."""
    data = {
        CLIENT_KEY: GENERATED_PLACEHOLDER,
        HOST_KEY: GENERATED_PLACEHOLDER,
        AUTHORIZED_KEYS: GENERATED_PLACEHOLDER,
        KNOWN_HOSTS: f"{host_key_alias(job)} {HOST_PUBLIC_KEY_PLACEHOLDER}\n",
        CONFIG: render_template(
            _PACKAGE,
            "ssh_config.j2",
            patterns=" ".join(host_patterns(job)),
            alias=host_key_alias(job),
            mount_path=mount_path.rstrip("/"),
            identity=CLIENT_KEY_FILE,
            known_hosts=KNOWN_HOSTS,
            port=port,
        ),
    }
    obj = secret(job, ssh_secret_name(job), data, {GENERATE_ANNOTATION: "ssh-keypair"})
    obj["type"] = SECRET_TYPE
    return obj


def mount_ssh(
    pod: Obj,
    job: Job,
    container_names: list[str],
    mount_path: str = "/root/.ssh",
    *,
    server: bool = True,
    client: bool = True,
) -> None:
    """Mount the job's SSH Secret read-only at `mount_path` in the named containers, with the
    files of the pod's roles only: a `server` (runs sshd) gets the host key and
    `authorized_keys`, a `client` (launches over ssh) the client key as `id_ed25519`,
    `known_hosts` and the config. Say both: a pod left with the default of both roles has the
    client key though it may never launch."""
    files = (_SERVER_FILES if server else ()) + (_CLIENT_FILES if client else ())
    items = [
        {"key": key, "path": CLIENT_KEY_FILE if key == CLIENT_KEY else key} for key in sorted(files)
    ]
    spec = pod["spec"]
    volumes = [v for v in spec.get("volumes") or [] if v.get("name") != SSH_VOLUME]
    volumes.append(
        {
            "name": SSH_VOLUME,
            "secret": {"secretName": ssh_secret_name(job), "defaultMode": 0o600, "items": items},
        }
    )
    spec["volumes"] = volumes
    for c in spec.get("containers") or []:
        if c.get("name") in container_names:
            mounts = [m for m in c.get("volumeMounts") or [] if m.get("name") != SSH_VOLUME]
            mounts.append({"name": SSH_VOLUME, "mountPath": mount_path, "readOnly": True})
            c["volumeMounts"] = mounts


def start_sshd_script(
    sshd_path: str = "/usr/sbin/sshd", mount_path: str = "/root/.ssh", port: int = SSH_PORT
) -> str:
    """Shell that runs sshd in the foreground on `port` with the job's host key, trusting the
    job's client key only, for the user it runs as (module docstring): root, or a normal user
    on a port above 1023 (no privilege separation directory, no pid file)."""
    directory = mount_path.rstrip("/")
    return render_template(
        _PACKAGE,
        "start_sshd.sh.j2",
        sshd_path=shlex.quote(sshd_path),
        host_key=shlex.quote(f"{directory}/{HOST_KEY}"),
        authorized_keys=shlex.quote(f"AuthorizedKeysFile={directory}/{AUTHORIZED_KEYS}"),
        port=port,
    )


def wait_for_sshd_script(
    hosts: list[str], mount_path: str = "/root/.ssh", timeout: int = 300, port: int = SSH_PORT
) -> str:
    """Shell that waits (bounded) until every host's sshd answers, else exits 1 naming it and
    what ssh said last (a host key that is not the job's: "Host key verification failed")."""
    return render_template(
        _PACKAGE,
        "wait_for_sshd.sh.j2",
        hosts=" ".join(shlex.quote(h) for h in hosts),
        count=len(hosts),
        config=shlex.quote(f"{mount_path.rstrip('/')}/{CONFIG}"),
        port=port,
        timeout=timeout,
    )


def _openssh_private(key: Ed25519PrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ).decode()


def _openssh_public(key: Ed25519PrivateKey) -> str:
    """`ssh-ed25519 AAAA...`, without a comment."""
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def generate_keys() -> dict[str, str]:
    """A new client key and host key (ed25519, OpenSSH format): the private halves, the
    `authorized_keys` entry of the client key, and the host public key (`host_public`)."""
    client, host = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    return {
        CLIENT_KEY: _openssh_private(client),
        HOST_KEY: _openssh_private(host),
        AUTHORIZED_KEYS: f"{AUTHORIZED_KEY_OPTIONS} {_openssh_public(client)} t9k-jobs\n",
        "host_public": _openssh_public(host),
    }


def fill_generated_secret(obj: Obj) -> Obj:
    """A copy of a planned SSH Secret with its placeholders replaced by fresh keys; any other
    object as it is."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if obj.get("kind") != "Secret" or annotations.get(GENERATE_ANNOTATION) != "ssh-keypair":
        return obj
    keys = generate_keys()
    host_public = keys.pop("host_public")
    planned: dict[str, str] = obj.get("stringData") or {}
    data = {
        name: value.replace(HOST_PUBLIC_KEY_PLACEHOLDER, host_public)
        for name, value in planned.items()
    }
    return {**obj, "stringData": {**data, **keys}}
