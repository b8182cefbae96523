#!/usr/bin/env bash
# Check the images hack/images/build.sh makes, by running them with hack/images/run.sh (no
# container runtime; a private network of loopback alone, so every rendezvous is local):
#   hack/images/check.sh            build what is missing, then check every image
# Prints "ok - WHAT" or "not ok - WHAT" per check (the failing output on stderr) and closes with
# "N passed, N failed"; exits 1 when any failed. About 1 min 30 s for the trainer on 2 cores.
# The snippets in single quotes are shell code run in the image, expanded there:
# shellcheck disable=SC2016
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
declare -A archive
while read -r ref path; do
	archive[$ref]=$path
done < <("$HERE/build.sh" pause trainer)
pause=${archive[localhost/t9kjobs-pause:3.10]:?build.sh did not print the pause image}
trainer=${archive[localhost/t9kjobs-trainer:latest]:?build.sh did not print the trainer image}

passed=0 failed=0
report() { # report WHAT RC OUTPUT-FILE
	if [[ $2 == 0 ]]; then
		echo "ok - $1"
		passed=$((passed + 1))
	else
		echo "not ok - $1 (exit $2)"
		tail -n 30 "$3" | sed 's/^/    /' >&2
		failed=$((failed + 1))
	fi
}
out=$(mktemp)
root=$(mktemp -d "${TMPDIR:-/tmp}/t9kjobs-check.XXXXXX")
trap 'rm -rf "$out" "$root"' EXIT

# ---------------------------------------------------------------- pause
# Its entrypoint as PID 1, user 65535; SIGTERM ends it with 0.
"$HERE/run.sh" "$pause" >"$out" 2>&1 &
runner=$!
pid=""
for _ in $(seq 50); do
	ns=$(pgrep -P "$runner" -x unshare || true)
	[[ -z "$ns" ]] || pid=$(pgrep -P "$ns" -x pause || true)
	[[ -z "$pid" ]] || break
	sleep 0.1
done
if [[ -n "$pid" && $(ps -o uid= -p "$pid" | tr -d ' ') == 65535 ]]; then
	kill -TERM "$pid"
	rc=0
	wait "$runner" || rc=$?
else
	echo "no pause process running as 65535" >>"$out"
	kill "$runner" 2>/dev/null || true
	wait "$runner" || true
	rc=1
fi
report "pause: /pause runs as 65535 and exits 0 on SIGTERM" "$rc" "$out"

# ---------------------------------------------------------------- trainer
# Each check is a shell snippet run in the image (unpacked once, into $root).
check() { # check WHAT SNIPPET
	local rc=0
	timeout 300 "$HERE/run.sh" --rootfs "$root/fs" "$trainer" bash -euo pipefail -c "$2" >"$out" 2>&1 || rc=$?
	report "trainer: $1" "$rc" "$out"
	if [[ $rc == 0 && -n "${CHECK_SHOW:-}" ]]; then grep -E "$CHECK_SHOW" "$out" | sed 's/^/    /'; fi
	CHECK_SHOW=""
}
allreduce='cat >/tmp/allreduce.py <<EOF
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
assert t.item() == dist.get_world_size() * (dist.get_world_size() + 1) / 2, t
print(f"rank={dist.get_rank()} world={dist.get_world_size()} all_reduce={t.item()}", flush=True)
EOF
'
mlp="/opt/t9kjobs/examples/mlp.py --steps 20 --log-every 20"
# Both ranks end in sync (grep -o: a launcher's prefixes may stand before a line).
both_done='test "$(grep -o "done rank=[01] world=2 [^=]*=[^ ]* [^=]*=[^ ]* steps=20 in_sync=True" /tmp/log | wc -l)" = 2'

CHECK_SHOW="^[0-9]"
check "python3 imports torch, deepspeed, colossalai" \
	'python3 -c "import torch, deepspeed, colossalai; print(torch.__version__, deepspeed.__version__, colossalai.__version__)" 2>&1 | grep -v real_accelerator'
check "deepspeed --help, colossalai run --help, torchrun --help" \
	'deepspeed --help >/dev/null 2>&1 && colossalai run --help >/dev/null && torchrun --help >/dev/null'
CHECK_SHOW="rcmd"
check "sshd -t; pdsh has the ssh rcmd module" \
	'/usr/sbin/sshd -t && pdsh -V 2>&1 | tee /dev/stderr | grep -q "rcmd modules:.*ssh"'
mirror="${T9KJOBS_DEBIAN_MIRROR:-http://deb.debian.org/debian}" # build.sh's
check "torch is Debian's, no nvidia-* from PyPI; no compiler, apt lists, .debs or pip cache; apt sources at $mirror" \
	'python3 -c "import torch; assert torch.__file__.startswith(\"/usr/lib/python3/dist-packages/\"), torch.__file__" && ! python3 -m pip list 2>/dev/null | grep -i "^nvidia" && ! command -v gcc && ! command -v c++ && test -z "$(ls /var/lib/apt/lists /var/cache/apt/archives/*.deb 2>/dev/null | grep -v -e lock -e partial -e :$)" && ! test -e /root/.cache/pip && grep -qxF "deb '"$mirror"' bookworm main" /etc/apt/sources.list'
