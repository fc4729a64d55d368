package config

import (
	"net"
	"net/netip"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// metricsAddressExample is the address the errors show.
const metricsAddressExample = `write e.g. "127.0.0.1:9464", ":9464" or "[::1]:9464"`

// checkMetricsAddress refuses what run's net.Listen("tcp", ...) would
// refuse, without listening and without DNS: validate must exit 1 exactly
// when run would refuse to start (docs/commands.md), and a unit that runs
// validate first (ExecStartPre=) would otherwise restart forever on
// "address 99999: invalid port". So it refuses no more than net.Listen
// does (review 58: ":0", "localhost:http" and "node_1:9464" start):
//   - not host:port (net.SplitHostPort);
//   - a port net.LookupPort("tcp", ...) refuses: neither a number from 0
//     to 65535 ("+80" is one, as for net.Listen) nor a service name it
//     knows. That is no DNS: Go's own resolver reads /etc/services (net's
//     port_unix.go, goLookupPort/readServices, over a built-in list), the
//     cgo one asks getaddrinfo for the service only (no host), the NSS
//     services database, files by default; validate and run read the same
//     file where they run in the same image;
//   - a host that is neither empty (every address), an IP literal as
//     net.Listen parses it (netip.ParseAddr, an IPv6 one with its zone)
//     nor a name of the characters Go's resolver sends to DNS (letters,
//     digits, '-', '_', '.': net's isDomainName). Whether the name
//     resolves is the node's, and run says so if not. A name of other
//     characters could only come from /etc/hosts; no host has one.
//
// Port 0 (or none, "127.0.0.1:") starts, on a port picked anew at each
// start: a warning, as no probe or scrape can find it.
func (c *Config) checkMetricsAddress(p *Problems) {
	addr := c.MetricsAddress
	if addr == "" {
		return
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.Errorf("metricsAddress", "%s is not host:port; %s", cpulist.EchoLong(addr), metricsAddressExample)
		return
	}
	if n, err := net.LookupPort("tcp", port); err != nil {
		p.Errorf("metricsAddress", "port %s of %s is neither a number from 0 to 65535 nor a service name of /etc/services; %s", cpulist.EchoLong(port), cpulist.EchoLong(addr), metricsAddressExample)
	} else if n == 0 {
		p.Warnf("metricsAddress", "port %s of %s listens on a port picked anew at each start, which no probe or Prometheus scrape can find; %s", cpulist.EchoLong(port), cpulist.EchoLong(addr), metricsAddressExample)
	}
	if host != "" && !isIPLiteral(host) && !isHostName(host) {
		p.Errorf("metricsAddress", "host %s of %s is neither an IP address nor a host name; %s", cpulist.EchoLong(host), cpulist.EchoLong(addr), metricsAddressExample)
	}
}

// isIPLiteral tells whether net.Listen reads host as an IP address (an
// IPv6 one possibly with its zone, "fe80::1%eth0") rather than a name.
func isIPLiteral(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// isHostName tells whether s holds only the characters Go's resolver
// accepts in a name it looks up in DNS (net's isDomainName): letters,
// digits, '-', '_' and '.'. Label lengths and hyphen positions are not
// checked: /etc/hosts may hold names DNS would not.
func isHostName(s string) bool {
	if s == "" {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool {
		return !(r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0
}
