package bayapi

// Network policy of a sandbox (ours): the profile's policy is the ceiling; a create request's
// network field and PATCH /v1/sandboxes/{id}/network may only tighten it.

// Network modes.
const (
	NetworkNone      = "none"
	NetworkAllowlist = "allowlist"
	NetworkOpen      = "open"
)

// Paths of the network endpoints.
const (
	PathNetwork       = "/v1/sandboxes/{sandbox_id}/network"
	PathNetworkEvents = "/v1/sandboxes/{sandbox_id}/network/events"
)

// NetworkPolicy is a network policy on the wire. Entries: "api.example.com", "*.example.com",
// an IP address or CIDR range, each with an optional ":port" (IPv6 in brackets).
type NetworkPolicy struct {
	Mode  string   `json:"mode" doc:"none (loopback only) | allowlist (only allow, minus deny) | open (everything but the operator's blocked ranges)"`
	Allow []string `json:"allow" doc:"allowlist entries; omitted in a request: the profile's list"`
	Deny  []string `json:"deny" doc:"entries that win over allow"`
}

// NetworkEvent is one refused connection or DNS query of a sandbox.
type NetworkEvent struct {
	Time Time   `json:"time"`
	Kind string `json:"kind" doc:"dns | http | tls | tcp | udp"`
	Host string `json:"host" doc:"the name asked for, or the address when there was none"`
	Port int    `json:"port"`
	Rule string `json:"rule" doc:"why it was refused"`
}

// NetworkEventList is the newest refusals of a sandbox, oldest first (a bounded ring).
type NetworkEventList struct {
	Items []NetworkEvent `json:"items"`
	// Denied counts every refusal since the sandbox's compute started, also those the ring
	// no longer holds.
	Denied int64 `json:"denied"`
}
