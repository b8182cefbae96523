"""The job's SSH keys and files (`t9kjobs.ssh`): what the controller generates, what each pod
mounts, and the scripts that start sshd and wait for it (docs/security.md)."""

from __future__ import annotations

import copy
import shlex
import subprocess
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from t9kjobs.models import Job
from t9kjobs.ssh import (
    AUTHORIZED_KEYS,
    CLIENT_KEY,
    CONFIG,
    GENERATE_ANNOTATION,
    GENERATED_PLACEHOLDER,
    HOST_KEY,
    HOST_PUBLIC_KEY_PLACEHOLDER,
    KNOWN_HOSTS,
    fill_generated_secret,
    generate_keys,
    mount_ssh,
    ssh_secret,
    start_sshd_script,
    wait_for_sshd_script,
)


def _job() -> Job:
    return Job.model_validate(
        {
            "apiVersion": "batch.tensorstack.dev/v1beta1",
            "kind": "DeepSpeedJob",
            "metadata": {"name": "ds", "namespace": "team-a", "uid": "u-1"},
            "spec": {},
        }
    )


def _public_of(private_openssh: str) -> str:
    key = serialization.load_ssh_private_key(private_openssh.encode(), password=None)
    assert isinstance(key, Ed25519PrivateKey)
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
        .decode()
    )


def test_generate_keys_gives_a_client_key_its_restricted_entry_and_a_host_key() -> None:
    keys = generate_keys()
    assert set(keys) == {CLIENT_KEY, HOST_KEY, AUTHORIZED_KEYS, "host_public"}
    client_public = _public_of(keys[CLIENT_KEY])
    assert keys[AUTHORIZED_KEYS] == f"restrict,pty {client_public} t9k-jobs\n"
    assert keys["host_public"] == _public_of(keys[HOST_KEY])
    assert keys["host_public"].startswith("ssh-ed25519 ")
    assert client_public != keys["host_public"]  # two keys, not one used twice
    again = generate_keys()
    assert again[CLIENT_KEY] != keys[CLIENT_KEY] and again[HOST_KEY] != keys[HOST_KEY]


def test_the_planned_secret_is_ssh_auth_with_placeholders_and_a_scoped_strict_config() -> None:
    secret = ssh_secret(_job())
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["metadata"]["name"] == "ds-ssh"
    assert secret["metadata"]["annotations"] == {GENERATE_ANNOTATION: "ssh-keypair"}
    data = secret["stringData"]
    assert set(data) == {CLIENT_KEY, HOST_KEY, AUTHORIZED_KEYS, KNOWN_HOSTS, CONFIG}
    assert data[CLIENT_KEY] == data[HOST_KEY] == data[AUTHORIZED_KEYS] == GENERATED_PLACEHOLDER
    assert data[KNOWN_HOSTS] == f"t9k-jobs.ds {HOST_PUBLIC_KEY_PLACEHOLDER}\n"
    config = [line.split() for line in data[CONFIG].splitlines() if not line.startswith("#")]
    assert config[0] == ["Host", "*.ds", "*.ds.team-a.svc.*"]  # the job's hosts, not `Host *`
    settings = {words[0]: words[1:] for words in config[1:]}
    assert settings["StrictHostKeyChecking"] == ["yes"]
    assert settings["HostKeyAlias"] == ["t9k-jobs.ds"]
    assert settings["UserKnownHostsFile"] == ["/root/.ssh/known_hosts"]
    assert settings["GlobalKnownHostsFile"] == ["/dev/null"]
    assert settings["IdentityFile"] == ["/root/.ssh/id_ed25519"]
    assert settings["IdentitiesOnly"] == ["yes"]
    assert settings["PasswordAuthentication"] == ["no"]
    assert settings["ForwardAgent"] == ["no"]


def test_filling_the_secret_puts_fresh_keys_and_the_host_key_into_known_hosts() -> None:
    planned = ssh_secret(_job(), "/home/ml/.ssh/")
    before = copy.deepcopy(planned)
    filled = fill_generated_secret(planned)
    assert planned == before  # a copy: the plan is not changed
    data = filled["stringData"]
    assert set(data) == {CLIENT_KEY, HOST_KEY, AUTHORIZED_KEYS, KNOWN_HOSTS, CONFIG}
    assert all(
        GENERATED_PLACEHOLDER not in v and HOST_PUBLIC_KEY_PLACEHOLDER not in v
        for v in data.values()
    )
    assert data[KNOWN_HOSTS] == f"t9k-jobs.ds {_public_of(data[HOST_KEY])}\n"
    assert data[AUTHORIZED_KEYS] == f"restrict,pty {_public_of(data[CLIENT_KEY])} t9k-jobs\n"
    assert data[CONFIG] == planned["stringData"][CONFIG]
    assert "IdentityFile /home/ml/.ssh/id_ed25519" in data[CONFIG]
    assert filled["type"] == "kubernetes.io/ssh-auth"
    assert {k: v for k, v in filled.items() if k != "stringData"} == {
        k: v for k, v in planned.items() if k != "stringData"
    }
    assert fill_generated_secret(planned)["stringData"][CLIENT_KEY] != data[CLIENT_KEY]


