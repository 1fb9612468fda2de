//go:build k8s

// The Kubernetes driver's tests need the test cluster: make test-k8s starts it and runs them.

package k8s

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// PodFor renders the Pod and NetworkPolicy of spec as CreateInstance would.
func (d *Driver) PodFor(spec bay.InstanceSpec) (*corev1.Pod, *networkingv1.NetworkPolicy, error) {
	meta, err := d.objectMeta(spec.Name, spec.Labels)
	if err != nil {
		return nil, nil, err
	}
	pod, err := d.instancePod(spec, meta)
	if err != nil {
		return nil, nil, err
	}
	np, err := d.networkPolicy(spec, meta, map[string]string{d.labels.key(bay.LabelInstance): hashValue(spec.Name)})
	if err != nil {
		return nil, nil, err
	}
	return pod, np, nil
}
