// CoreDNS with only the plugins the real nodes' cluster DNS uses, as CoreDNS documents a host
// program selecting its plugins (core/dnsserver/directives.go SetDirectives at v1.15.0): the
// directives in the order of upstream's plugin.cfg (core/dnsserver/zdirectives.go) and their
// packages imported, then coremain.Run as upstream's coredns.go runs it. Upstream's own main
// imports every plugin (core/plugin/zplugin.go), cloud SDKs included, for nothing the tier uses.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() {
	directives := []string{"bind", "ready", "health", "errors", "log", "cache", "kubernetes"}
	if err := dnsserver.SetDirectives(directives); err != nil {
		panic(err)
	}
	coremain.Run()
}
