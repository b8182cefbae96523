# The real node: containerd + runc + CNI bridge + kubelet, and CoreDNS for cluster.local.
# Sourced by up.sh (T9KJOBS_NODES=real) once the control plane is ready; uses its variables
# (D, P, BIN, KUBECTL, SERVER, TIMEOUT) and functions (start, alive, wait_for, sign, kubeconfig).
#
# Isolation (docs/cluster.md, "The real node"): the host keeps its sysctls, firewall, routes and
# mounts. containerd and kubelet run in a private mount namespace held open by a small holder
# process: every mount they make (rootfs overlays, volumes, network namespaces) lives and dies
# there; /run, /var/lib and /var/log are private tmpfs there (CNI caches, shim sockets, runc
# state, /var/log/containers); the /proc/sys files they write are bind-mounted copies; the
# iptables/nftables binaries are /bin/false. The holder holds a network namespace of the node
# too: the pods' bridge and their host-side veths live there (the CNI bridge plugin runs in it,
# through a wrapper), and so does the NetworkPolicy engine when it runs (network-policies.sh),
# whose rules never reach the host's firewall. The host sees one veth of it, $NODE_BRIDGE, with
# the node's address: the pods' gateway (kubelet, CoreDNS, the API server's proxy, all in the
# host's network namespace). No default route, no masquerade and no forwarding out (the host's
# ip_forward is never touched). What the host does see: that veth (removed by down.sh), and a
# cgroup tree for the pods under our own cgroups (removed by down.sh).
# shellcheck shell=bash

NODE_NAME=t9kjobs-node-0
NODE_BRIDGE=t9kjobs0          # the host's end of the veth to the node's network namespace
NODE_NS_BRIDGE=t9kjobs-br0    # the pods' bridge, in the node's network namespace
NODE_NS_UPLINK=t9kjobs-up     # the node's end of that veth, a port of the pods' bridge
NODE_SUBNET=10.244.0.0/24
# NODE_IP (common.sh), $NODE_BRIDGE's address: kubelet, CoreDNS and the API server's way to the pods
NODE_BRIDGE_MAC=02:74:39:6b:00:01 # locally administered, fixed (see the network below)
NODE_NS_BRIDGE_MAC=02:74:39:6b:00:02
N="$D/node"
# The sysctls kubelet (setupKernelTunables) writes, and the CNI bridge plugin would with isGateway.
NODE_SYSCTLS=(net/ipv4/ip_forward vm/overcommit_memory vm/panic_on_oom kernel/panic
	kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes)

[[ $(id -u) == 0 ]] || cluster_die "the real node needs root (containers, network namespaces)"
"$CLUSTER_HACK_DIR/../debian-packages.sh" runc containernetworking-plugins iproute2 util-linux socat ||
	cluster_die "could not install the node's Debian packages"
ip link show "$NODE_BRIDGE" >/dev/null 2>&1 &&
	cluster_die "a bridge $NODE_BRIDGE already exists: another real-node cluster runs here (one at a time); stop it with its down.sh"

steps=${CLUSTER_BUILD_STEPS:-3}
if node_bins_present; then
	NODE_BIN="$("$CLUSTER_HACK_DIR/node/build.sh")"
else
	NODE_BIN="$(cluster_step "build 2/$steps: node (kubelet, containerd, CoreDNS) from Go modules" \
		"$CLUSTER_HACK_DIR/node/build.sh")"
fi
# Images: "<reference> <archive>" lines (hack/images/build.sh builds once per recipe content).
mapfile -t NODE_IMAGES < <(cluster_step "build 3/$steps: images (root filesystem, pause, trainer)" \
	"$CLUSTER_HACK_DIR/../images/build.sh" pause trainer)
