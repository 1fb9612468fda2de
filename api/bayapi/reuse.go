package bayapi

// HeaderReused is "true" on the 200 answer of a create that returned the sandbox of a reuse
// key instead of creating one (201).
const HeaderReused = "Shipyard-Reused"

// ReuseSpec asks POST /v1/sandboxes for the owner's sandbox of a key (seed 002's
// reuse_mode = project_agent, e.g. "<project>:<agent>"), created when there is none. One
// sandbox results from any number of concurrent calls, on one bay or several.
type ReuseSpec struct {
	Key     string `json:"key" maxLength:"128" doc:"1-128 of A-Z a-z 0-9 _ - : ."`
	IdleTTL *Int   `json:"idle_ttl,omitempty" minimum:"1" doc:"seconds; a sandbox idle longer is deleted and replaced"`
	HardTTL *Int   `json:"hard_ttl,omitempty" minimum:"1" doc:"seconds; a sandbox older is deleted and replaced; a new one gets it as its ttl unless ttl is given"`
}
