package config

import (
	"fmt"
	"maps"
	"regexp"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of bay's life.
var (
	profileIDRe  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) // and at most 64 bytes
	nameRe       = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`) // and at most 64 bytes
	capabilityRe = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)            // and at most 64 bytes
)

// maxTmpSizeMB bounds a profile's tmp_size_mb (64 GiB); the real bound is the memory limit
// the tmpfs is counted in.
const maxTmpSizeMB = 64 << 10

// normalizeProfiles validates the specs and builds the bay.Profiles:
//   - containers: form: the containers as written (legacy topology fields ignored); a
//     profile-level capabilities list still wins for the capability set;
//   - legacy form: one container "primary" from image (default ship:latest), runtime_type
//     (ship), runtime_port (8123), resources (1 CPU, 1g), capabilities (filesystem, shell,
//     python; also its primary_for) and env;
//   - each container's Proxy is resolved: container block, else profile block, else global.
func normalizeProfiles(specs []ProfileSpec, global ProxyConfig, skillsRoot string, add func(key, format string, args ...any)) []bay.Profile {
	if len(specs) == 0 {
		add("profiles", "at least one profile is required")
		return nil
	}
	out := make([]bay.Profile, 0, len(specs))
	ids := map[string]bool{}
	for i := range specs {
		s := &specs[i]
		key := fmt.Sprintf("profiles[%d]", i)
		switch {
		case s.ID == "":
			add(key+".id", "is required")
		case len(s.ID) > 64 || !profileIDRe.MatchString(s.ID):
			add(key+".id", "%q must be 1-64 letters, digits, '_', '.', '-'", s.ID)
		case ids[s.ID]:
			add(key+".id", "duplicate profile id %q", s.ID)
		}
		ids[s.ID] = true

		p := bay.Profile{
			ID:            s.ID,
			Description:   s.Description,
			Env:           copyEnv(s.Env),
			IdleTimeout:   s.IdleTimeout,
			PidsLimit:     s.PidsLimit,
			TmpBytes:      s.TmpSizeMB << 20,
			WarmPoolSize:  s.WarmPoolSize,
			WarmRotateTTL: s.WarmRotateTTL,
			Skills:        append([]string(nil), s.Skills...),
			Runtime:       s.Runtime,
		}
		if !bay.ValidContainerRuntime(s.Runtime) {
			add(key+".runtime", "must be runc or runsc (gVisor, docs/gvisor.md), or unset for the platform's default; got %q", s.Runtime)
		}
		profileProxy := global
		if s.Proxy != nil {
			profileProxy = *s.Proxy
			checkProxy(key+".proxy", s.Proxy, add)
		}
		p.Proxy = toBayProxy(profileProxy)
		if len(s.Capabilities) > 0 {
			p.LegacyCapabilities = append([]string(nil), s.Capabilities...)
			checkCaps(key+".capabilities", s.Capabilities, add)
		}

		if len(s.Containers) > 0 {
			names := map[string]bool{}
			ports := map[int]string{}
			for j := range s.Containers {
				c := &s.Containers[j]
				ck := fmt.Sprintf("%s.containers[%d]", key, j)
				switch {
				case c.Name == "":
					add(ck+".name", "is required")
				case len(c.Name) > 64 || !nameRe.MatchString(c.Name):
					add(ck+".name", "%q must be 1-64 letters, digits, '_', '.', '-'", c.Name)
				case names[c.Name]:
					add(ck+".name", "duplicate container name %q in profile %q", c.Name, s.ID)
				}
				names[c.Name] = true
				if other, ok := ports[c.RuntimePort]; ok {
					// The containers of a sandbox share one network namespace (a Pod; the
					// Docker driver under runc), so one port space.
					add(ck+".runtime_port", "%d is also container %q's; the containers of a profile share one network and need ports of their own", c.RuntimePort, other)
				}
				ports[c.RuntimePort] = c.Name
				if c.Image == "" {
					add(ck+".image", "is required")
				}
				proxy := profileProxy
				if c.Proxy != nil {
					proxy = *c.Proxy
					checkProxy(ck+".proxy", c.Proxy, add)
				}
				checkCaps(ck+".capabilities", c.Capabilities, add)
				checkCaps(ck+".primary_for", c.PrimaryFor, add)
				p.Containers = append(p.Containers, bay.ContainerProfile{
					Name:            c.Name,
					Image:           c.Image,
					RuntimeType:     c.RuntimeType,
					RuntimePort:     c.RuntimePort,
					Resources:       resources(ck+".resources", c.Resources, add),
					Capabilities:    append([]string{}, c.Capabilities...),
					PrimaryFor:      append([]string{}, c.PrimaryFor...),
					Env:             copyEnv(c.Env),
					Proxy:           toBayProxy(proxy),
					ChromiumSandbox: c.ChromiumSandbox,
				})
				checkRuntime(ck, c.RuntimeType, c.RuntimePort, add)
				if c.ChromiumSandbox && c.RuntimeType != bay.RuntimeGull {
					add(ck+".chromium_sandbox", "applies to gull containers only (runtime_type %q)", c.RuntimeType)
				}
			}
		} else {
			image := s.Image
			if image == "" {
				image = "ship:latest"
			}
			rt := s.RuntimeType
			if rt == "" {
				rt = bay.RuntimeShip
			}
			port := s.RuntimePort
			if port == 0 {
				port = DefaultRuntimePort
			}
			res := defaultResources()
			if s.Resources != nil {
				res = *s.Resources
			}
			caps := s.Capabilities
			if len(caps) == 0 {
				caps = bay.DefaultCapabilities
			}
			checkRuntime(key, rt, port, add)
			p.Containers = []bay.ContainerProfile{{
				Name:         "primary",
				Image:        image,
				RuntimeType:  rt,
				RuntimePort:  port,
				Resources:    resources(key+".resources", res, add),
				Capabilities: append([]string(nil), caps...),
				PrimaryFor:   append([]string(nil), caps...),
				Env:          copyEnv(s.Env),
				Proxy:        p.Proxy,
			}}
		}

		if s.IdleTimeout <= 0 {
			add(key+".idle_timeout", "must be > 0 seconds, got %v", s.IdleTimeout)
		}
		if s.WarmPoolSize < 0 {
			add(key+".warm_pool_size", "must be >= 0, got %d", s.WarmPoolSize)
		}
		if s.WarmRotateTTL <= 0 {
			add(key+".warm_rotate_ttl", "must be > 0 seconds, got %v", s.WarmRotateTTL)
		}
		p.Network = bay.NetworkPolicy{Mode: bay.NetworkOpen}
		if n := s.Network; n != nil {
			parsed, err := bay.ParseNetworkPolicy(key+".network", bay.NetworkPolicy{Mode: bay.NetworkMode(n.Mode), Allow: n.Allow, Deny: n.Deny})
			if err != nil {
				add(key+".network", "%s", err.(*bay.Error).Message)
			}
			p.Network = parsed.Policy()
		}
		if s.PidsLimit < 0 {
			add(key+".pids_limit", "must be >= 0 (0 = driver default), got %d", s.PidsLimit)
		}
		if s.TmpSizeMB < 0 || s.TmpSizeMB > maxTmpSizeMB {
			add(key+".tmp_size_mb", "must be 0 (driver default) to %d, got %d", maxTmpSizeMB, s.TmpSizeMB)
		}
		for _, f := range []struct {
			name string
			v    int
		}{
			{"warm_claim_timeout_ms", s.WarmClaimTimeoutMS},
			{"warmup_retry_max_attempts", s.WarmupRetryMaxAttempts},
			{"warmup_retry_backoff_base_ms", s.WarmupRetryBackoffBaseMS},
			{"warmup_retry_backoff_max_ms", s.WarmupRetryBackoffMaxMS},
			{"warmup_circuit_breaker_threshold", s.WarmupCircuitBreakerThreshold},
		} {
			if f.v < 0 {
				add(key+"."+f.name, "must be >= 0, got %d", f.v)
			}
		}
		if s.Browser != nil && *s.Browser != "shared" && *s.Browser != "isolated" {
			add(key+".browser", "must be shared, isolated or null, got %q", *s.Browser)
		}
		seenSkill := map[string]bool{}
		for j, sk := range s.Skills {
			if !profileSkillName(sk, skillsRoot) {
				add(fmt.Sprintf("%s.skills[%d]", key, j), "%q is not a valid skill name", sk)
			} else if seenSkill[sk] {
				add(fmt.Sprintf("%s.skills[%d]", key, j), "duplicate skill %q", sk)
			}
			seenSkill[sk] = true
		}
		out = append(out, p)
	}
	return out
}

func checkRuntime(key, rt string, port int, add func(key, format string, args ...any)) {
	if rt != bay.RuntimeShip && rt != bay.RuntimeGull {
		add(key+".runtime_type", "must be ship or gull, got %q", rt)
	}
	if port < 1 || port > 65535 {
		add(key+".runtime_port", "must be 1..65535, got %d", port)
	}
}

func checkCaps(key string, caps []string, add func(key, format string, args ...any)) {
	seen := map[string]bool{}
	for i, c := range caps {
		if len(c) > 64 || !capabilityRe.MatchString(c) {
			add(fmt.Sprintf("%s[%d]", key, i), "%q is not a capability name (e.g. python, shell, filesystem, browser)", c)
		} else if seen[c] {
			add(fmt.Sprintf("%s[%d]", key, i), "duplicate capability %q", c)
		}
		seen[c] = true
	}
}

func resources(key string, r ResourcesSpec, add func(key, format string, args ...any)) bay.Resources {
	out := bay.Resources{CPUs: r.CPUs, Memory: r.Memory}
	if r.CPUs < 0 {
		add(key+".cpus", "must be >= 0 (0 = unlimited), got %v", r.CPUs)
	}
	if r.Memory != "" {
		b, err := ParseBytes(r.Memory)
		if err != nil {
			add(key+".memory", "%v", err)
		}
		out.MemoryBytes = b
	}
	return out
}

func copyEnv(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	maps.Copy(out, m)
	return out
}

func toBayProxy(p ProxyConfig) *bay.Proxy {
	return &bay.Proxy{
		Enabled:        p.Enabled,
		HTTPProxy:      p.HTTPProxy,
		HTTPSProxy:     p.HTTPSProxy,
		NoProxy:        p.NoProxy,
		DefaultNoProxy: p.DefaultNoProxy,
	}
}

// ProxyEnv returns the variables a resolved proxy block injects into a container (nil when
// p is nil or disabled): HTTP_PROXY/http_proxy and HTTPS_PROXY/https_proxy when set, and
// NO_PROXY/no_proxy = default_no_proxy[,no_proxy].
func ProxyEnv(p *bay.Proxy) map[string]string {
	if p == nil || !p.Enabled {
		return nil
	}
	env := map[string]string{}
	if p.HTTPProxy != "" {
		env["HTTP_PROXY"], env["http_proxy"] = p.HTTPProxy, p.HTTPProxy
	}
	if p.HTTPSProxy != "" {
		env["HTTPS_PROXY"], env["https_proxy"] = p.HTTPSProxy, p.HTTPSProxy
	}
	no := p.DefaultNoProxy
	if p.NoProxy != "" {
		if no != "" {
			no += ","
		}
		no += p.NoProxy
	}
	if no != "" {
		env["NO_PROXY"], env["no_proxy"] = no, no
	}
	return env
}

// ContainerEnv is the configured environment of one container of a normalised profile: the
// profile-level env, overridden by the container's env, overridden by the resolved proxy
// variables (ProxyEnv). bay's own variables (BAY_SESSION_ID, ...) are added by the caller.
// (The reference ignores profile-level env in the containers: form; we apply it to every
// container.)
func ContainerEnv(p *bay.Profile, c *bay.ContainerProfile) map[string]string {
	env := copyEnv(p.Env)
	maps.Copy(env, c.Env)
	proxy := c.Proxy
	if proxy == nil {
		proxy = p.Proxy
	}
	maps.Copy(env, ProxyEnv(proxy))
	return env
}
