"""`colossalai run` with the job's pinned host key.

`colossalai run` reaches the workers through fabric, which never checks a host key: its
`Connection` gives paramiko an `AutoAddPolicy` and loads no `known_hosts`, so any server that
answers for a worker's name is trusted. The launcher therefore runs ColossalAI's own command
line (`colossalai.cli:cli`, what the `colossalai` script runs) through `PRELUDE`, which first
replaces that policy with one that accepts only the job's host key, read from the job's
`known_hosts` under its alias (paramiko knows no `HostKeyAlias`). The per-host processes of
`colossalai run` are forked, so they inherit it.
"""

from __future__ import annotations

__all__ = ["PRELUDE"]

# argv: <known_hosts> <alias> run ...
PRELUDE = """\
import sys

import fabric.connection
import paramiko
from paramiko.hostkeys import HostKeys

KNOWN_HOSTS, ALIAS = sys.argv[1], sys.argv[2]
PINNED = HostKeys(KNOWN_HOSTS).lookup(ALIAS) or {}
if not PINNED:
    sys.exit(f"t9k-jobs: no host key for {ALIAS} in {KNOWN_HOSTS}")


class PinnedHostKey(paramiko.MissingHostKeyPolicy):
    def missing_host_key(self, client, hostname, key):
        if PINNED.get(key.get_name()) != key:
            raise paramiko.SSHException(
                f"t9k-jobs: {hostname} did not present the job's host key"
                f" ({ALIAS} in {KNOWN_HOSTS})"
            )


fabric.connection.AutoAddPolicy = PinnedHostKey
from colossalai.cli import cli  # noqa: E402

sys.argv = ["colossalai", *sys.argv[3:]]
sys.exit(cli())
"""
