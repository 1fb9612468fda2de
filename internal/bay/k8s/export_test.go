//go:build k8s

// The Kubernetes driver's tests need the test cluster: make test-k8s starts it and runs them.

package k8s

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// PodFor renders the Pod and NetworkPolicy of spec as CreateInstance would, read back into
// k8s.io/api's types (so a field the driver names under a wrong key is lost here and noticed
// by the test that checks it).
func (d *Driver) PodFor(spec bay.InstanceSpec) (*corev1.Pod, *networkingv1.NetworkPolicy, error) {
	meta, err := d.objectMeta(spec.Name, spec.Labels)
	if err != nil {
		return nil, nil, err
	}
	files, err := d.packSnapshots(spec)
	if err != nil {
		return nil, nil, err
	}
	pod, err := d.instancePod(spec, meta, files)
	if err != nil {
		return nil, nil, err
	}
	np, err := d.networkPolicy(spec, meta, map[string]string{d.labels.key(bay.LabelInstance): hashValue(spec.Name)}, nil)
	if err != nil {
		return nil, nil, err
	}
	var kpod corev1.Pod
	var knp networkingv1.NetworkPolicy
	if err := convert(pod, &kpod); err != nil {
		return nil, nil, err
	}
	if err := convert(np, &knp); err != nil {
		return nil, nil, err
	}
	return &kpod, &knp, nil
}

// convert copies in into out through their JSON.
func convert(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
