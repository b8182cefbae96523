// CoreDNS with only what the real node's cluster DNS needs: answers for cluster.local from the
// API server (the kubernetes plugin), and NXDOMAIN for every other name (the template plugin).
// There is no forward plugin on purpose: the node's pods may resolve cluster names only, never
// the outside world.
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
	_ "github.com/coredns/coredns/plugin/template"
)

// directives lists the compiled-in plugins in the order a query passes them; a Corefile naming
// any other plugin is refused. Upstream's order (core/dnsserver/zdirectives.go) less what we
// leave out, but for template, moved after kubernetes: it is the catch-all NXDOMAIN for what
// the kubernetes plugin falls through (reverse lookups of addresses that are no pod's).
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"kubernetes",
	"template",
}

func init() {
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
