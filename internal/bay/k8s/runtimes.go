package k8s

import (
	"context"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// CheckRuntime implements bay.RuntimeChecker: runc and the default need no RuntimeClass; runsc
// needs RunscRuntimeClass to exist (the API server's RuntimeClass admission refuses a Pod
// naming a missing one). A bay whose role may not read RuntimeClasses (cluster-scoped) gets an
// error, which lets the create through: the Pod's creation then says.
func (d *Driver) CheckRuntime(ctx context.Context, rt string) error {
	if rt != bay.ContainerRuntimeRunsc {
		return nil
	}
	class := d.cfg.RunscRuntimeClass
	_, err := d.cs.RuntimeClasses().Get(ctx, class)
	if err == nil {
		return nil
	}
	if !kube.IsNotFound(err) {
		return fmt.Errorf("check runtime %s: RuntimeClass %s: %w", rt, class, classify(err))
	}
	var available []string
	if list, lerr := d.cs.RuntimeClasses().List(ctx, kube.ListOptions{}); lerr == nil {
		for _, c := range list.Items {
			available = append(available, c.Name)
		}
	}
	return bay.RuntimeMissing(rt, available, fmt.Sprintf(
		"create the RuntimeClass %s whose handler is the nodes' runsc runtime (docs/gvisor.md), or set driver.k8s.runsc_runtime_class", class))
}
