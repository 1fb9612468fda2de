package config

import "testing"

func TestProfileRuntime(t *testing.T) {
	c := mustLoad(t, `
profiles:
  - id: bare
  - id: plain
    runtime: runc
  - id: gvisor
    runtime: runsc
execs:
  container_runtime: runsc
driver:
  k8s: {runsc_runtime_class: sandboxed}
`)
	for id, want := range map[string]string{"bare": "", "plain": "runc", "gvisor": "runsc"} {
		if p, _ := c.Profile(id); p.Runtime != want {
			t.Errorf("%s: runtime %q, want %q", id, p.Runtime, want)
		}
	}
	if c.Execs.ContainerRuntime != "runsc" || c.Driver.K8s.RunscRuntimeClass != "sandboxed" {
		t.Errorf("execs.container_runtime %q, driver.k8s.runsc_runtime_class %q", c.Execs.ContainerRuntime, c.Driver.K8s.RunscRuntimeClass)
	}
	if d := mustLoad(t, ""); d.Driver.K8s.RunscRuntimeClass != "gvisor" || d.Execs.ContainerRuntime != "" {
		t.Errorf("defaults: runsc_runtime_class %q, execs.container_runtime %q", d.Driver.K8s.RunscRuntimeClass, d.Execs.ContainerRuntime)
	}
	for yaml, want := range map[string]string{
		"profiles: [{id: a, runtime: kata}]\n":    `profiles[0].runtime: must be runc or runsc`,
		"profiles: [{id: a, runtime: RUNSC}]\n":   `profiles[0].runtime: must be runc or runsc`,
		"execs: {container_runtime: gvisor}\n":    `execs.container_runtime: must be runc or runsc`,
		"profiles: [{id: a, runtime: [runsc]}]\n": `profiles[0].runtime: expected a string`,
		"execs: {runtime: runsc}\n":               `execs.runtime: must be auto, linux, windows or wsl`,
	} {
		_, err := load(t, yaml)
		wantErr(t, err, want)
	}
}

// TestNamesDir: driver.docker.names_dir (the name files of sandboxes under runsc) defaults to
// /var/lib/shipyard/names, is taken from the file and the environment, and must be absolute and
// not the root; the error names the key.
func TestNamesDir(t *testing.T) {
	if d := mustLoad(t, ""); d.Driver.Docker.NamesDir != "/var/lib/shipyard/names" {
		t.Errorf("default names_dir %q", d.Driver.Docker.NamesDir)
	}
	if c := mustLoad(t, "driver: {docker: {names_dir: /srv/names}}\n"); c.Driver.Docker.NamesDir != "/srv/names" {
		t.Errorf("names_dir from the file: %q", c.Driver.Docker.NamesDir)
	}
	if c := mustLoad(t, "", "BAY_DRIVER__DOCKER__NAMES_DIR=/run/names"); c.Driver.Docker.NamesDir != "/run/names" {
		t.Errorf("names_dir from the environment: %q", c.Driver.Docker.NamesDir)
	}
	for _, bad := range []string{`names`, `./names`, `""`, `/`, `//`} {
		_, err := load(t, "driver: {docker: {names_dir: "+bad+"}}\n")
		wantErr(t, err, `driver.docker.names_dir: must be an absolute path other than /`)
	}
}

func TestK8sHostMounts(t *testing.T) {
	if d := mustLoad(t, ""); d.Driver.K8s.HostMounts != "configmap" {
		t.Errorf("default driver.k8s.host_mounts %q, want configmap", d.Driver.K8s.HostMounts)
	}
	if c := mustLoad(t, "driver: {type: k8s, k8s: {host_mounts: hostpath}}\n"); c.Driver.K8s.HostMounts != "hostpath" {
		t.Errorf("driver.k8s.host_mounts %q", c.Driver.K8s.HostMounts)
	}
	_, err := load(t, "driver: {type: k8s, k8s: {host_mounts: nfs}}\n")
	wantErr(t, err, `driver.k8s.host_mounts: must be one of configmap, hostpath, got "nfs"`)
}