((${#NODE_IMAGES[@]} > 0)) || cluster_die "hack/images/build.sh failed"
PAUSE_IMAGE=$(printf '%s\n' "${NODE_IMAGES[@]}" | awk '$1 ~ /\/t9kjobs-pause:/ { print $1 }')
[[ -n "$PAUSE_IMAGE" ]] || cluster_die "hack/images/build.sh built no pause image"

rm -rf "$N"
mkdir -p "$N"/{containerd,kubelet,pods-logs,cni/net.d,sysctl,pki}
cat >>"$D/cluster.env" <<EOF
NODE_BIN_DIR=$NODE_BIN
NODE_NAME=$NODE_NAME
NODE_IP=$NODE_IP
NODE_BRIDGE=$NODE_BRIDGE
NODE_SUBNET=$NODE_SUBNET
CONTAINERD_ADDRESS=$N/containerd.sock
NODE_APISERVER_HOST=$NODE_IP
NODE_APISERVER_PORT=$NODE_APISERVER_PORT
EOF

# ---------------------------------------------------------------- certificates
sign kubelet "/O=system:nodes/CN=system:node:$NODE_NAME" clientAuth
sign kubelet-serving "/CN=$NODE_NAME" serverAuth "IP:$NODE_IP,DNS:$NODE_NAME"
sign coredns "/CN=t9kjobs-coredns" clientAuth
# The NetworkPolicy engine, should it be started (network-policies.sh; its RBAC below).
sign kube-network-policies "/CN=t9kjobs-kube-network-policies" clientAuth
kubeconfig "$D/kubelet.kubeconfig" kubelet
kubeconfig "$D/coredns.kubeconfig" coredns
kubeconfig "$D/kube-network-policies.kubeconfig" kube-network-policies

# ---------------------------------------------------------------- cgroups
# Pods' cgroups go under our own (cgroup v1, cgroupfs driver): kubelet's cgroupRoot is a child
# of this shell's memory cgroup, created in every hierarchy kubelet uses. down.sh removes what
# is listed in $N/cgroups, deepest first.
memcg=$(awk -F: '$2 == "memory" { print $3 }' /proc/self/cgroup)
NODE_CGROUP_ROOT="${memcg%/}/t9kjobs-node"
echo "$NODE_CGROUP_ROOT" >"$N/cgroup-root"
: >"$N/cgroups"
for hier in /sys/fs/cgroup/*/; do
	[[ -f "$hier/cgroup.procs" ]] || continue
	path="${hier%/}$NODE_CGROUP_ROOT"
	# record every level we create, parents first
	missing=()
	p="$path"
	while [[ ! -d "$p" ]]; do
		missing=("$p" "${missing[@]}")
		p=$(dirname "$p")
	done
	for p in "${missing[@]}"; do
		mkdir "$p"
		echo "$p" >>"$N/cgroups"
	done
done

# ---------------------------------------------------------------- the node's namespaces
# The holder is a shell that sleeps until SIGTERM (its command line names $D, as down.sh wants),
# in a private mount namespace and in a network namespace of its own.
start node-mounts unshare --mount --net --propagation private -- \
	bash -c 'trap "kill \$! 2>/dev/null; exit 0" TERM; sleep infinity & wait $!' t9kjobs-node-ns "$D"
NS_PID=$(cat "$D/pids/node-mounts.pid")
IN_NS=(nsenter --mount="/proc/$NS_PID/ns/mnt" --)
IN_NODE_NET=(nsenter --net="/proc/$NS_PID/ns/net" --)
[[ $(readlink "/proc/$NS_PID/ns/net") != "$(readlink /proc/self/ns/net)" ]] ||
	cluster_die "the node's holder did not get a network namespace of its own"

# ---------------------------------------------------------------- network
# The pods' bridge is in the node's network namespace, joined to the host by a veth whose host
# end, $NODE_BRIDGE, has the node's address (its InternalIP, the pods' gateway and DNS): kubelet,
# CoreDNS and the API server's proxy serve the pods from the host's network namespace as on any
# node, while every packet between pods crosses the node's namespace only, where the
# NetworkPolicy engine sees it (network-policies.sh). It exists before kubelet starts.
# The gateway's MAC address is set, never left to the kernel: when the gateway was a bridge with
# a random one, it took the lowest MAC of its ports, so it changed whenever a pod's veth came
# or went, and the pods that had learnt the old one lost every packet to the gateway (CoreDNS)
# until their ARP entry expired: "Temporary failure in name resolution" for tens of seconds,
# e.g. in DeepSpeed's ssh check. The pods' bridge gets a fixed one too.
ip link add "$NODE_BRIDGE" address "$NODE_BRIDGE_MAC" type veth peer name "$NODE_NS_UPLINK" netns "$NS_PID"
echo "$NODE_BRIDGE" >"$N/bridge"
ip addr add "$NODE_IP/${NODE_SUBNET#*/}" dev "$NODE_BRIDGE"
ip link set "$NODE_BRIDGE" up
"${IN_NODE_NET[@]}" ip link set lo up
"${IN_NODE_NET[@]}" ip link add "$NODE_NS_BRIDGE" address "$NODE_NS_BRIDGE_MAC" type bridge
"${IN_NODE_NET[@]}" ip link set "$NODE_NS_UPLINK" master "$NODE_NS_BRIDGE" up
"${IN_NODE_NET[@]}" ip link set "$NODE_NS_BRIDGE" up
# The CNI bridge plugin, run in the node's network namespace, so that the host end of each
# pod's veth is there, on the pods' bridge. containerd runs it from the node's mount namespace.
mkdir -p "$N/cni/bin"
printf '#!/bin/sh\nexec nsenter --net=/proc/%s/ns/net -- /usr/lib/cni/bridge "$@"\n' "$NS_PID" \
	>"$N/cni/bin/t9kjobs-bridge"
chmod 755 "$N/cni/bin/t9kjobs-bridge"
for f in "${NODE_SYSCTLS[@]}"; do
	mkdir -p "$N/sysctl/$(dirname "$f")"
	cat "/proc/sys/$f" >"$N/sysctl/$f"
done
"${IN_NS[@]}" bash -euc '
	N=$1
	shift
	mount -t tmpfs -o mode=755 t9kjobs-node /run
	mount -t tmpfs -o mode=755 t9kjobs-node /var/lib
	mount -t tmpfs -o mode=755 t9kjobs-node /var/log
	for f in "$@"; do mount --bind "$N/sysctl/$f" "/proc/sys/$f"; done
	for b in /usr/sbin/xtables-legacy-multi /usr/sbin/xtables-nft-multi /usr/sbin/nft; do
		if [[ -e $b ]]; then mount --bind /bin/false "$b"; fi
	done
' node-mounts "$N" "${NODE_SYSCTLS[@]}"

# ---------------------------------------------------------------- containerd
# Config version 3 (containerd 2.4 migrates it in memory, with a warning; in the version 4 form it
# never served CRI here), and no imports (by default it would read /etc/containerd/conf.d of
# the host). Plugins that would write outside our directories (NRI's
# socket in /var/run/nri, /opt/containerd) or need hardware we lack are disabled.
cat >"$N/cni/net.d/10-t9kjobs.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "t9kjobs",
  "plugins": [
    {
      "type": "t9kjobs-bridge",
      "bridge": "$NODE_NS_BRIDGE",
      "isGateway": false,
      "isDefaultGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$NODE_SUBNET", "gateway": "$NODE_IP"}]],
        "dataDir": "/var/lib/cni/networks"
      }
    },
    {"type": "loopback"}
  ]
}
EOF
cat >"$N/containerd.toml" <<EOF
version = 3
imports = []
root = "$N/containerd/root"
state = "/run/containerd"
disabled_plugins = [
  "io.containerd.nri.v1.nri",
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.blockfile",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.tracing.processor.v1.otlp",
  "io.containerd.internal.v1.tracing",
]

