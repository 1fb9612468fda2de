// localpv is the test node's volume provisioner (scripts/k8s/up.sh starts it): a
// single-node cluster built here has no storage driver, and kube-controller-manager's own
// hostPath provisioner makes root-owned 0750 directories that a sandbox running as uid 1000
// cannot write. For every pending claim of its storage class it makes a directory under -root
// owned by -uid:-gid (as a fresh Docker volume takes the ownership of the image's
// /workspace), and a hostPath PersistentVolume bound to that claim; when the claim is deleted
// (the volume is Released) it removes the directory and the volume. A claim's size is enforced
// as the Docker driver bounds a cargo: the directory is the mount point of an ext4 file of that
// size (loop-mounted here, on the host, whence it propagates into the node's mount namespace),
// so a sandbox writing beyond it gets "No space left on device" and the host's disk is
// untouched. A real cluster has a CSI driver behind the storage class bay is configured with
// instead.

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const prefix = "localpv-"

func localpv(args []string) error {
	fs := flag.NewFlagSet("localpv", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig of the cluster")
	class := fs.String("class", "shipyard-local", "storage class served")
	root := fs.String("root", "", "directory holding the volumes")
	uid := fs.Int("uid", 1000, "owner of a new volume's directory")
	gid := fs.Int("gid", 1000, "group of a new volume's directory")
	_ = fs.Parse(args)
	if *root == "" || !filepath.IsAbs(*root) {
		return errors.New("-root must be an absolute directory")
	}
	cs, err := client(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	p := &provisioner{cs: cs, class: *class, root: *root, uid: *uid, gid: *gid, log: log}
	for ctx.Err() == nil {
		if err := p.sync(ctx); err != nil && ctx.Err() == nil {
			log.Warn("sync", "err", err)
		}
		p.waitForChange(ctx, 5*time.Second)
	}
	return nil
}

type provisioner struct {
	cs       kubernetes.Interface
	class    string
	root     string
	uid, gid int
	log      *slog.Logger
}

// waitForChange returns after the first change of a claim or a volume, or after max.
func (p *provisioner) waitForChange(ctx context.Context, max time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, max)
	defer cancel()
	wc, err := p.cs.CoreV1().PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		<-ctx.Done()
		return
	}
	defer wc.Stop()
	wv, err := p.cs.CoreV1().PersistentVolumes().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		<-ctx.Done()
		return
	}
	defer wv.Stop()
	// The first events replay nothing (no resource version given means "from now").
	select {
	case <-ctx.Done():
	case <-wc.ResultChan():
	case <-wv.ResultChan():
	}
}

func (p *provisioner) sync(ctx context.Context) error {
	claims, err := p.cs.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list claims: %w", err)
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != p.class || c.Spec.VolumeName != "" ||
			c.DeletionTimestamp != nil || c.Status.Phase != corev1.ClaimPending {
			continue
		}
		if err := p.provision(ctx, c); err != nil {
			p.log.Warn("provision", "claim", c.Namespace+"/"+c.Name, "err", err)
		}
	}
	vols, err := p.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list volumes: %w", err)
	}
	for i := range vols.Items {
		v := &vols.Items[i]
		if !strings.HasPrefix(v.Name, prefix) || (v.Status.Phase != corev1.VolumeReleased && v.Status.Phase != corev1.VolumeFailed) {
			continue
		}
		if err := p.release(ctx, v); err != nil {
			p.log.Warn("release", "volume", v.Name, "err", err)
		}
	}
	return nil
}

func (p *provisioner) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := prefix + string(c.UID)
	dir := filepath.Join(p.root, name)
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	if err := p.makeBounded(ctx, dir, size.Value()); err != nil {
		return err
	}
	hostType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"shipyard.local/localpv": "true"}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              p.class,
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostType},
			},
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID,
			},
		},
	}
	_, err := p.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		p.log.Info("provisioned", "claim", c.Namespace+"/"+c.Name, "volume", name)
	}
	return err
}

func (p *provisioner) release(ctx context.Context, v *corev1.PersistentVolume) error {
	if v.Spec.HostPath != nil && filepath.Dir(v.Spec.HostPath.Path) == filepath.Clean(p.root) {
		dir := v.Spec.HostPath.Path
		if mounted(dir) {
			if out, err := exec.CommandContext(ctx, "umount", dir).CombinedOutput(); err != nil {
				return fmt.Errorf("umount %s: %w: %s", dir, err, strings.TrimSpace(string(out)))
			}
		}
		if err := os.Remove(dir + ".img"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := os.RemoveAll(dir); err != nil {
			return err
		}
	}
	err := p.cs.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	p.log.Info("released", "volume", v.Name)
	return nil
}

// makeBounded makes dir the mount point of a fresh ext4 file of size bytes (dir.img), owned by
// the provisioner's uid:gid; an existing mount (a retried provision) is kept.
func (p *provisioner) makeBounded(ctx context.Context, dir string, size int64) error {
	if size <= 0 {
		return fmt.Errorf("claim without a size")
	}
	if mounted(dir) {
		return nil
	}
	// Unreadable while nothing is mounted on it: a Pod started on it then cannot write the
	// host's disk.
	if err := os.Mkdir(dir, 0o000); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	img := dir + ".img"
	f, err := os.OpenFile(img, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("volume file of %d bytes: %w", size, err)
	}
	owner := fmt.Sprintf("root_owner=%d:%d", p.uid, p.gid)
	if out, err := exec.CommandContext(ctx, "mkfs.ext4", "-q", "-F", "-m", "0", "-O", "^has_journal", "-E", "lazy_itable_init=1,"+owner, img).CombinedOutput(); err != nil {
		return fmt.Errorf("mkfs.ext4: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.CommandContext(ctx, "mount", "-o", "loop,nosuid,nodev,noatime", img, dir).CombinedOutput(); err != nil {
		return fmt.Errorf("mount %s: %w: %s", img, err, strings.TrimSpace(string(out)))
	}
	if err := os.Remove(filepath.Join(dir, "lost+found")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// mounted reports whether dir is a mount point of this mount namespace.
func mounted(dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}
