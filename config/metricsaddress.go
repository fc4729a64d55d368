package config

import (
	"net"
	"strconv"
	"strings"

	"github.com/cpupool/nri-cpupool/internal/cpulist"
)

// metricsAddressExample is the address the errors show.
const metricsAddressExample = `write e.g. "127.0.0.1:9464", ":9464" or "[::1]:9464"`

// checkMetricsAddress rejects what net.Listen("tcp", ...) would, without
// listening: validate must say 1 exactly when run would refuse to start
// (docs/commands.md), and a unit that runs validate first (ExecStartPre=)
// would otherwise restart forever on "address 99999: invalid port". The
// port must be a number from 1 to 65535: 0 would listen on a port picked
// anew at each start, which no probe or scrape can find, and a service
// name ("http") depends on /etc/services of the host or image. The host
// is empty (every address), an IP address (an IPv6 one in brackets, with
// its zone) or a host name, checked by its syntax only: resolving it here
// would make validate depend on DNS.
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
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 || strings.TrimLeft(port, "0123456789") != "" {
		p.Errorf("metricsAddress", "port %s of %s is not a number from 1 to 65535; %s", cpulist.EchoLong(port), cpulist.EchoLong(addr), metricsAddressExample)
	}
	if host != "" && !isIPWithZone(host) && !isHostName(host) {
		p.Errorf("metricsAddress", "host %s of %s is neither an IP address nor a host name; %s", cpulist.EchoLong(host), cpulist.EchoLong(addr), metricsAddressExample)
	}
}

// isIPWithZone tells whether s is an IP address, an IPv6 one possibly
// with its zone ("fe80::1%eth0"), as net.Listen takes it.
func isIPWithZone(s string) bool {
	ip, zone, hasZone := strings.Cut(s, "%")
	if hasZone && (zone == "" || !strings.Contains(ip, ":")) {
		return false
	}
	return net.ParseIP(ip) != nil
}

// isHostName tells whether s is a host name by RFC 1123's syntax: dot
// separated labels of letters, digits and inner hyphens, 63 bytes at
// most each, 253 in all, a trailing dot allowed.
func isHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
				return false
			}
		}
	}
	return true
}
