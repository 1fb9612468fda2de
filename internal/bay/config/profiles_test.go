package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

func TestLegacyProfileNormalisation(t *testing.T) {
	c := mustLoad(t, `
profiles:
  - id: bare
  - id: full
    description: d
    image: img:1
    runtime_type: gull
    runtime_port: 8115
    resources: {cpus: 0.25, memory: 64m}
    capabilities: [shell, filesystem]
    env: {A: "1"}
    idle_timeout: 60
    warm_pool_size: 2
    warm_rotate_ttl: 120
`)
	bare, _ := c.Profile("bare")
	want := bay.ContainerProfile{
		Name: "primary", Image: "ship:latest", RuntimeType: "ship", RuntimePort: 8123,
		Resources:    bay.Resources{CPUs: 1, Memory: "1g", MemoryBytes: 1 << 30},
		Capabilities: []string{"filesystem", "shell", "python"},
		PrimaryFor:   []string{"filesystem", "shell", "python"},
		Env:          map[string]string{},
		Proxy:        &bay.Proxy{DefaultNoProxy: DefaultNoProxy},
	}
	if len(bare.Containers) != 1 || !reflect.DeepEqual(bare.Containers[0], want) {
		t.Errorf("bare container\n got %+v\nwant %+v", bare.Containers[0], want)
	}
	// No profile-level list: the sorted union of the containers' capabilities.
	if got := bare.Capabilities(); !reflect.DeepEqual(got, []string{"filesystem", "python", "shell"}) {
		t.Errorf("bare capabilities %v", got)
	}
	if bare.IdleTimeout != 1800*time.Second || bare.WarmRotateTTL != 1800*time.Second || bare.WarmPoolSize != 0 || bare.MultiContainer() {
		t.Errorf("bare %+v", bare)
	}

	full, _ := c.Profile("full")
	fc := full.Primary()
	if fc.Image != "img:1" || fc.RuntimeType != "gull" || fc.RuntimePort != 8115 || fc.Resources.MemoryBytes != 64<<20 ||
		fc.Resources.CPUs != 0.25 || fc.Env["A"] != "1" || full.Env["A"] != "1" {
		t.Errorf("full container %+v", fc)
	}
	if got := full.Capabilities(); !reflect.DeepEqual(got, []string{"shell", "filesystem"}) {
		t.Errorf("full capabilities (config order) %v", got)
	}
	if full.HasCapability("python") || !full.HasCapability("shell") {
		t.Error("HasCapability")
	}
	if *full.Description != "d" || full.IdleTimeout != time.Minute || full.WarmPoolSize != 2 || full.WarmRotateTTL != 2*time.Minute {
		t.Errorf("full %+v", full)
	}
}

