package egress

import (
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Observer counts what the resolver and the gateway decide (internal/bay/metrics implements
// it). Its labels are bounded: a policy mode, a kind, a reason or result of the constants
// below; never a sandbox, a name or an address.
type Observer interface {
	// EgressDenied counts one refusal recorded for a sandbox (what its events list shows).
	EgressDenied(mode, kind, reason string)
	// EgressQuery counts one DNS query answered, by the mode of the asking sandbox's policy
	// (ModeUnknown: an address no sandbox is registered at) and its Query* result.
	EgressQuery(mode, result string)
}

// Reasons of a refusal (the rule of an event, classified).
const (
	ReasonNotAllowed   = "not_allowed"      // in no allow entry
	ReasonDenyEntry    = "deny_entry"       // matched a deny entry
	ReasonBlocked      = "blocked_address"  // resolved to an address the operator blocks
	ReasonModeNone     = "mode_none"        // the sandbox has no network
	ReasonPolicyChange = "policy_changed"   // an open connection closed by a narrower policy
	ReasonConnLimit    = "connection_limit" // MaxConnsPerInstance reached
	ReasonNoServerName = "no_server_name"   // TLS without SNI on the transparent port
	ReasonOther        = "other"
)

// Results of a DNS query.
const (
	QueryAnswered    = "answered"       // allowed, exists upstream
	QueryRefused     = "refused"        // the policy refused it (a denial)
	QueryNXDomain    = "nxdomain"       // allowed, but the upstream knows no such name
	QueryUpstreamErr = "upstream_error" // allowed, the upstream failed
	QueryMalformed   = "malformed"
	QueryUnknown     = "unregistered" // from an address no sandbox is registered at
)

// ModeUnknown labels queries from unregistered addresses.
const ModeUnknown = "unregistered"

// reasonOf classifies an event's rule.
func reasonOf(rule string) string {
	switch {
	case rule == bay.RuleNotInAllowList:
		return ReasonNotAllowed
	case strings.HasPrefix(rule, "deny "):
		return ReasonDenyEntry
	case strings.HasPrefix(rule, ruleBlocked):
		return ReasonBlocked
	case rule == ruleModeNone:
		return ReasonModeNone
	case rule == ruleClosed:
		return ReasonPolicyChange
	case strings.HasPrefix(rule, ruleConnLimit):
		return ReasonConnLimit
	case rule == ruleNoSNI:
		return ReasonNoServerName
	}
	return ReasonOther
}

// Rules of the refusals this package makes itself (bay's policy makes "deny <entry>" and
// bay.RuleNotInAllowList).
const (
	ruleBlocked   = "blocked address "
	ruleModeNone  = "network mode none"
	ruleClosed    = "closed: the policy no longer allows it"
	ruleConnLimit = "more than "
	ruleNoSNI     = "no server name in the TLS ClientHello"
)

type nopObserver struct{}

func (nopObserver) EgressDenied(string, string, string) {}
func (nopObserver) EgressQuery(string, string)          {}

// deny records a refusal for the sandbox of cl (mode its policy's) and counts it.
func (s *Service) deny(sandboxID string, mode bay.NetworkMode, kind, host string, port int, rule string) {
	s.events.deny(sandboxID, kind, host, port, rule)
	s.cfg.Observer.EgressDenied(string(mode), kind, reasonOf(rule))
}
