package docker

// SetSandboxNetwork makes d use name instead of SandboxNetwork, so that a test can exercise
// its creation without touching the network other tests' sandboxes are on.
func SetSandboxNetwork(d *Driver, name string) { d.sandboxNet = name }
