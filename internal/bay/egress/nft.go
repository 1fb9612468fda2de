package egress

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// Table is the nftables table (family inet) that confines the closed policies' bridges:
//
//	set bridges  { type ifname }            bridges of allowlisted sandboxes
//	set sealed   { type ifname }            bridges of sandboxes without network
//	set same     { type ifname . ifname }   (bridge . bridge) of each of them
//	set gateway4 { type ipv4_addr }         the allowlist bridges' gateway addresses
//	set dnsport, tcpports { inet_service }  where the gateway listens there
//	chain input   hook input   priority filter-20:
//	    iifname != @bridges and != @sealed: return
//	    ct state established,related accept   (replies to bay's calls to the runtimes)
//	    gateway: udp @dnsport, tcp @tcpports accept (allowlist bridges)
//	    gateway: udp and tcp @dnsport accept          (sealed bridges: the resolver only)
//	    reject                                (every other port and address of the host)
//	chain forward hook forward priority filter-20:
//	    iifname . oifname @same accept        (within one bridge: the engine decides)
//	    iifname @bridges or @sealed: reject   (nothing is routed out, whatever the routes say)
//
// Rejecting answers at once (a TCP reset, else ICMP administratively prohibited), so a
// refused connection fails fast instead of timing out. Installing is idempotent; elements are
// only added (bridges that are gone leave harmless names behind until Unconfine).
const Table = "shipyard_egress"

// confine installs the table and adds the bridge: to bridges with the gateway address gw and
// the gateway's ports ep, or, when sealed, to sealed (with the resolver at gw when valid).
func confine(ctx context.Context, bridge string, gw netip.Addr, ep Endpoints, sealed bool) error {
	if !netguard.ValidIfname(bridge) {
		return fmt.Errorf("egress firewall: invalid bridge name %q", bridge)
	}
	t := "inet " + Table
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("add table %s", t)
	line("add set %s bridges { type ifname; }", t)
	line("add set %s sealed { type ifname; }", t)
	line("add set %s same { type ifname . ifname; }", t)
	line("add set %s gateway4 { type ipv4_addr; }", t)
	line("add set %s dnsport { type inet_service; }", t)
	line("add set %s tcpports { type inet_service; }", t)
	line("add set %s direct4 { type ipv4_addr . ipv4_addr; flags interval; }", t)
	line("add element %s same { %q . %q }", t, bridge, bridge)
	if gw.IsValid() {
		if !gw.Is4() {
			return fmt.Errorf("egress firewall: gateway %s is not IPv4", gw)
		}
		line("add element %s gateway4 { %s }", t, gw)
		line("add element %s dnsport { %d }", t, ep.DNS.Port())
		line("add element %s tcpports { %d, %d, %d, %d }", t, ep.DNS.Port(), ep.HTTP.Port(), ep.TLS.Port(), ep.Proxy.Port())
		if !sealed {
			line("add element %s tcpports { %d }", t, ep.Direct.Port())
		}
	}
	if sealed {
		line("add element %s sealed { %q }", t, bridge)
	} else {
		line("add element %s bridges { %q }", t, bridge)
	}
	line("add chain %s input { type filter hook input priority filter - 20; policy accept; }", t)
	line("add chain %s forward { type filter hook forward priority filter - 20; policy accept; }", t)
	line("add chain %s prerouting { type nat hook prerouting priority dstnat - 10; policy accept; }", t)
	if !sealed {
		// A connection to a range of the sandbox's allow list (it has a route there via the
		// gateway address) goes to the gateway's direct port, which reads where it was
		// headed (direct.go).
		line("flush chain %s prerouting", t)
		line("add rule %s prerouting iifname @bridges ip saddr . ip daddr @direct4 meta l4proto tcp redirect to :%d", t, ep.Direct.Port())
	}
	line("flush chain %s input", t)
	line("flush chain %s forward", t)
	line("add rule %s input iifname != @bridges iifname != @sealed return", t)
	line("add rule %s input ct state established,related accept", t)
	line("add rule %s input iifname @bridges ip daddr @gateway4 udp dport @dnsport accept", t)
	line("add rule %s input iifname @bridges ip daddr @gateway4 tcp dport @tcpports accept", t)
	line("add rule %s input iifname @sealed ip daddr @gateway4 meta l4proto { tcp, udp } th dport @dnsport accept", t)
	line("add rule %s input meta l4proto tcp counter reject with tcp reset", t)
	line("add rule %s input counter reject with icmpx type admin-prohibited", t)
	line("add rule %s forward iifname . oifname @same accept", t)
	for _, set := range []string{"@bridges", "@sealed"} {
		line("add rule %s forward iifname %s meta l4proto tcp counter reject with tcp reset", t, set)
		line("add rule %s forward iifname %s counter reject with icmpx type admin-prohibited", t, set)
	}
	if _, err := nft(ctx, []byte(b.String()), "-f", "-"); err != nil {
		return fmt.Errorf("egress firewall: install table %s: %w", t, err)
	}
	return nil
}

// Unconfine removes the table (tests; bay leaves it in place, with nothing open while it is
// down).
func Unconfine(ctx context.Context) error {
	if _, err := nft(ctx, nil, "list", "table", "inet", Table); err != nil {
		return nil
	}
	_, err := nft(ctx, nil, "delete", "table", "inet", Table)
	return err
}

// nftCheck makes nft only check its input (tests).
var nftCheck = false

func nft(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	if nftCheck {
		args = append([]string{"-c"}, args...)
	}
	return netguard.NFT(ctx, "", stdin, args...)
}
