package bay

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A sandbox's network policy comes from its profile (the ceiling) and may be tightened by the
// create request and later by PATCH /v1/sandboxes/{id}/network, never loosened beyond the
// profile. Modes order from the tightest: none < allowlist < open.
//
// Entries of Allow and Deny are a destination and an optional port:
//
//	api.example.com        that name exactly
//	*.example.com          every name below example.com (not example.com itself)
//	203.0.113.7, 2001:db8::1, 203.0.113.0/24, [2001:db8::/32]
//	any of them with :443 (an IPv6 address or range in brackets: [2001:db8::1]:443)
//
// Deny wins over Allow. Whatever the policy, security.blocked_hosts stays unreachable unless
// security.allowed_hosts lets a range through: a policy can only narrow what the operator allows.

// Network policy bounds.
const (
	MaxNetworkEntries   = 256
	maxNetworkEntryLen  = 270
	maxDomainLen        = 253
	maxDomainLabelLen   = 63
	networkFieldDefault = "network"
)

// NetworkEntry is one parsed entry of a policy's Allow or Deny list.
type NetworkEntry struct {
	// Exactly one of Domain (lowercase, without trailing dot), Wildcard (the suffix after "*.")
	// and Prefix is set.
	Domain   string
	Wildcard string
	Prefix   netip.Prefix
	Port     int // 0 = every port
}

// String renders the entry in its canonical form.
func (e NetworkEntry) String() string {
	var host string
	switch {
	case e.Domain != "":
		host = e.Domain
	case e.Wildcard != "":
		host = "*." + e.Wildcard
	case e.Prefix.IsSingleIP():
		host = e.Prefix.Addr().String()
	default:
		host = e.Prefix.String()
	}
	if e.Port == 0 {
		return host
	}
	if e.Prefix.IsValid() && e.Prefix.Addr().Is6() {
		host = "[" + host + "]"
	}
	return host + ":" + strconv.Itoa(e.Port)
}

// ParseNetworkEntry parses one Allow or Deny entry.
func ParseNetworkEntry(s string) (NetworkEntry, error) {
	if s == "" || len(s) > maxNetworkEntryLen {
		return NetworkEntry{}, fmt.Errorf("want a domain, *.domain, IP address or CIDR range with an optional :port (at most %d characters)", maxNetworkEntryLen)
	}
	host, port := s, ""
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return NetworkEntry{}, fmt.Errorf("%q: unclosed '['", s)
		}
		host, port = s[1:end], s[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return NetworkEntry{}, fmt.Errorf("%q: want ':port' after ']'", s)
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && strings.HasSuffix(s, ":") {
			return NetworkEntry{}, fmt.Errorf("%q: empty port", s)
		}
	case strings.Count(s, ":") == 1:
		host, port, _ = strings.Cut(s, ":")
		if port == "" {
			return NetworkEntry{}, fmt.Errorf("%q: empty port", s)
		}
	}
	var e NetworkEntry
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return NetworkEntry{}, fmt.Errorf("%q: port %q is not 1..65535", s, port)
		}
		e.Port = n
	}
	if p, err := netip.ParsePrefix(host); err == nil {
		if p.Addr().Zone() != "" {
			return NetworkEntry{}, fmt.Errorf("%q: zoned addresses are not allowed", s)
		}
		e.Prefix = unmapPrefix(p)
		return e, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return NetworkEntry{}, fmt.Errorf("%q: zoned addresses are not allowed", s)
		}
		a = a.Unmap()
		e.Prefix = netip.PrefixFrom(a, a.BitLen())
		return e, nil
	}
	name := strings.ToLower(strings.TrimSuffix(host, "."))
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		if err := checkDomain(rest); err != nil {
			return NetworkEntry{}, fmt.Errorf("%q: %w", s, err)
		}
		if !strings.Contains(rest, ".") {
			return NetworkEntry{}, fmt.Errorf("%q: a wildcard needs at least two labels after '*.' (a whole top-level domain is too broad)", s)
		}
		e.Wildcard = rest
		return e, nil
	}
	if err := checkDomain(name); err != nil {
		return NetworkEntry{}, fmt.Errorf("%q: %w", s, err)
	}
	e.Domain = name
	return e, nil
}

func unmapPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96).Masked()
	}
	return p.Masked()
}

// checkDomain accepts a lowercase DNS name of letters, digits, '-' and '_' labels.
func checkDomain(name string) error {
	if name == "" || len(name) > maxDomainLen {
		return fmt.Errorf("a domain name has 1..%d characters", maxDomainLen)
	}
	for label := range strings.SplitSeq(name, ".") {
		if label == "" || len(label) > maxDomainLabelLen {
			return fmt.Errorf("every label of a domain name has 1..%d characters", maxDomainLabelLen)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		for _, c := range []byte(label) {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return fmt.Errorf("label %q: only letters, digits, '-' and '_' (a '*' only as the whole first label)", label)
			}
		}
	}
	return nil
}

