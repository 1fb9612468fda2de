package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/netguard"
)

// Names under gVisor. On a user-defined network the engine points a container's
// /etc/resolv.conf at its embedded DNS server, 127.0.0.11, which it reaches through NAT rules
// in the container's network namespace. gVisor's network stack keeps 127.0.0.11 on its own
// loopback and never sees those rules, so under runsc nothing resolves: neither the other
// containers of the instance ("ship", "gull") nor, in allowlist mode, anything through bay's
// resolver. For an instance under runsc the driver therefore writes the two files itself,
// one pair per instance under Config.NamesDir/<instance>, and binds them read-only over
// /etc/resolv.conf and /etc/hosts of each of its containers (the engine then leaves its own
// out):
//
//   - resolv.conf names bay's resolver on the policy network's gateway in modes allowlist
//     and none (none's refuses every name at once), and the host's own non-loopback resolvers
//     in mode open (the host firewall lets sandboxes reach them on port 53 only);
//   - hosts maps localhost, and every container of the instance by its hostname and its
//     engine name (the names the engine's server answers under runc) to its address on the
//     instance's network.
//
// Containers under runc keep the engine's files and server exactly as before.

// DefaultNamesDir is Config.NamesDir's default.
const DefaultNamesDir = "/var/lib/shipyard/names"

// namesSweepAge is the least age of the files of an instance of which nothing exists before
// they count as left over: they are written before the instance's first container exists,
// and the creates in between may copy an image's hot paths into volumes first (imagecache.go),
// which can take minutes on a loaded host.
const namesSweepAge = 10 * time.Minute

const (
	resolvConfFile = "resolv.conf"
	hostsFile      = "hosts"
)

// localhostLines open every hosts file the driver writes, as the engine's own do.
const localhostLines = "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"

// instanceFileRE is what an instance name may be to name a directory: the engine's pattern of
// container names (an instance's containers are named after it), so never "." or "..".
var instanceFileRE = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// usesNames reports whether the instance's containers get the driver's name files: those
// under runsc that have a network (a one-shot with loopback only resolves nothing).
func usesNames(spec bay.InstanceSpec, noNetwork bool) bool {
	return spec.Runtime == bay.ContainerRuntimeRunsc && !noNetwork
}

// namesDirOf is the directory of an instance's name files ("" for a name that cannot be one).
func (d *Driver) namesDirOf(instance string) string {
	if !instanceFileRE.MatchString(instance) {
		return ""
	}
	return filepath.Join(d.cfg.NamesDir, instance)
}

// writeNames makes the instance's directory under NamesDir (and NamesDir itself, 0755, when
// missing) with its complete resolv.conf and a hosts file holding the localhost lines; the
// instance's own lines are appended by completeHosts once the engine has given the containers
// their addresses. A directory of that name while the engine has containers of the instance
// is a name in use (bay.ErrConflict); one without them is a leftover and is replaced.
func (d *Driver) writeNames(ctx context.Context, instance string, pn policyNet) (string, error) {
	dir := d.namesDirOf(instance)
	if dir == "" {
		return "", fmt.Errorf("name files: instance name %q cannot name a directory", instance)
	}
	if _, err := os.Stat(d.cfg.NamesDir); errors.Is(err, fs.ErrNotExist) {
		if err := mkdir0755(d.cfg.NamesDir, os.MkdirAll); err != nil {
			return "", fmt.Errorf("name files: driver.docker.names_dir: %w", err)
		}
	}
	err := mkdir0755(dir, os.Mkdir)
	if errors.Is(err, fs.ErrExist) {
		o, lerr := d.instanceObjects(ctx, instance)
		switch {
		case lerr != nil:
			return "", fmt.Errorf("name files: %w", lerr)
		case len(o.containers) > 0:
			return "", fmt.Errorf("name files of %s: %w", instance, bay.Classified(bay.ErrConflict, errors.New("the instance exists")))
		}
		d.log.InfoContext(ctx, "replacing left-over name files", "instance", instance, "dir", dir)
		if err = os.RemoveAll(dir); err == nil {
			err = mkdir0755(dir, os.Mkdir)
		}
	}
	if err != nil {
		return "", fmt.Errorf("name files: %w", err)
	}
	for name, data := range map[string]string{resolvConfFile: d.resolvConf(ctx, pn), hostsFile: localhostLines} {
		if err := writeReadable(filepath.Join(dir, name), data); err != nil {
			return dir, fmt.Errorf("name files: %w", err)
		}
	}
	return dir, nil
}

// mkdir0755 makes a directory with mkdir and sets its mode to 0755 whatever bay's umask (the
// systemd unit's is 0027).
func mkdir0755(dir string, mkdir func(string, fs.FileMode) error) error {
	if err := mkdir(dir, 0o755); err != nil {
		return err
	}
	return os.Chmod(dir, 0o755)
}

// writeReadable writes a file of mode 0644 whatever bay's umask: gVisor checks the host file's
// mode for the sandbox's user, who must read /etc/hosts and /etc/resolv.conf.
func writeReadable(name, data string) error {
	if err := os.WriteFile(name, []byte(data), 0o644); err != nil {
		return err
	}
	return os.Chmod(name, 0o644)
}

