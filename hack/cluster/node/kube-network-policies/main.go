// Command kube-network-policies is the NetworkPolicy engine of the local cluster's real node
// (docs/cluster.md, "NetworkPolicy enforcement"): the controller of
// sigs.k8s.io/kube-network-policies v0.8.0 (its pkg/networkpolicy, unchanged), started the way
// its cmd/main.go starts it, with two differences:
//
//   - it reads a kubeconfig (--kubeconfig): upstream's main knows only the in-cluster
//     configuration of a DaemonSet pod, and this engine runs on the node, not in a pod; and it
//     can reach the API server through a unix socket (--apiserver-socket): from the node's
//     network namespace the API server's 127.0.0.1 is out of reach, while a socket file is
//     not;
//   - it sends the first packet of each new connection on the pods' network to its nfqueue
//     through the xtables NFQUEUE target (nft_compat) in an nftables table of its own
//     (--table). The controller's own rules use nftables' `queue` expression, which kernels
//     built without CONFIG_NFT_QUEUE (this machine's) refuse: its table is then never
//     installed, and it logs so once per change. The verdicts are the controller's own: this
//     program only changes how the packets reach its queue.
//
// It is meant to run inside the node's own network namespace (node/network-policies.sh): every
// rule it writes lives and dies there, never in the host's.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		kubeconfig         = flag.String("kubeconfig", "", "kubeconfig of the engine's identity")
		hostnameOverride   = flag.String("hostname-override", "", "the Node whose pods are policed (default: the hostname)")
		queueID            = flag.Int("nfqueue-id", 100, "number of the nfqueue")
		failOpen           = flag.Bool("fail-open", false, "accept packets while the engine does not answer (queue bypass) or cannot parse them")
		metricsBindAddress = flag.String("metrics-bind-address", "127.0.0.1:9080", "address of /metrics")
		bug1766Fix         = flag.Bool("netfilter-bug-1766-fix", false, "upstream's DNS workaround for kernels before 6.12 (its own rules only)")
		podCIDR            = flag.String("pod-cidr", "10.244.0.0/24", "the pods' network: new connections from or to it are queued")
		nodeIP             = flag.String("node-ip", "", "the node's address on the pods' network: its own connections are not queued (as upstream skips the node's root processes)")
		table              = flag.String("table", "t9kjobs-network-policies", "the nftables table (family ip) of the queue rules")
		apiserverSocket    = flag.String("apiserver-socket", "", "a unix socket that leads to the kubeconfig's API server (TLS still checked against the kubeconfig's server name)")
	)
	klog.InitFlags(nil)
	flag.Parse()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logger := klog.FromContext(ctx)

	nodeName := *hostnameOverride
	if nodeName == "" {
		var err error
		if nodeName, err = os.Hostname(); err != nil {
			logger.Error(err, "no node name: use --hostname-override")
			return 1
		}
	}
	_, cidr, err := net.ParseCIDR(*podCIDR)
	if err != nil || cidr.IP.To4() == nil {
		logger.Error(err, "--pod-cidr must be an IPv4 network", "value", *podCIDR)
		return 1
	}
	var node net.IP
	if *nodeIP != "" {
		if node = net.ParseIP(*nodeIP).To4(); node == nil {
			logger.Error(nil, "--node-ip must be an IPv4 address", "value", *nodeIP)
			return 1
		}
	}

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		logger.Error(err, "reading the kubeconfig", "path", *kubeconfig)
		return 1
	}
	config.UserAgent = "t9kjobs-kube-network-policies"
	if socket := *apiserverSocket; socket != "" {
		config.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", socket)
		}
	}
	config.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	config.ContentType = "application/vnd.kubernetes.protobuf"
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		logger.Error(err, "creating the client")
		return 1
	}

	if err := installQueueRules(*table, cidr, node, uint16(*queueID), *failOpen); err != nil {
		logger.Error(err, "installing the queue rules", "table", *table)
		return 1
	}
	defer deleteTable(logger, *table)
	logger.Info("queue rules installed", "table", *table, "podCIDR", cidr.String(), "nodeIP", *nodeIP, "nfqueue", *queueID, "failOpen", *failOpen)

	http.Handle("/metrics", promhttp.Handler())
	go func() {
		logger.Info("metrics server stopped", "error", http.ListenAndServe(*metricsBindAddress, nil))
	}()

	factory := informers.NewSharedInformerFactory(clientset, 0)
	controller, err := networkpolicy.NewController(
		clientset,
		factory.Networking().V1().NetworkPolicies(),
		factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(),
		nil, nil, nil, nil, // nodes and the AdminNetworkPolicy API: not used
		networkpolicy.Config{
			FailOpen:            *failOpen,
			QueueID:             *queueID,
			NodeName:            nodeName,
			NetfilterBug1766Fix: *bug1766Fix,
		},
	)
	if err != nil {
		logger.Error(err, "creating the network policy controller")
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx) }()
	factory.Start(ctx.Done())

	select {
	case <-ctx.Done():
		logger.Info("stopping")
	case err := <-done:
		logger.Error(err, "the network policy controller stopped")
		return 1
	}
	select { // the controller closes its queue and cleans its own table
	case <-done:
	case <-time.After(3 * time.Second):
	}
	return 0
}

