// Package netguard is bay's host firewall for sandbox networks. Code in a sandbox must reach
// neither the host it runs on (any of the host's addresses, through the bridge gateway or
// otherwise) nor the blocked ranges (private, shared, link-local with the cloud metadata
// address, loopback, multicast and reserved ranges by default), while it keeps the internet.
//
// The rules live in an nftables table of bay's own, "inet shipyard" unless configured, which
// nothing but bay writes:
//
//	set guarded   { type ifname }                 bridges of sandbox networks
//	set same      { type ifname . ifname }        (bridge . bridge) of each guarded bridge
//	set blocked4/6, allowed4/6 { interval }       security.blocked_hosts / allowed_hosts
//	set dns4/6                                    the host's resolvers (port 53 only)
//	chain input   hook input   priority filter-10:
//	    iifname != @guarded return
//	    ct state established,related accept       (replies to connections the host opened)
//	    neighbour discovery accept; resolvers :53 accept; allowed accept
//	    reject                                    (everything else addressed to the host)
//	chain forward hook forward priority filter-10:
//	    iifname != @guarded return
//	    ct state established,related accept
//	    iifname . oifname @same accept            (within one network: the engine decides)
//	    resolvers :53 accept; allowed accept
//	    blocked reject
//
// The forward chain runs before the engine's own filter chains (priority 0), so a packet it
// rejects never reaches them; what it accepts still passes through them. Rejecting (a TCP
// reset, else ICMP administratively prohibited) makes a blocked connection fail at once
// instead of timing out.
//
// The table is installed in one nft transaction (atomic: no window without rules) under a
// machine-wide lock, so bays on one host installing at once never interleave. Installing is
// idempotent: chains and address sets are flushed and refilled, bridges are only added (the
// elements of bridges that no longer exist are pruned). The address sets hold the
// configuration of the bay that installed last: bays sharing one host should share
// security.blocked_hosts and allowed_hosts. Bay never removes the table, so it survives bay
// restarts (nothing is open while bay is down), and verifies it every RecheckInterval (Run),
// installing it again when someone removed it.
package netguard

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/hostlock"
)

// DefaultTable is the nftables table (family inet) bay owns.
const DefaultTable = "shipyard"

// DefaultBlocked is what sandboxes may not reach unless allowed: private (RFC 1918, unique
// local), shared address space, link-local (the cloud metadata address included), loopback,
// "this network", multicast, reserved and broadcast, and IPv4-mapped IPv6 (which would carry
// all of those again).
var DefaultBlocked = []string{
	"0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
	"192.168.0.0/16", "224.0.0.0/4", "240.0.0.0/4",
	"::/128", "::1/128", "::ffff:0:0/96", "fc00::/7", "fe80::/10", "ff00::/8",
}

// RecheckInterval is how long an installed bridge is trusted before Protect verifies the
// table again (and reinstalls it when someone removed it).
const RecheckInterval = 30 * time.Second

// Config configures a Guard.
type Config struct {
	// Table is the nftables table name (family inet); default DefaultTable.
	Table string
	// Blocked and Allowed are destination ranges; an allowed range wins over a blocked one and
	// over the rule that keeps sandboxes off the host's own addresses.
	Blocked, Allowed []netip.Prefix
	// Resolvers may be queried on port 53 even when blocked (the engine's embedded DNS
	// forwards a sandbox's queries from the sandbox's own network namespace). nil: the
	// nameservers of /etc/resolv.conf.
	Resolvers []netip.Addr
	// NFT is the nft binary; default: nft on PATH.
	NFT string
	Log *slog.Logger
}

// Guard installs the firewall for sandbox bridges. It is safe for concurrent use.
type Guard struct {
	cfg Config

	mu       sync.Mutex
	verified map[string]time.Time // bridge -> when it was last installed or verified; zero: not yet
}