// resolvConf is the resolv.conf of an instance of policy pn: bay's resolver on the policy
// network (pn.dns) when the policy is closed, else the host's resolvers.
func (d *Driver) resolvConf(ctx context.Context, pn policyNet) string {
	var b strings.Builder
	b.WriteString("# written by bay for a container under gVisor (driver.docker.names_dir)\n")
	servers := pn.dns
	if pn.name == "" {
		var search []string
		servers, search = d.hostResolvers()
		if len(servers) == 0 {
			d.noResolverOnce.Do(func() {
				d.log.WarnContext(ctx, "the host has only loopback resolvers, which sandboxes under gVisor cannot reach: their names do not resolve in network mode open",
					"files", d.resolvFiles)
			})
		}
		for _, s := range search {
			b.WriteString(s + "\n")
		}
	}
	for _, s := range servers {
		fmt.Fprintf(&b, "nameserver %s\n", s)
	}
	return b.String()
}

// hostResolvers reads the host's resolvers as the engine does: the non-loopback nameservers
// of the first of resolvFiles that has any (/etc/resolv.conf, then systemd-resolved's list of
// its upstreams when the former names only its stub on 127.0.0.53), with that file's search
// and options lines.
func (d *Driver) hostResolvers() ([]netip.Addr, []string) {
	for _, f := range d.resolvFiles {
		servers := netguard.Resolvers(f)
		if len(servers) == 0 {
			continue
		}
		var keep []string
		if data, err := os.ReadFile(f); err == nil {
			for line := range strings.Lines(string(data)) {
				if k, _, _ := strings.Cut(strings.TrimSpace(line), " "); k == "search" || k == "domain" || k == "options" {
					keep = append(keep, strings.TrimSpace(line))
				}
			}
		}
		return servers, keep
	}
	return nil, nil
}

// completeHosts appends to the instance's hosts file a line per container: its address on the
// instance's network (a multi-container instance's own, else its primary one) with its
// hostname and engine name.
//
// It runs once every container has started, because the engine gives a container its
// addresses only then (Docker 20.10: an inspect after create or connect shows none); fixed
// addresses would need networks with subnets bay chose. Nothing in the instance resolves its
// peers before CreateInstance returns: the runtimes act only when bay asks them to, and gull
// starts Chromium on its first command. The lines are appended in one write, so a reader
// sees the localhost lines or all of them, never a truncated file (the file is bound into the
// containers by its inode: it is never replaced).
func (d *Driver) completeHosts(ctx context.Context, dir string, spec bay.InstanceSpec, inst bay.Instance) error {
	multi := len(spec.Containers) > 1
	var b strings.Builder
	for i, c := range inst.Containers {
		res, err := d.cli.ContainerInspect(ctx, c.ID, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("hosts file: container %s: %w", c.Name, classify(err))
		}
		var ip string
		if ns := res.Container.NetworkSettings; ns != nil {
			if multi {
				if ep := ns.Networks[instanceNetwork(spec.Name)]; ep != nil && ep.IPAddress.IsValid() {
					ip = ep.IPAddress.String()
				}
			} else if res.Container.HostConfig != nil {
				ip = d.pickIP(ns.Networks, string(res.Container.HostConfig.NetworkMode))
			}
		}
		if ip == "" {
			return fmt.Errorf("hosts file: container %s has no address on the instance's network", c.Name)
		}
		host := singleHostname
		if multi {
			host = spec.Containers[i].Name
		}
		fmt.Fprintf(&b, "%s\t%s %s\n", ip, host, containerName(spec.Name, multi, spec.Containers[i].Name))
	}
	f, err := os.OpenFile(filepath.Join(dir, hostsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("hosts file: %w", err)
	}
	_, err = f.WriteString(b.String())
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("hosts file: %w", err)
	}
	return nil
}

// removeNames removes an instance's name files; missing ones are success.
func (d *Driver) removeNames(instance string) error {
	dir := d.namesDirOf(instance)
	if dir == "" {
		return nil
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove name files of %s: %w", instance, err)
	}
	return nil
}

var _ bay.InstanceFileSweeper = (*Driver)(nil)

// StaleInstanceFiles lists the instances with name files written before olderThan (and at
// least namesSweepAge ago) of which the engine has no container, whoever made them: the
// engine is the one truth all bays sharing NamesDir see. A missing NamesDir lists nothing.
func (d *Driver) StaleInstanceFiles(ctx context.Context, olderThan time.Time) ([]string, error) {
	entries, err := os.ReadDir(d.cfg.NamesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list name files: %w", err)
	}
	cutoff := time.Now().Add(-namesSweepAge)
	if olderThan.Before(cutoff) {
		cutoff = olderThan
	}
	var old []string
	for _, e := range entries {
		if !e.IsDir() || !instanceFileRE.MatchString(e.Name()) {
			continue
		}
		if info, err := e.Info(); err == nil && info.ModTime().Before(cutoff) {
			old = append(old, e.Name())
		}
	}
	if len(old) == 0 {
		return nil, nil
	}
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	if err != nil {
		return nil, fmt.Errorf("list name files: list containers: %w", classify(err))
	}
	live := map[string]bool{}
	for _, c := range res.Items {
		live[c.Labels[bay.LabelInstance]] = true
		for _, n := range c.Names {
			live[strings.TrimPrefix(n, "/")] = true
		}
	}
	return slices.DeleteFunc(old, func(n string) bool { return live[n] }), nil
}

// RemoveInstanceFiles removes the name files of an instance (see StaleInstanceFiles).
func (d *Driver) RemoveInstanceFiles(_ context.Context, instance string) error {
	return d.removeNames(instance)
}