[grpc]
  address = "$N/containerd.sock"

[ttrpc]
  address = "$N/containerd.sock.ttrpc"

[plugins.'io.containerd.cri.v1.runtime']
  enable_selinux = false
  # Our pods need no more than the default OOM score; a write kubelet asks for that the
  # kernel refuses is clamped instead of failing the container.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "/usr/sbin/runc"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["$N/cni/bin", "/usr/lib/cni"]
    conf_dir = "$N/cni/net.d"
    max_conf_num = 1

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "$PAUSE_IMAGE"

[plugins.'io.containerd.grpc.v1.cri']
  # kubectl exec/attach/port-forward: kubelet proxies to this streaming server.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
EOF
start containerd "${IN_NS[@]}" "$NODE_BIN/containerd" --config "$N/containerd.toml" --log-level warn
CTR=("$NODE_BIN/ctr" --address "$N/containerd.sock" --namespace k8s.io)
wait_for "containerd on $N/containerd.sock" containerd "${CTR[@]}" version

for line in "${NODE_IMAGES[@]}"; do
	read -r ref archive <<<"$line"
	t0=$SECONDS
	"${CTR[@]}" images import --snapshotter overlayfs "$archive" >/dev/null ||
		cluster_die "importing $archive into containerd failed"
	cluster_log "image $ref imported ($((SECONDS - t0)) s)"
