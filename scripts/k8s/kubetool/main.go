// Command kubetool is the Go half of scripts/k8s (the test cluster's scripts): the steps that
// talk to the API server and would be fragile in shell.
//
//	kubetool ready   -kubeconfig K [-node N] [-timeout D]   wait for the API server (and a Ready node)
//	kubetool setup   -kubeconfig K -class C [-loopback-class R] [-gvisor-class G]  the storage class the node serves, the RuntimeClasses of its handlers
//	kubetool seccomp -out FILE                              the user-namespace seccomp profile (internal/bay/k8s)
//	kubetool runsc-spec -pids-limit N <spec >spec           the runsc handler's base spec: RLIMIT_NPROC for gVisor
//	kubetool localpv -kubeconfig K -class C -root DIR       the node's volume provisioner (runs until SIGTERM)
//	kubetool drain   -kubeconfig K [-timeout D]             delete every pod and wait until they are gone
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: kubetool ready|setup|localpv|drain [flags]")
		os.Exit(2)
	}
	cmds := map[string]func([]string) error{"ready": ready, "setup": setup, "seccomp": seccompProfile, "runsc-spec": runscSpec, "localpv": localpv, "drain": drain}
	run, ok := cmds[os.Args[1]]
	if !ok {
		fmt.Fprintf(os.Stderr, "kubetool: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
	if err := run(os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "kubetool %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func client(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	return kubernetes.NewForConfig(cfg)
}

// poll calls f every 100 ms until it reports done (then its error is poll's), or timeout
// passes.
func poll(timeout time.Duration, what string, f func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last error
	for {
		done, err := f(ctx)
		if done {
			return err
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: not within %v (last: %v)", what, timeout, last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func ready(args []string) error {
	fs := flag.NewFlagSet("ready", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	node := fs.String("node", "", "node that must be Ready")
	timeout := fs.Duration("timeout", 60*time.Second, "bound")
	_ = fs.Parse(args)
	cs, err := client(*kubeconfig)
	if err != nil {
		return err
	}
	err = poll(*timeout, "API server ready", func(ctx context.Context) (bool, error) {
		b, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok", err
	})
	if err != nil || *node == "" {
		return err
	}
	return poll(*timeout, "node "+*node+" Ready", func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, *node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
			if c.Type == corev1.NodeReady {
				return false, fmt.Errorf("node %s: %s", c.Reason, c.Message)
			}
		}
		return false, errors.New("no Ready condition yet")
	})
}

func setup(args []string) error {
	fs := flag.NewFlagSet("setup", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	class := fs.String("class", "shipyard-local", "storage class served by localpv")
	loopback := fs.String("loopback-class", "", "RuntimeClass of the containerd handler \"loopback\" (none when empty)")
	gvisor := fs.String("gvisor-class", "", "RuntimeClass of the containerd handler \"runsc\" (gVisor; none when empty)")
	_ = fs.Parse(args)
	cs, err := client(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bind := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	sc := &storagev1.StorageClass{
		// The cluster's default class, as real clusters have one: a claim that names no class
		// (the shipped deployment's storage_class: "") is provisioned here too.
		ObjectMeta: metav1.ObjectMeta{Name: *class,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}},
		Provisioner:       "shipyard.local/localpv",
		ReclaimPolicy:     &reclaim,
		VolumeBindingMode: &bind,
	}
	if _, err := cs.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("storage class %s: %w", *class, err)
	}
	for handler, name := range map[string]string{"loopback": *loopback, "runsc": *gvisor} {
		if name == "" {
			continue
		}
		rc := &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: handler}
		if _, err := cs.NodeV1().RuntimeClasses().Create(ctx, rc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("runtime class %s: %w", name, err)
		}
	}
	return nil
}

func drain(args []string) error {
	fs := flag.NewFlagSet("drain", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	timeout := fs.Duration("timeout", 30*time.Second, "bound")
	_ = fs.Parse(args)
	cs, err := client(*kubeconfig)
	if err != nil {
		return err
	}
	zero := int64(0)
	return poll(*timeout, "every pod gone", func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				_ = cs.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
			}
		}
		if len(pods.Items) == 0 {
			return true, nil
		}
		return false, fmt.Errorf("%d pods left", len(pods.Items))
	})
}
