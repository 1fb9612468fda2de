package bay

import (
	"sort"
	"time"
)

// Runtime types.
const (
	RuntimeShip = "ship"
	RuntimeGull = "gull"
)

// DefaultCapabilities of a legacy single-container profile.
var DefaultCapabilities = []string{"filesystem", "shell", "python"}

// Resources are container limits.
type Resources struct {
	CPUs   float64 // 0 = unlimited
	Memory string  // as configured: "1g", "512m", bytes
	// MemoryBytes is Memory parsed (k/m/g suffixes are 1024-based), 0 = unlimited.
	MemoryBytes int64
}

// Proxy is a resolved proxy block.
type Proxy struct {
	Enabled        bool
	HTTPProxy      string
	HTTPSProxy     string
	NoProxy        string
	DefaultNoProxy string
}

// ContainerProfile is one container of a profile's topology.
type ContainerProfile struct {
	Name         string
	Image        string
	RuntimeType  string // ship | gull
	RuntimePort  int
	Resources    Resources
	Capabilities []string
	PrimaryFor   []string
	Env          map[string]string
	Proxy        *Proxy // nil = inherit profile / global
	// ChromiumSandbox: a gull container that keeps Chromium's own sandbox (its seccomp filter
	// then allows user and PID namespaces).
	ChromiumSandbox bool
}

// Profile is a sandbox template from configuration. Profiles written in the legacy
// single-container form are normalised to one container named "primary".
type Profile struct {
	ID          string
	Description *string
	Containers  []ContainerProfile // at least one
	// LegacyCapabilities, when set, is the profile-level capabilities list, which wins over the
	// union of the containers' capabilities (config order preserved).
	LegacyCapabilities []string
	Env                map[string]string // profile-level env, merged under each container's env
	Proxy              *Proxy
	IdleTimeout        time.Duration
	PidsLimit          int64
	TmpBytes           int64 // each of /tmp and /var/tmp; 0 = the driver's default

	WarmPoolSize  int
	WarmRotateTTL time.Duration
	Skills        []string // names of host skills mounted read-only (ours)
	// Network is the ceiling of its sandboxes' network policies (validated; open by default).
	Network NetworkPolicy
	// Runtime is the container runtime of its containers: "" (the platform's default),
	// ContainerRuntimeRunc or ContainerRuntimeRunsc (gVisor).
	Runtime string
}

// Primary returns the primary container: the first named "primary" or "ship", else the first.
func (p *Profile) Primary() *ContainerProfile {
	for i := range p.Containers {
		if n := p.Containers[i].Name; n == "primary" || n == "ship" {
			return &p.Containers[i]
		}
	}
	return &p.Containers[0]
}

// Capabilities returns the profile's capability set: the legacy list if set, else the sorted
// union of the containers' capabilities.
func (p *Profile) Capabilities() []string {
	if len(p.LegacyCapabilities) > 0 {
		return append([]string(nil), p.LegacyCapabilities...)
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range p.Containers {
		for _, cap := range c.Capabilities {
			if !seen[cap] {
				seen[cap] = true
				out = append(out, cap)
			}
		}
	}
	sort.Strings(out)
	return out
}

// HasCapability reports whether the profile offers cap.
func (p *Profile) HasCapability(cap string) bool {
	for _, c := range p.Capabilities() {
		if c == cap {
			return true
		}
	}
	return false
}

// ContainerFor returns the container that serves a capability: the first whose PrimaryFor lists
// it, else the first whose Capabilities list it, else nil.
func (p *Profile) ContainerFor(cap string) *ContainerProfile {
	for i := range p.Containers {
		for _, c := range p.Containers[i].PrimaryFor {
			if c == cap {
				return &p.Containers[i]
			}
		}
	}
	for i := range p.Containers {
		for _, c := range p.Containers[i].Capabilities {
			if c == cap {
				return &p.Containers[i]
			}
		}
	}
	return nil
}

// MultiContainer reports whether the profile has more than one container.
func (p *Profile) MultiContainer() bool { return len(p.Containers) > 1 }