func TestContainersProfileNormalisation(t *testing.T) {
	c := mustLoad(t, `
proxy: {enabled: true, http_proxy: "http://global:1", no_proxy: "corp.local"}
profiles:
  - id: multi
    image: ignored:legacy
    runtime_port: 1
    containers:
      - name: browser
        image: gull:latest
        runtime_type: gull
        runtime_port: 8115
        capabilities: [browser]
        proxy: {enabled: true, https_proxy: "http://container:3"}
      - name: ship
        image: ship:latest
        capabilities: [python, shell, filesystem]
        primary_for: [shell]
        env: {X: c}
    env: {X: p, Y: p}
    startup: {order: parallel, wait_for_all: true}
  - id: first-is-primary
    proxy: {enabled: false}
    containers:
      - {name: a, image: a, capabilities: [python]}
      - {name: b, image: b, runtime_port: 8124, capabilities: [python, shell], primary_for: [python]}
  - id: caps-override
    capabilities: [python]
    containers:
      - {name: a, image: a, capabilities: [python, shell]}
`)
	m, _ := c.Profile("multi")
	if !m.MultiContainer() || len(m.Containers) != 2 {
		t.Fatalf("multi %+v", m)
	}
	if m.Primary().Name != "ship" {
		t.Errorf("primary %q, want the one named ship", m.Primary().Name)
	}
	b := m.Containers[0]
	if b.RuntimeType != "gull" || b.RuntimePort != 8115 || b.Resources.MemoryBytes != 1<<30 || b.Resources.CPUs != 1 {
		t.Errorf("browser container %+v", b)
	}
	s := m.Containers[1]
	if s.RuntimeType != "ship" || s.RuntimePort != 8123 {
		t.Errorf("ship container defaults %+v", s)
	}
	if got := m.Capabilities(); !reflect.DeepEqual(got, []string{"browser", "filesystem", "python", "shell"}) {
		t.Errorf("union %v", got)
	}
	if m.ContainerFor("browser").Name != "browser" || m.ContainerFor("shell").Name != "ship" || m.ContainerFor("gpu") != nil {
		t.Error("ContainerFor")
	}

	// Proxy: container block replaces the global one entirely; otherwise the global applies.
	if got := ContainerEnv(m, &m.Containers[0]); !reflect.DeepEqual(got, map[string]string{
		"X": "p", "Y": "p",
		"HTTPS_PROXY": "http://container:3", "https_proxy": "http://container:3",
		"NO_PROXY": DefaultNoProxy, "no_proxy": DefaultNoProxy,
	}) {
		t.Errorf("browser env %v", got)
	}
	noProxy := DefaultNoProxy + ",corp.local"
	if got := ContainerEnv(m, &m.Containers[1]); !reflect.DeepEqual(got, map[string]string{
		"X": "c", "Y": "p",
		"HTTP_PROXY": "http://global:1", "http_proxy": "http://global:1",
		"NO_PROXY": noProxy, "no_proxy": noProxy,
	}) {
		t.Errorf("ship env %v", got)
	}

	f, _ := c.Profile("first-is-primary")
	if f.Primary().Name != "a" || f.ContainerFor("python").Name != "b" || f.ContainerFor("shell").Name != "b" {
		t.Errorf("first-is-primary routing")
	}
	for i := range f.Containers {
		if env := ContainerEnv(f, &f.Containers[i]); len(env) != 0 {
			t.Errorf("profile proxy disabled, env %v", env)
		}
	}

	o, _ := c.Profile("caps-override")
	if got := o.Capabilities(); !reflect.DeepEqual(got, []string{"python"}) || o.HasCapability("shell") {
		t.Errorf("profile-level capabilities win: %v", got)
	}
}

func TestProxyEnv(t *testing.T) {
	if ProxyEnv(nil) != nil || ProxyEnv(&bay.Proxy{HTTPProxy: "x"}) != nil {
		t.Error("disabled proxy injects nothing")
	}
	got := ProxyEnv(&bay.Proxy{Enabled: true, HTTPProxy: "h", HTTPSProxy: "s", NoProxy: "n"})
	want := map[string]string{"HTTP_PROXY": "h", "http_proxy": "h", "HTTPS_PROXY": "s", "https_proxy": "s", "NO_PROXY": "n", "no_proxy": "n"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v", got)
	}
}

func TestDefaultConfigIsValidAndIndependent(t *testing.T) {
	a, b := DefaultConfig(), DefaultConfig()
	a.ProfileSpecs[0].Capabilities[0] = "changed"
	a.Security.BlockedHosts[0] = "changed"
	if b.ProfileSpecs[0].Capabilities[0] == "changed" || b.Security.BlockedHosts[0] == "changed" {
		t.Error("DefaultConfig shares slices between calls")
	}
	a.Profiles[0].Containers[0].Capabilities[0] = "changed"
	if bay.DefaultCapabilities[0] == "changed" {
		t.Error("normalised profile aliases bay.DefaultCapabilities")
	}
}

func TestValidateRebuildsProfiles(t *testing.T) {
	c := DefaultConfig()
	c.ProfileSpecs = c.ProfileSpecs[:1]
	c.ProfileSpecs[0].WarmPoolSize = 4
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(c.Profiles) != 1 || c.Profiles[0].WarmPoolSize != 4 {
		t.Errorf("profiles not rebuilt: %+v", c.Profiles)
	}
}