CHECK_SHOW="^sshd as trainer"
check "user trainer (1000:1000; its home, an empty ~/.ssh 0700): its own sshd on port 2222, no root, lets it in by key" \
	'test "$(id trainer)" = "uid=1000(trainer) gid=1000(trainer) groups=1000(trainer)"
test "$(stat -c "%U:%G %a" /home/trainer /home/trainer/.ssh | tr "\n" " ")" = "trainer:trainer 755 trainer:trainer 700 "
test -z "$(ls -A /home/trainer/.ssh)"
cat >/tmp/nonroot.sh <<"END"
set -euo pipefail
cd && test "$(id -u)" = 1000 && test -w ~
trap "rm -rf ~/.ssh/* ~/.sshd" EXIT
mkdir ~/.sshd
ssh-keygen -q -t ed25519 -N "" -f ~/.sshd/host_key
ssh-keygen -q -t ed25519 -N "" -f ~/.ssh/id_ed25519
cp ~/.ssh/id_ed25519.pub ~/.ssh/authorized_keys
/usr/sbin/sshd -f /dev/null -h ~/.sshd/host_key -o ListenAddress=127.0.0.1 -p 2222 \
  -o PidFile=$HOME/.sshd/pid -o UsePAM=no -o PasswordAuthentication=no
echo "sshd as trainer: its process runs as $(ps -o user= -p "$(cat ~/.sshd/pid)")"
ssh -p 2222 -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
  -o LogLevel=ERROR 127.0.0.1 "echo sshd as trainer: logged in as \$(id -un) in \$PWD"
kill "$(cat ~/.sshd/pid)"
END
setpriv --reuid=1000 --regid=1000 --init-groups env HOME=/home/trainer USER=trainer bash /tmp/nonroot.sh
test -z "$(ls -A /home/trainer/.ssh)"'
CHECK_SHOW="all_reduce"
check "plain torchrun --standalone --nproc_per_node=2: gloo all_reduce (the image's torch patch)" \
	"$allreduce"'torchrun --standalone --nproc_per_node=2 /tmp/allreduce.py'
CHECK_SHOW="^done"
check "torchrun, 2 processes: the example trains in sync" \
	"torchrun --standalone --nproc_per_node=2 $mlp >/tmp/log 2>&1 || { cat /tmp/log; exit 1; }; cat /tmp/log; $both_done"
CHECK_SHOW="^done|WORLD INFO"
check "deepspeed --num_gpus 2 (CPU accelerator, gloo): deepspeed.initialize trains in sync" \
	"deepspeed --num_gpus 2 $mlp --deepspeed >/tmp/log 2>&1 || { cat /tmp/log; exit 1; }; cat /tmp/log; $both_done"
CHECK_SHOW="^t9kjobs-run: done|cmd = pdsh"
check "deepspeed --launcher pdsh over ssh (hostfile, --force_multi): trains in sync" \
	'mkdir -p -m 700 /root/.ssh
ssh-keygen -q -t ed25519 -N "" -f /root/.ssh/id_ed25519
cp /root/.ssh/id_ed25519.pub /root/.ssh/authorized_keys
printf "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n" >/root/.ssh/config
/usr/sbin/sshd -o ListenAddress=127.0.0.1 -o PasswordAuthentication=no
echo "t9kjobs-run slots=2" >/tmp/hostfile
trap "rm -rf /root/.ssh" EXIT
'"deepspeed --hostfile /tmp/hostfile --force_multi --launcher pdsh --master_addr t9kjobs-run $mlp --deepspeed >/tmp/log 2>&1 || { cat /tmp/log; exit 1; }; cat /tmp/log; $both_done"
CHECK_SHOW="^done|success"
check "colossalai run --nproc_per_node 2: the example trains in sync" \
	"colossalai run --nproc_per_node 2 $mlp >/tmp/log 2>&1 || { cat /tmp/log; exit 1; }; cat /tmp/log; $both_done"
CHECK_SHOW="launch_from_torch"
check "colossalai run + colossalai.launch_from_torch (the image's ColossalAI patch)" \
	'cat >/tmp/c.py <<EOF
import colossalai, torch, torch.distributed as dist
colossalai.launch_from_torch(config={}, backend="gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == 2, t
print(f"colossalai.launch_from_torch rank={dist.get_rank()} all_reduce={t.item()}", flush=True)
EOF
colossalai run --nproc_per_node 2 /tmp/c.py'

echo "$passed passed, $failed failed"
((failed == 0))
