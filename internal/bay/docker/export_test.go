package docker

// SetSandboxNetwork makes d use name instead of SandboxNetwork, so that a test can exercise
// its creation without touching the network other tests' sandboxes are on.
func SetSandboxNetwork(d *Driver, name string) { d.sandboxNet = name }

// SetResolvFiles makes d read the host's resolvers from files instead of /etc/resolv.conf and
// systemd-resolved's list, so that a test states what the host has.
func SetResolvFiles(d *Driver, files ...string) { d.resolvFiles = files }