// installQueueRules replaces the table with one postrouting chain (where upstream's own rules
// sit, before source NAT; with br_netfilter it sees bridged packets too):
//
//	ct state established,related accept
//	meta skuid 0 accept       (upstream's: the node's own root processes, e.g. this one)
//	ip saddr <node> accept    (the host, whose packets come bridged, without a socket)
//	ip saddr <pods> NFQUEUE --queue-num <id> [--queue-bypass]
//	ip daddr <pods> NFQUEUE --queue-num <id> [--queue-bypass]
func installQueueRules(name string, pods *net.IPNet, node net.IP, queue uint16, bypass bool) error {
	nft, err := nftables.New()
	if err != nil {
		return err
	}
	table := &nftables.Table{Name: name, Family: nftables.TableFamilyIPv4}
	nft.AddTable(table) // add + delete + add: the table afresh
	nft.DelTable(table)
	nft.AddTable(table)
	chain := nft.AddChain(&nftables.Chain{
		Name:     "postrouting",
		Table:    table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookPostrouting,
		Priority: nftables.ChainPriorityRef(*nftables.ChainPriorityNATSource - 5),
	})
	rule := func(exprs ...expr.Any) {
		nft.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	}
	rule(
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{
			SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: nativeUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED),
			Xor:  []byte{0, 0, 0, 0},
		},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
	rule(
		&expr.Meta{Key: expr.MetaKeySKUID, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{0, 0, 0, 0}},
		&expr.Verdict{Kind: expr.VerdictAccept},
	)
	if node != nil {
		rule(
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: node},
			&expr.Verdict{Kind: expr.VerdictAccept},
		)
	}
	// struct xt_NFQ_info_v3 {__u16 queuenum, queues_total, flags}, in host byte order, padded
	// to XT_ALIGN (8) as nft_compat wants it.
	info := make(xt.Unknown, 8)
	binary.NativeEndian.PutUint16(info[0:], queue)
	binary.NativeEndian.PutUint16(info[2:], 1)
	if bypass {
		binary.NativeEndian.PutUint16(info[4:], 1) // NFQ_FLAG_BYPASS
	}
	for _, offset := range []uint32{12, 16} { // source, then destination address
		rule(
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: pods.Mask, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: pods.IP.To4()},
			&expr.Counter{},
			&expr.Target{Name: "NFQUEUE", Rev: 3, Info: &info},
		)
	}
	if err := nft.Flush(); err != nil {
		return fmt.Errorf("nftables: %w", err)
	}
	return nil
}

func deleteTable(logger klog.Logger, name string) {
	nft, err := nftables.New()
	if err == nil {
		nft.DelTable(&nftables.Table{Name: name, Family: nftables.TableFamilyIPv4})
		err = nft.Flush()
	}
	if err != nil {
		logger.Error(err, "deleting the queue rules", "table", name)
	}
}

func nativeUint32(v uint32) []byte {
	b := make([]byte, 4)
	binary.NativeEndian.PutUint32(b, v)
	return b
}
