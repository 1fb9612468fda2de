package config

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
)

// EgressUpstream parses a security.egress_dns_upstream entry, "host" (port 53) or
// "host:port" with an IP address for host, into "addr:port".
func EgressUpstream(s string) (string, error) {
	host, port := s, "53"
	if h, p, err := net.SplitHostPort(s); err == nil {
		host, port = h, p
	}
	a, err := netip.ParseAddr(host)
	if err != nil || a.Zone() != "" {
		return "", fmt.Errorf("%q: want an IP address with an optional :port", s)
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: port is not 1..65535", s)
	}
	return netip.AddrPortFrom(a.Unmap(), uint16(n)).String(), nil
}