// New checks that the firewall can be installed here (root, nft present and usable) and
// returns a Guard. Its error says what is missing and how to run without the firewall.
func New(ctx context.Context, cfg Config) (*Guard, error) {
	if cfg.Table == "" {
		cfg.Table = DefaultTable
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolvers == nil {
		cfg.Resolvers = Resolvers("/etc/resolv.conf")
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: bay runs as uid %d, but installing the firewall needs root", ErrUnavailable, os.Geteuid())
	}
	if cfg.NFT == "" {
		p, err := exec.LookPath("nft")
		if err != nil {
			return nil, fmt.Errorf("%w: the nft command is not installed (Debian: apt-get install nftables)", ErrUnavailable)
		}
		cfg.NFT = p
	}
	g := &Guard{cfg: cfg, verified: map[string]time.Time{}}
	if _, err := g.nft(ctx, nil, "list", "tables"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	// After a restart the bridges the table already guards are installed again with this
	// configuration by the first refresh (see Run), even before any sandbox starts.
	bridges, err := g.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	for _, b := range bridges {
		if _, err := os.Stat("/sys/class/net/" + b); err == nil {
			g.verified[b] = time.Time{}
		}
	}
	return g, nil
}

// ErrUnavailable: the firewall cannot be installed on this host.
var ErrUnavailable = errors.New("the sandbox network firewall cannot be installed (set security.sandbox_firewall: false to run sandboxes without it)")

// Table returns the nftables table the guard writes.
func (g *Guard) Table() string { return g.cfg.Table }

// Protect makes sure the firewall is in place for bridge (a Linux bridge interface on this
// host): installed on the first call, verified again after RecheckInterval.
func (g *Guard) Protect(ctx context.Context, bridge string) error {
	if !validIfname(bridge) {
		return fmt.Errorf("firewall: invalid bridge interface name %q", bridge)
	}
	if _, err := os.Stat("/sys/class/net/" + bridge + "/bridge"); err != nil {
		return fmt.Errorf("%w: bridge %s of the sandbox network is not on this host (a remote or rootless engine?)", ErrUnavailable, bridge)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// A zero time: not installed by this guard yet (its address sets may be another
	// configuration's), so install; else trust it for RecheckInterval, then verify.
	t := g.verified[bridge]
	if !t.IsZero() && time.Since(t) < RecheckInterval {
		return nil
	}
	if !t.IsZero() {
		if present, err := g.installed(ctx, bridge); err == nil && present {
			g.verified[bridge] = time.Now()
			return nil
		}
		g.cfg.Log.WarnContext(ctx, "sandbox firewall missing, installing it again", "table", g.cfg.Table, "bridge", bridge)
	}
	if err := g.install(ctx, bridge); err != nil {
		return err
	}
	g.verified[bridge] = time.Now()
	return nil
}

// Refresh verifies the firewall of every bridge protected so far now, and installs it again
// where it is missing (someone flushed the ruleset); bridges that are gone are forgotten.
func (g *Guard) Refresh(ctx context.Context) error {
	g.mu.Lock()
	bridges := make([]string, 0, len(g.verified))
	for b, t := range g.verified {
		if !t.IsZero() {
			g.verified[b] = time.Now().Add(-RecheckInterval) // due now
		}
		bridges = append(bridges, b)
	}
	g.mu.Unlock()
	var errs []error
	for _, b := range bridges {
		if _, err := os.Stat("/sys/class/net/" + b); errors.Is(err, os.ErrNotExist) {
			g.mu.Lock()
			delete(g.verified, b)
			g.mu.Unlock()
			continue
		}
		if err := g.Protect(ctx, b); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Run refreshes the firewall every RecheckInterval until ctx ends, so that a table removed
// behind bay's back comes back without waiting for the next sandbox start.
func (g *Guard) Run(ctx context.Context) error {
	t := time.NewTicker(RecheckInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			if err := g.Refresh(ctx); err != nil && ctx.Err() == nil {
				g.cfg.Log.ErrorContext(ctx, "sandbox firewall refresh failed", "table", g.cfg.Table, "err", err)
			}
		}
	}
}

// install writes the whole table and adds bridge, under the machine-wide lock.
func (g *Guard) install(ctx context.Context, bridge string) error {
	unlock, err := hostlock.Acquire(ctx, "shipyard-netguard-"+g.cfg.Table, nil)
	if err != nil {
		return fmt.Errorf("firewall: %w", err)
	}
	defer unlock()
	stale, err := g.staleBridges(ctx)
	if err != nil {
		return err
	}
	if _, err := g.nft(ctx, []byte(g.script(bridge, stale)), "-f", "-"); err != nil {
		return fmt.Errorf("firewall: install table inet %s: %w", g.cfg.Table, err)
	}
	g.cfg.Log.InfoContext(ctx, "sandbox firewall installed", "table", g.cfg.Table, "bridge", bridge,
		"blocked", len(g.cfg.Blocked), "allowed", len(g.cfg.Allowed), "pruned", len(stale))
	return nil
}

// script is the nft transaction that installs the table for bridge and drops the elements of
// the stale bridges.
func (g *Guard) script(bridge string, stale []string) string {
	t := "inet " + g.cfg.Table
	var b strings.Builder
	line := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	line("add table %s", t)
	line("add set %s guarded { type ifname; }", t)
	line("add set %s same { type ifname . ifname; }", t)
	for _, s := range []string{"blocked", "allowed", "dns"} {
		flags := " flags interval; auto-merge;"
		if s == "dns" {
			flags = ""
		}
		line("add set %s %s4 { type ipv4_addr;%s }", t, s, flags)
		line("add set %s %s6 { type ipv6_addr;%s }", t, s, flags)
		line("flush set %s %s4", t, s)
		line("flush set %s %s6", t, s)
	}
	add := func(set string, elems []string) {
		if len(elems) > 0 {
			line("add element %s %s { %s }", t, set, strings.Join(elems, ", "))
		}
	}
	for _, set := range []struct {
		name string
		pp   []netip.Prefix
	}{{"blocked", g.cfg.Blocked}, {"allowed", g.cfg.Allowed}} {
		v4, v6 := splitPrefixes(set.pp)
		add(set.name+"4", v4)
		add(set.name+"6", v6)
	}
	var dns4, dns6 []string
	for _, a := range g.cfg.Resolvers {
		if a.Unmap().Is4() {
			dns4 = append(dns4, a.Unmap().String())
		} else {
			dns6 = append(dns6, a.String())
		}
	}
	add("dns4", dns4)
	add("dns6", dns6)
	for _, s := range stale {
		line("delete element %s guarded { %q }", t, s)
		line("delete element %s same { %q . %q }", t, s, s)
	}
	add("guarded", []string{fmt.Sprintf("%q", bridge)})
	add("same", []string{fmt.Sprintf("%q . %q", bridge, bridge)})

	line("add chain %s input { type filter hook input priority filter - 10; policy accept; }", t)
	line("add chain %s forward { type filter hook forward priority filter - 10; policy accept; }", t)
	line("flush chain %s input", t)
	line("flush chain %s forward", t)
	common := []string{
		"ct state established,related accept",
		"ip daddr @dns4 meta l4proto { tcp, udp } th dport 53 accept",
		"ip6 daddr @dns6 meta l4proto { tcp, udp } th dport 53 accept",
		"ip daddr @allowed4 accept",
		"ip6 daddr @allowed6 accept",
	}
	line("add rule %s input iifname != @guarded return", t)
	for _, r := range common {
		line("add rule %s input %s", t, r)
	}
	// Without neighbour discovery to its gateway a sandbox on an IPv6 network reaches nothing.
	line("add rule %s input icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept", t)
	line("add rule %s input meta l4proto tcp counter reject with tcp reset", t)
	line("add rule %s input counter reject with icmpx type admin-prohibited", t)

	line("add rule %s forward iifname != @guarded return", t)
	line("add rule %s forward iifname . oifname @same accept", t)
	for _, r := range common {
		line("add rule %s forward %s", t, r)
	}
	for _, fam := range []string{"ip", "ip6"} {
		set := "@blocked4"
		if fam == "ip6" {
			set = "@blocked6"
		}
		line("add rule %s forward %s daddr %s meta l4proto tcp counter reject with tcp reset", t, fam, set)
		line("add rule %s forward %s daddr %s counter reject with icmpx type admin-prohibited", t, fam, set)
	}
	return b.String()
}

func splitPrefixes(pp []netip.Prefix) (v4, v6 []string) {
	for _, p := range pp {
		p = p.Masked()
		if p.Addr().Is4() {
			v4 = append(v4, p.String())
		} else {
			v6 = append(v6, p.String())
		}
	}
	return v4, v6
}

// nftSet is the part of `nft -j list` output the guard reads.
type nftOutput struct {
	Nftables []struct {
		Set *struct {
			Name string            `json:"name"`
			Elem []json.RawMessage `json:"elem"`
		} `json:"set"`
		Chain *struct {
			Name string `json:"name"`
			Hook string `json:"hook"`
		} `json:"chain"`
		Rule *struct {
			Chain string `json:"chain"`
		} `json:"rule"`
	} `json:"nftables"`
}

// listTable reads the table; a missing table is an empty result.
func (g *Guard) listTable(ctx context.Context) (*nftOutput, bool, error) {
	out, err := g.nft(ctx, nil, "-j", "list", "table", "inet", g.cfg.Table)
	if err != nil {
		if strings.Contains(err.Error(), "No such file or directory") {
			return &nftOutput{}, false, nil
		}
		return nil, false, fmt.Errorf("firewall: list table inet %s: %w", g.cfg.Table, err)
	}
	var o nftOutput
	if err := json.Unmarshal(out, &o); err != nil {
		return nil, false, fmt.Errorf("firewall: parse table inet %s: %w", g.cfg.Table, err)
	}
	return &o, true, nil
}

// Bridges returns the bridges the table guards.
func (g *Guard) Bridges(ctx context.Context) ([]string, error) {
	o, _, err := g.listTable(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, it := range o.Nftables {
		if it.Set == nil || it.Set.Name != "guarded" {
			continue
		}
		for _, e := range it.Set.Elem {
			var s string
			if json.Unmarshal(e, &s) == nil {
				out = append(out, s)
			}
		}
	}
	return out, nil
}

// staleBridges lists guarded bridges whose interface is gone (networks removed since).
func (g *Guard) staleBridges(ctx context.Context) ([]string, error) {
	all, err := g.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	var stale []string
	for _, b := range all {
		if _, err := os.Stat("/sys/class/net/" + b); errors.Is(err, os.ErrNotExist) {
			stale = append(stale, b)
		}
	}
	return stale, nil
}

// installed reports whether the table has both chains with rules and guards bridge.
func (g *Guard) installed(ctx context.Context, bridge string) (bool, error) {
	o, ok, err := g.listTable(ctx)
	if err != nil || !ok {
		return false, err
	}
	hooks := map[string]bool{}
	rules := map[string]int{}
	for _, it := range o.Nftables {
		if it.Chain != nil && it.Chain.Hook != "" {
			hooks[it.Chain.Name] = true
		}
		if it.Rule != nil {
			rules[it.Rule.Chain]++
		}
	}
	if !hooks["input"] || !hooks["forward"] || rules["input"] == 0 || rules["forward"] == 0 {
		return false, nil
	}
	bridges, err := g.Bridges(ctx)
	return slices.Contains(bridges, bridge), err
}

// Release stops guarding bridge (tests; bay itself only prunes bridges that are gone).
func (g *Guard) Release(ctx context.Context, bridge string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.verified, bridge)
	bridges, err := g.Bridges(ctx)
	if err != nil || !slices.Contains(bridges, bridge) {
		return err
	}
	t := "inet " + g.cfg.Table
	script := fmt.Sprintf("delete element %s guarded { %q }\ndelete element %s same { %q . %q }\n", t, bridge, t, bridge, bridge)
	if _, err := g.nft(ctx, []byte(script), "-f", "-"); err != nil {
		return fmt.Errorf("firewall: release %s: %w", bridge, err)
	}
	return nil
}

// Uninstall deletes the table (tests; bay never removes its firewall).
func (g *Guard) Uninstall(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	clear(g.verified)
	if _, ok, err := g.listTable(ctx); err != nil || !ok {
		return err
	}
	if _, err := g.nft(ctx, nil, "delete", "table", "inet", g.cfg.Table); err != nil {
		return fmt.Errorf("firewall: delete table inet %s: %w", g.cfg.Table, err)
	}
	return nil
}

// nft runs the nft command with stdin, bounded to 30 s.
func (g *Guard) nft(ctx context.Context, stdin []byte, args ...string) ([]byte, error) {
	return NFT(ctx, g.cfg.NFT, stdin, args...)
}

// NFT runs the nft binary (on PATH when "") with stdin and args, bounded to 30 s; its error
// carries nft's message.
func NFT(ctx context.Context, nft string, stdin []byte, args ...string) ([]byte, error) {
	if nft == "" {
		nft = "nft"
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, nft, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("nft %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// ValidIfname reports whether s is a Linux interface name.
func ValidIfname(s string) bool { return validIfname(s) }

// validIfname accepts Linux interface names (1..15 bytes, no slash, space, quote or colon).
func validIfname(s string) bool {
	return len(s) > 0 && len(s) < 16 && !strings.ContainsAny(s, "/ \t\n\"\\:") && s != "." && s != ".."
}

// BridgeName is the Linux bridge of a Docker bridge network: the bridge.name driver option, or
// "br-" and the first 12 characters of the network id.
func BridgeName(networkID string, options map[string]string) string {
	if n := options["com.docker.network.bridge.name"]; n != "" {
		return n
	}
	if len(networkID) > 12 {
		networkID = networkID[:12]
	}
	return "br-" + networkID
}

// ParseHosts parses CIDRs or single addresses (a single address is a /32 or /128).
func ParseHosts(list []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		s = strings.TrimSpace(s)
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%q is neither a CIDR range nor an IP address", s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// Resolvers returns the non-loopback nameservers of a resolv.conf (loopback resolvers are
// queried by the engine from the host, not from the sandbox).
func Resolvers(path string) []netip.Addr {
	f, err := os.Open(path)
	if err != nil {
		return []netip.Addr{}
	}
	defer f.Close()
	out := []netip.Addr{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		a, err := netip.ParseAddr(fields[1])
		if err != nil || a.IsLoopback() || a.Zone() != "" || slices.Contains(out, a.Unmap()) {
			continue
		}
		out = append(out, a.Unmap())
	}
	return out
}