// MatchName reports whether the entry admits the DNS name (any case, trailing dot or not) on
// port (0: the question is about the name alone, as for a DNS query).
func (e NetworkEntry) MatchName(name string, port int) bool {
	if e.Port != 0 && port != 0 && e.Port != port {
		return false
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	switch {
	case e.Domain != "":
		return name == e.Domain
	case e.Wildcard != "":
		return strings.HasSuffix(name, "."+e.Wildcard)
	}
	return false
}

// MatchAddr reports whether the entry admits the address on port (0: any port).
func (e NetworkEntry) MatchAddr(a netip.Addr, port int) bool {
	if e.Port != 0 && port != 0 && e.Port != port {
		return false
	}
	return e.Prefix.IsValid() && e.Prefix.Contains(a.Unmap())
}

// covers reports whether every destination of o is also one of e.
func (e NetworkEntry) covers(o NetworkEntry) bool {
	if e.Port != 0 && e.Port != o.Port {
		return false
	}
	switch {
	case e.Domain != "":
		return o.Domain == e.Domain
	case e.Wildcard != "":
		return o.Domain != "" && strings.HasSuffix(o.Domain, "."+e.Wildcard) ||
			o.Wildcard != "" && (o.Wildcard == e.Wildcard || strings.HasSuffix(o.Wildcard, "."+e.Wildcard))
	default:
		return o.Prefix.IsValid() && o.Prefix.Addr().BitLen() == e.Prefix.Addr().BitLen() &&
			o.Prefix.Bits() >= e.Prefix.Bits() && e.Prefix.Contains(o.Prefix.Addr())
	}
}

// modeRank orders the modes from the tightest; -1 for an unknown mode.
func modeRank(m NetworkMode) int {
	switch m {
	case NetworkNone:
		return 0
	case NetworkAllowlist:
		return 1
	case NetworkOpen, NetworkIsolated:
		return 2
	}
	return -1
}

// ParsedNetworkPolicy is a validated policy with its entries parsed.
type ParsedNetworkPolicy struct {
	Mode        NetworkMode
	Allow, Deny []NetworkEntry
}

// ParseNetworkPolicy validates p. field names the object in error messages ("network",
// "profiles[0].network"); errors are validation errors naming the offending field.
func ParseNetworkPolicy(field string, p NetworkPolicy) (ParsedNetworkPolicy, error) {
	if field == "" {
		field = networkFieldDefault
	}
	out := ParsedNetworkPolicy{Mode: p.Mode}
	switch p.Mode {
	case NetworkNone, NetworkOpen:
		if len(p.Allow) > 0 || len(p.Deny) > 0 {
			return out, Errorf(CodeValidation, "%s: mode %s takes no allow or deny entries (use mode allowlist)", field, p.Mode)
		}
		return out, nil
	case NetworkAllowlist:
	case "":
		return out, Errorf(CodeValidation, "%s.mode is required (none, allowlist or open)", field)
	default:
		return out, Errorf(CodeValidation, "%s.mode: %q is not one of none, allowlist, open", field, p.Mode)
	}
	var err error
	if out.Allow, err = parseEntries(field+".allow", p.Allow); err != nil {
		return out, err
	}
	if out.Deny, err = parseEntries(field+".deny", p.Deny); err != nil {
		return out, err
	}
	return out, nil
}

func parseEntries(field string, list []string) ([]NetworkEntry, error) {
	if len(list) > MaxNetworkEntries {
		return nil, Errorf(CodeValidation, "%s: at most %d entries, got %d", field, MaxNetworkEntries, len(list))
	}
	out := make([]NetworkEntry, 0, len(list))
	for i, s := range list {
		e, err := ParseNetworkEntry(strings.TrimSpace(s))
		if err != nil {
			return nil, Errorf(CodeValidation, "%s[%d]: %s", field, i, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Policy renders the parsed policy in canonical form.
func (p ParsedNetworkPolicy) Policy() NetworkPolicy {
	out := NetworkPolicy{Mode: p.Mode}
	for _, e := range p.Allow {
		out.Allow = append(out.Allow, e.String())
	}
	for _, e := range p.Deny {
		out.Deny = append(out.Deny, e.String())
	}
	return out
}

// TightenNetworkPolicy returns the effective policy of a request (create, PATCH) under the
// profile's ceiling: the request's mode, its allow list (the ceiling's when the request has
// none and both are allowlists), and the union of both deny lists. A request that would
// reach more than the ceiling is a validation error naming the offending field (field is the
// request's name for the object, "network").
func TightenNetworkPolicy(field string, ceiling, req NetworkPolicy) (NetworkPolicy, error) {
	if field == "" {
		field = networkFieldDefault
	}
	c, err := ParseNetworkPolicy("profile network", normalizeMode(ceiling))
	if err != nil {
		return NetworkPolicy{}, fmt.Errorf("profile network policy: %w", err)
	}
	r, err := ParseNetworkPolicy(field, req)
	if err != nil {
		return NetworkPolicy{}, err
	}
	if modeRank(r.Mode) > modeRank(c.Mode) {
		return NetworkPolicy{}, Errorf(CodeValidation, "%s.mode: %s would loosen the profile's network mode %s", field, r.Mode, c.Mode).
			WithDetails(map[string]any{"field": field + ".mode", "ceiling": string(c.Mode)})
	}
	if r.Mode != NetworkAllowlist {
		return r.Policy(), nil
	}
	if c.Mode == NetworkAllowlist {
		if req.Allow == nil {
			r.Allow = slices.Clone(c.Allow)
		}
		for i, e := range r.Allow {
			if !slices.ContainsFunc(c.Allow, func(ce NetworkEntry) bool { return ce.covers(e) }) {
				return NetworkPolicy{}, Errorf(CodeValidation, "%s.allow[%d]: %s is not within the profile's allow list", field, i, e).
					WithDetails(map[string]any{"field": fmt.Sprintf("%s.allow[%d]", field, i)})
			}
		}
		for _, d := range c.Deny {
			if !slices.ContainsFunc(r.Deny, func(rd NetworkEntry) bool { return rd == d }) {
				r.Deny = append(r.Deny, d)
			}
		}
	}
	return r.Policy(), nil
}

// normalizeMode maps the zero and the legacy isolated mode to open.
func normalizeMode(p NetworkPolicy) NetworkPolicy {
	if p.Mode == "" || p.Mode == NetworkIsolated {
		p.Mode = NetworkOpen
	}
	return p
}

// EffectiveMode is the mode a driver enforces: the zero and the isolated mode are open.
func (p NetworkPolicy) EffectiveMode() NetworkMode { return normalizeMode(p).Mode }

// AllowsName reports whether an allowlist admits the DNS name on port (0: any port, the
// question of a DNS query): an allow entry matches and no deny entry does.
func (p ParsedNetworkPolicy) AllowsName(name string, port int) (ok bool, rule string) {
	for _, d := range p.Deny {
		// A deny of one port leaves the name resolvable: it may be allowed on others.
		if d.MatchName(name, port) && (d.Port == 0 || port != 0) {
			return false, "deny " + d.String()
		}
	}
	for _, a := range p.Allow {
		if a.MatchName(name, port) {
			return true, "allow " + a.String()
		}
	}
	return false, RuleNotInAllowList
}

// AllowsAddr reports whether an allowlist admits a direct connection to the address on port:
// an allow range matches and no deny range does.
func (p ParsedNetworkPolicy) AllowsAddr(a netip.Addr, port int) (ok bool, rule string) {
	for _, d := range p.Deny {
		if d.MatchAddr(a, port) {
			return false, "deny " + d.String()
		}
	}
	for _, e := range p.Allow {
		if e.MatchAddr(a, port) {
			return true, "allow " + e.String()
		}
	}
	return false, RuleNotInAllowList
}

// RuleNotInAllowList is the rule of a refusal that no allow entry lets through.
const RuleNotInAllowList = "not in allow list"

// NetworkEvent is one connection or DNS query an instance's policy refused.
type NetworkEvent struct {
	Time time.Time
	Kind string // dns | http | tls | tcp | udp
	Host string // the name asked for, or the address
	Port int
	Rule string // why: "not in allow list", "deny x", "blocked address 10.0.0.1", ...
}

// NetworkEnforcer is implemented by drivers that enforce allowlists themselves (bay's resolver
// and egress gateway) and so can change a running instance's allowlist in place and report
// what it refused.
type NetworkEnforcer interface {
	// UpdateNetwork applies p to the running instance: new connections and queries follow it
	// at once, open connections it no longer allows are closed within a second. It fails with
	// ErrRestartRequired when p can only take effect on a new instance (a change of mode).
	UpdateNetwork(ctx context.Context, instance string, p NetworkPolicy) error
	// NetworkEvents returns the newest refusals recorded for the sandbox (oldest first) and
	// how many there were in all; an error when the enforcement could not be asked.
	NetworkEvents(ctx context.Context, sandboxID string) (events []NetworkEvent, denied int64, err error)
}

// NetworkRestorer is implemented by drivers whose enforcement lives in bay's process (the
// Docker driver's resolver and gateway), which a restarted bay must teach again the running
// instances it knew: until then they are refused everything (fail closed).
type NetworkRestorer interface {
	// RestoreNetworks registers the running instances of closed policies that are unknown,
	// each with the policy policy returns for it; an instance policy does not know, or whose
	// policy's mode is not the one it runs under, stays refused. It returns how many it
	// registered.
	RestoreNetworks(ctx context.Context, policy PolicyLookup) (int, error)
}

// PolicyLookup returns the policy the sandbox of a running instance is under now (ok false:
// the instance is no current compute of any sandbox).
type PolicyLookup func(ctx context.Context, instance string) (p NetworkPolicy, ok bool, err error)

// ErrRestartRequired: the change applies to the next instance only.
var ErrRestartRequired = errors.New("the network policy change needs a new instance")
