package k8s

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// A cargo volume is a PersistentVolumeClaim named like the volume (ReadWriteOnce: one
// instance at a time uses a cargo), of the configured storage class, sized by the cargo's
// bay.size_limit_mb label or DefaultStorageSize. A claim being deleted counts as gone.

func validName(kind, name string) error {
	if msgs := kube.IsDNS1123Subdomain(name); len(msgs) > 0 || len(name) > 63 {
		return fmt.Errorf("%s name %q: want at most 63 lowercase letters, digits, '-' and '.' (%s)", kind, name, strings.Join(msgs, "; "))
	}
	return nil
}

// storageSize is the claim size of a cargo with these labels.
func (d *Driver) storageSize(spec bay.VolumeSpec) (kube.Quantity, error) {
	switch {
	case spec.SizeBytes < 0:
		return "", fmt.Errorf("negative size %d", spec.SizeBytes)
	case spec.SizeBytes > 0:
		return kube.NewQuantity(spec.SizeBytes), nil
	}
	return kube.ParseQuantity(d.cfg.DefaultStorageSize)
}

// CreateVolume creates the claim; an existing claim of that name is success.
func (d *Driver) CreateVolume(ctx context.Context, spec bay.VolumeSpec) (string, error) {
	name, labels := spec.Name, spec.Labels
	if err := validName("volume", name); err != nil {
		return "", fmt.Errorf("create volume: %w", err)
	}
	size, err := d.storageSize(spec)
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, err)
	}
	kl, err := d.labels.encode(labels)
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, err)
	}
	ann, err := annotate(nil, labels)
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, err)
	}
	pvc := &kube.PersistentVolumeClaim{
		ObjectMeta: kube.ObjectMeta{Name: name, Namespace: d.cfg.Namespace, Labels: kl, Annotations: ann},
		Spec: kube.PersistentVolumeClaimSpec{
			AccessModes: []kube.PersistentVolumeAccessMode{kube.ReadWriteOnce},
			Resources:   kube.VolumeResourceRequirements{Requests: kube.ResourceList{kube.ResourceStorage: size}},
		},
	}
	if d.cfg.StorageClass != "" {
		pvc.Spec.StorageClassName = &d.cfg.StorageClass
	}
	_, err = d.cs.PersistentVolumeClaims(d.cfg.Namespace).Create(ctx, pvc)
	if kube.IsAlreadyExists(err) {
		if _, ierr := d.InspectVolume(ctx, name); ierr == nil {
			return name, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("create volume %s: %w", name, classify(err))
	}
	return name, nil
}

// DeleteVolume deletes the claim and waits until it is gone. A claim that a Pod of the
// namespace still mounts (running or not) wraps bay.ErrConflict.
func (d *Driver) DeleteVolume(ctx context.Context, ref string) error {
	if ref == "" {
		return errors.New("delete volume: empty ref")
	}
	ctx, cancel := withDeadline(ctx)
	defer cancel()
	pods, err := d.cs.Pods(d.cfg.Namespace).List(ctx, kube.ListOptions{})
	if err != nil {
		return fmt.Errorf("delete volume %s: list pods: %w", ref, classify(err))
	}
	for _, p := range pods.Items {
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ClaimName == ref {
				return fmt.Errorf("delete volume %s: in use by pod %s: %w", ref, p.Name, bay.ErrConflict)
			}
		}
	}
	err = d.cs.PersistentVolumeClaims(d.cfg.Namespace).Delete(ctx, ref, nil)
	if kube.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("delete volume %s: %w", ref, classify(err))
	}
	// The claim's protection finalizer is lifted by the controller manager once no Pod uses
	// it; a create of the same name must not find the old claim.
	for delay := 20 * time.Millisecond; ; delay = min(2*delay, 500*time.Millisecond) {
		_, err := d.cs.PersistentVolumeClaims(d.cfg.Namespace).Get(ctx, ref)
		if kube.IsNotFound(err) {
			return nil
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return fmt.Errorf("delete volume %s: waiting for the claim to go: %w", ref, err)
		}
	}
}

// InspectVolume returns the claim (not one being deleted) or an error wrapping ErrNotFound.
func (d *Driver) InspectVolume(ctx context.Context, ref string) (bay.VolumeInfo, error) {
	pvc, err := d.cs.PersistentVolumeClaims(d.cfg.Namespace).Get(ctx, ref)
	if err != nil {
		return bay.VolumeInfo{}, fmt.Errorf("inspect volume %s: %w", ref, classify(err))
	}
	if pvc.DeletionTimestamp != nil {
		return bay.VolumeInfo{}, fmt.Errorf("inspect volume %s: being deleted: %w", ref, bay.ErrNotFound)
	}
	return d.volumeInfo(pvc), nil
}

// ListVolumes lists the claims carrying all the labels.
func (d *Driver) ListVolumes(ctx context.Context, labels map[string]string) ([]bay.VolumeInfo, error) {
	sel, err := d.labels.selector(labels)
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	list, err := d.cs.PersistentVolumeClaims(d.cfg.Namespace).List(ctx, kube.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("list volumes %v: %w", labels, classify(err))
	}
	out := make([]bay.VolumeInfo, 0, len(list.Items))
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp == nil {
			out = append(out, d.volumeInfo(&list.Items[i]))
		}
	}
	return out, nil
}

// volumeInfo describes a claim. Its bound is the claim's size where the storage enforces it
// (StorageEnforcesSize), else none. What a claim holds cannot be read cheaply through the API
// (the kubelet measures mounted volumes, not for bay): UsedBytes is -1.
func (d *Driver) volumeInfo(pvc *kube.PersistentVolumeClaim) bay.VolumeInfo {
	v := bay.VolumeInfo{Name: pvc.Name, Labels: decodeLabels(pvc.Annotations, pvc.Labels), CreatedAt: pvc.CreationTimestamp.UTC(), UsedBytes: -1}
	if d.cfg.StorageEnforcesSize {
		// The capacity of the bound volume, or what the claim asks for while it is pending.
		q, ok := pvc.Status.Capacity[kube.ResourceStorage]
		if !ok {
			q = pvc.Spec.Resources.Requests[kube.ResourceStorage]
		}
		v.SizeBytes = q.Value()
	}
	return v
}

// sleepCtx waits for d or until ctx ends (then it returns ctx's error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