done

# ---------------------------------------------------------------- kubelet
: >"$N/resolv.conf" # pods get only the cluster DNS, never the host's resolvers
cat >"$N/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $P_KUBELET_HEALTHZ
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $P/ca.crt}
authorization:
  mode: Webhook
tlsCertFile: $P/kubelet-serving.crt
tlsPrivateKeyFile: $P/kubelet-serving.key
containerRuntimeEndpoint: unix://$N/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: $NODE_CGROUP_ROOT
# This machine has cgroup v1 (hybrid) and no systemd.
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
clusterDomain: cluster.local
clusterDNS: [$NODE_IP]
resolvConf: $N/resolv.conf
podLogsDir: $N/pods-logs
# A test node on a shared disk: evict only when truly short, never collect our images.
evictionHard:
  memory.available: 200Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 110
registerNode: true
EOF
start kubelet "${IN_NS[@]}" "$NODE_BIN/kubelet" \
	--config="$N/kubelet.yaml" \
	--kubeconfig="$D/kubelet.kubeconfig" \
	--root-dir="$N/kubelet" \
	--hostname-override="$NODE_NAME" \
	--node-ip="$NODE_IP" \
	--node-labels=t9kjobs.dev/node=real \
	--v=1

# ---------------------------------------------------------------- cluster DNS
# cluster.local (and reverse lookups of its pods) from the API server; every other name gets
# NXDOMAIN at once (an unanswered name would be SERVFAIL, which resolvers report as a
# temporary failure). Nothing is forwarded anywhere.
cat >"$N/Corefile" <<EOF
cluster.local:53 in-addr.arpa:53 {
    bind $NODE_IP
    errors
    log
    ready 127.0.0.1:$P_DNS_READY
    health 127.0.0.1:$P_DNS_HEALTH
    kubernetes cluster.local in-addr.arpa {
        kubeconfig $D/coredns.kubeconfig t9kjobs
        fallthrough in-addr.arpa
    }
    template ANY ANY {
        rcode NXDOMAIN
    }
}
.:53 {
    bind $NODE_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
"${KUBECTL[@]}" apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: t9kjobs:coredns
rules:
- apiGroups: [""]
  resources: [services, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: t9kjobs:coredns
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "t9kjobs:coredns"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: t9kjobs-coredns}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: t9kjobs:kube-network-policies
rules:
- apiGroups: [""]
  resources: [pods, namespaces]
  verbs: [list, watch]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: t9kjobs:kube-network-policies
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: "t9kjobs:kube-network-policies"}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: t9kjobs-kube-network-policies}
EOF
start coredns "$NODE_BIN/coredns" -conf "$N/Corefile"
# The API server for pods. With no kube-proxy nothing routes the `kubernetes` Service's
# ClusterIP, and the API server listens on 127.0.0.1 only: a pod that talks to it (the operator
# installed by its Helm chart) is told NODE_IP:NODE_APISERVER_PORT instead (the chart's
# apiServer.host/port, as on any cluster without kube-proxy), which socat forwards there. TLS
# passes through: the API server's certificate names NODE_IP.
start apiserver-proxy socat -lf "$D/logs/apiserver-proxy.socat.log" \
	"TCP-LISTEN:$NODE_APISERVER_PORT,bind=$NODE_IP,fork,reuseaddr" "TCP:127.0.0.1:$P_API"
dns_ready() { python3 -c 'import sys,urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "http://127.0.0.1:$P_DNS_READY/ready"; }
wait_for "CoreDNS on $NODE_IP:53" coredns dns_ready

node_ready() {
	local out
	out=$("${KUBECTL[@]}" get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status} {.spec.taints}') || return 1
	[[ $out == "True " ]]
}
wait_for "node $NODE_NAME Ready and untainted" kubelet node_ready

# The NetworkPolicy engine, when asked for (docs/cluster.md): built once, cached.
if [[ ${T9KJOBS_NETWORK_POLICIES:-} == 1 ]]; then
	"$CLUSTER_HACK_DIR/node/network-policies.sh" start
fi
