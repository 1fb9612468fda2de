package egress

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Direct connections to the address ranges of an allow list, without the proxy. The sandbox's
// network namespace gets a route to each range via the gateway address (the Docker driver
// adds them: bay.RangesToRoute), the table's prerouting chain redirects a TCP connection from
// that sandbox's address to one of its ranges to the gateway's direct port (set direct4:
// sandbox address . range), and the gateway reads the connection's original destination
// (SO_ORIGINAL_DST), checks it against the policy like any other (deny entries, ports, the
// operator's blocked ranges) and splices it there. A destination without a route fails in the
// sandbox at once (network unreachable), as before.

// DefaultDirectPort is the gateway's port for redirected direct connections.
const DefaultDirectPort = 3129

// soOriginalDst is SO_ORIGINAL_DST (linux/netfilter_ipv4.h).
const soOriginalDst = 80

// originalDst returns where a redirected connection was headed.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := c.(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("not a TCP connection")
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	var sa *unix.IPv6Mreq // 16 bytes: room for the struct sockaddr_in the kernel writes
	var serr error
	if err := raw.Control(func(fd uintptr) {
		sa, serr = unix.GetsockoptIPv6Mreq(int(fd), syscall.SOL_IP, soOriginalDst)
	}); err != nil {
		return netip.AddrPort{}, err
	}
	if serr != nil {
		return netip.AddrPort{}, fmt.Errorf("SO_ORIGINAL_DST: %w", serr)
	}
	b := sa.Multiaddr
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4])), nil
}

// handleDirect serves a connection redirected from a sandbox to an address of its allow list.
func (s *Service) handleDirect(ctx context.Context, c net.Conn, cl *client) {
	defer c.Close()
	dst, err := originalDst(c)
	if err != nil || dst.Addr() == c.LocalAddr().(*net.TCPAddr).AddrPort().Addr().Unmap() {
		// Not redirected: someone dialled the port itself.
		return
	}
	up, err := s.connect(ctx, cl, "tcp", dst.Addr().String(), int(dst.Port()))
	if err != nil {
		// Reset: the connection is refused as a direct one would be.
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		return
	}
	if t := s.track(cl, "tcp", dst.Addr().String(), int(dst.Port()), c, up); t != nil {
		s.splice(t, nil)
	}
}

// directElements renders the set direct4's elements for the registered allowlist sandboxes
// (caller holds s.mu): sandbox address . range, ranges inside another of the same sandbox left
// out (the set's intervals must not overlap).
func (s *Service) directElementsLocked() []string {
	var out []string
	for a, c := range s.clients {
		if !a.Is4() || c.policy.Mode != bay.NetworkAllowlist {
			continue
		}
		for _, p := range RangesToRoute(c.policy) {
			out = append(out, fmt.Sprintf("%s . %s", a, p))
		}
	}
	slices.Sort(out)
	return out
}

// RangesToRoute are the IPv4 ranges of p's allow list a sandbox reaches directly, none inside
// another.
func RangesToRoute(p bay.ParsedNetworkPolicy) []netip.Prefix {
	var ps []netip.Prefix
	for _, e := range p.Allow {
		if e.Prefix.IsValid() && e.Prefix.Addr().Is4() {
			ps = append(ps, e.Prefix.Masked())
		}
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Bits() - b.Bits() })
	var out []netip.Prefix
	for _, p := range ps {
		if !slices.ContainsFunc(out, func(q netip.Prefix) bool { return q.Contains(p.Addr()) }) {
			out = append(out, p)
		}
	}
	return out
}

// syncDirect replaces the set direct4's elements by those of the registered sandboxes, in
// one nft transaction, when the table is in use (Attach).
func (s *Service) syncDirect(ctx context.Context) error {
	s.directMu.Lock()
	defer s.directMu.Unlock()
	s.mu.Lock()
	on := s.confined
	elems := s.directElementsLocked()
	s.mu.Unlock()
	if !on {
		return nil
	}
	t := "inet " + Table
	var b strings.Builder
	fmt.Fprintf(&b, "flush set %s direct4\n", t)
	if len(elems) > 0 {
		fmt.Fprintf(&b, "add element %s direct4 { %s }\n", t, strings.Join(elems, ", "))
	}
	if _, err := nft(ctx, []byte(b.String()), "-f", "-"); err != nil {
		return fmt.Errorf("egress firewall: direct ranges: %w", err)
	}
	return nil
}
