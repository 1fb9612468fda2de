// Package egressgw is bay's egress gateway on Kubernetes (`bay egress-gateway`): the resolver
// and gateway of internal/bay/egress run in the Pods of a Deployment, behind a Service, and
// serve the sandbox Pods whose allowlist names hosts.
//
// The driver (internal/bay/k8s) writes each such Pod's effective policy into an annotation
// (AnnotationPolicy, with the sandbox's id) and gives it the Service's address as its only
// nameserver, HTTP(S)_PROXY pointing at the Service, and a NetworkPolicy that lets it reach
// the gateway's Pods on the gateway's ports alone (and the address entries of its list). The
// gateway learns the Pods by watching them: a Pod with an address and the annotation is
// registered under its address with that policy, a changed annotation updates it (connections
// no longer allowed are closed), a Pod that ended or went is forgotten. An address it does not
// know is refused everything: DNS answers REFUSED and connections are closed (fail closed).
//
// Bay reads each gateway Pod's refusals, and whether it applied a Pod's policy yet, on the
// Pods' admin port, with a bearer token both read from a Secret (admin.go).
package egressgw

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// AnnotationPolicy holds a sandbox Pod's policy for the gateway, as PodPolicy in JSON.
const AnnotationPolicy = "shipyard.dev/egress-policy"

// The names of the gateway Service's ports. Each must have a numeric targetPort: that is where
// the gateway's Pods listen, and what the sandboxes' NetworkPolicies admit.
const (
	PortDNS    = "dns" // UDP and TCP (two ports of the one name: dns and dns-tcp)
	PortDNSTCP = "dns-tcp"
	PortHTTP   = "http"  // transparent HTTP (the Host header)
	PortTLS    = "tls"   // transparent TLS (the ClientHello's server name)
	PortProxy  = "proxy" // the HTTP proxy (CONNECT and absolute-form requests)
	PortAdmin  = "admin" // bay's: refusals and what the gateway knows, with the token
	// PortBarrier (optional) accepts connections and closes them. The gateway's own policy
	// admits the sandboxes there and their policies do not, so a connection to it fails once a
	// sandbox's NetworkPolicy is in force: the runtimes wait for that before they serve.
	PortBarrier = "barrier"
)

// PodPolicy is what the annotation carries.
type PodPolicy struct {
	SandboxID string            `json:"sandbox_id"`
	Policy    bay.NetworkPolicy `json:"policy"`
}

// Encode renders the annotation's value.
func Encode(sandboxID string, p bay.NetworkPolicy) (string, error) {
	if sandboxID == "" {
		return "", errors.New("egress annotation: no sandbox id")
	}
	b, err := json.Marshal(PodPolicy{SandboxID: sandboxID, Policy: p})
	if err != nil {
		return "", fmt.Errorf("egress annotation: %w", err)
	}
	return string(b), nil
}

// Decode reads the annotation's value and checks its policy.
func Decode(v string) (PodPolicy, error) {
	var pp PodPolicy
	if err := json.Unmarshal([]byte(v), &pp); err != nil {
		return PodPolicy{}, fmt.Errorf("egress annotation: %w", err)
	}
	if pp.SandboxID == "" {
		return PodPolicy{}, errors.New("egress annotation: no sandbox id")
	}
	if _, err := bay.ParseNetworkPolicy("network", pp.Policy); err != nil {
		return PodPolicy{}, fmt.Errorf("egress annotation: %w", err)
	}
	return pp, nil
}

// Version names an annotation's value: the gateway reports the version it applied, bay waits
// for the one it wrote.
func Version(annotation string) string {
	sum := sha256.Sum256([]byte(annotation))
	return hex.EncodeToString(sum[:8])
}