@pytest.mark.parametrize(
    "obj",
    [
        {"kind": "ConfigMap", "metadata": {"annotations": {GENERATE_ANNOTATION: "ssh-keypair"}}},
        {"kind": "Secret", "metadata": {"annotations": {GENERATE_ANNOTATION: "tls"}}},
        {"kind": "Secret", "metadata": {"name": "s"}, "stringData": {"a": GENERATED_PLACEHOLDER}},
    ],
    ids=["not-a-secret", "other-generator", "no-annotation"],
)
def test_only_a_secret_marked_for_ssh_keys_is_filled(obj: dict[str, Any]) -> None:
    assert fill_generated_secret(obj) is obj


def _pod() -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "main"}, {"name": "sidecar"}]}}


@pytest.mark.parametrize(
    ("server", "client", "files"),
    [
        (True, False, {"authorized_keys", "ssh_host_ed25519_key"}),
        (False, True, {"id_ed25519", "known_hosts", "config"}),
        (
            True,
            True,
            {"authorized_keys", "ssh_host_ed25519_key", "id_ed25519", "known_hosts", "config"},
        ),
    ],
    ids=["server", "client", "both"],
)
def test_each_pod_mounts_the_files_of_its_roles_only(
    server: bool, client: bool, files: set[str]
) -> None:
    pod = _pod()
    mount_ssh(pod, _job(), ["main"], "/root/.ssh", server=server, client=client)
    [volume] = pod["spec"]["volumes"]
    assert volume["name"] == "t9k-ssh"
    source = volume["secret"]
    assert source["secretName"] == "ds-ssh" and source["defaultMode"] == 0o600
    assert {item["path"] for item in source["items"]} == files
    keys = {item["path"]: item["key"] for item in source["items"]}
    assert keys.get("id_ed25519", CLIENT_KEY) == CLIENT_KEY
    main, sidecar = pod["spec"]["containers"]
    assert main["volumeMounts"] == [
        {"name": "t9k-ssh", "mountPath": "/root/.ssh", "readOnly": True}
    ]
    assert "volumeMounts" not in sidecar


def _bash_parses(script: str) -> None:
    subprocess.run(["bash", "-n", "-c", script], check=True)


def test_sshd_takes_the_job_host_key_public_keys_only_and_no_forwarding() -> None:
    script = start_sshd_script("/usr/sbin/sshd", "/root/.ssh/")
    _bash_parses(script)
    [exec_line] = [line for line in script.splitlines() if line.startswith("exec ")]
    words = shlex.split(exec_line)
    assert words[1:4] == ["/usr/sbin/sshd", "-D", "-e"]
    assert words[words.index("-f") + 1] == "/dev/null"  # nothing of the image's config
    assert words[words.index("-h") + 1] == "/root/.ssh/ssh_host_ed25519_key"
    options = {words[i + 1] for i, w in enumerate(words) if w == "-o"}
    assert {
        "AuthorizedKeysFile=/root/.ssh/authorized_keys",
        "AuthenticationMethods=publickey",
        "PasswordAuthentication=no",
        "KbdInteractiveAuthentication=no",
        "HostbasedAuthentication=no",
        "AllowTcpForwarding=no",
        "AllowAgentForwarding=no",
        "AllowStreamLocalForwarding=no",
        "X11Forwarding=no",
        "PermitTunnel=no",
        "PermitUserEnvironment=no",
        "AllowUsers=$(id -un)",  # the user sshd runs as, expanded by the shell
    } <= options


def test_paths_are_quoted_into_the_sshd_script() -> None:
    evil = "/usr/sbin/sshd; touch /tmp/PWNED #"
    script = start_sshd_script(evil, "/home/a b/.ssh")
    _bash_parses(script)
    [exec_line] = [line for line in script.splitlines() if line.startswith("exec ")]
    words = shlex.split(exec_line)
    assert words[1] == evil
    assert words[words.index("-h") + 1] == "/home/a b/.ssh/ssh_host_ed25519_key"


def test_the_wait_uses_the_job_config_quotes_hosts_and_fails_fast_on_a_foreign_host_key() -> None:
    script = wait_for_sshd_script(["a.ds", "b.ds"], "/root/.ssh", timeout=7)
    _bash_parses(script)
    assert "for host in a.ds b.ds; do" in script
    assert "ssh -F /root/.ssh/config -o BatchMode=yes" in script
    assert "Host key verification failed" in script
    assert "within 7s" in script
    odd = wait_for_sshd_script(["x; rm -rf /"], "/root/.ssh")
    _bash_parses(odd)
    assert "for host in 'x; rm -rf /'; do" in odd


def test_the_defaults_are_root_both_roles_and_mounting_twice_keeps_one_volume() -> None:
    pod = _pod()
    pod["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    mount_ssh(pod, _job(), ["main"])
    mount_ssh(pod, _job(), ["main"])  # a plugin that mounts again replaces, never adds
    volumes = pod["spec"]["volumes"]
    assert [v["name"] for v in volumes] == ["data", "t9k-ssh"]
    files = {item["path"] for item in volumes[1]["secret"]["items"]}
    assert files == {
        "authorized_keys",
        "ssh_host_ed25519_key",
        "id_ed25519",
        "known_hosts",
        "config",
    }
    mounts = pod["spec"]["containers"][0]["volumeMounts"]
    assert mounts == [
        {"name": "data", "mountPath": "/data"},
        {"name": "t9k-ssh", "mountPath": "/root/.ssh", "readOnly": True},
    ]
    assert "ssh -F /root/.ssh/config " in wait_for_sshd_script(["a.ds"])
    assert "ssh -F /home/u/.ssh/config " in wait_for_sshd_script(["a.ds"], "/home/u/.ssh/")
