// CoreDNS with only what the real node's cluster DNS needs: answers for cluster.local from the
// API server (the kubernetes plugin) and nothing else. There is no forward plugin on purpose:
// the node's pods may resolve cluster names only, never the outside world.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives lists the compiled-in plugins in CoreDNS's own execution order (a subset of
// core/dnsserver/zdirectives.go upstream); a Corefile naming any other plugin is refused.
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"kubernetes",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
