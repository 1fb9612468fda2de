//go:build k8s

package k8s_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/drivertest/testimage"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
)

// The test node enforces NetworkPolicies (kube-router's firewall, started by scripts/k8s/up.sh),
// so the driver's own policies are held to what they promise with real traffic: each sandbox
// asks the test image's /fetch to connect somewhere, and the answer says whether the
// connection was made. Every refusal asserted here has a control: the same target reached
// from a Pod no policy selects, so a refusal is the policy's and not a path that never worked.
// Without an enforcer every refusal below fails.

// peerPort2 is the peer Pod's second server, which no allowlist names.
const peerPort2 = testimage.Port + 1

// enforceWithin bounds the wait for a new sandbox's policy to be in force: the enforcer
// applies it on the Pod's events, asynchronously (well under a second here when idle).
const enforceWithin = 20 * time.Second

// TestNetworkPolicyEnforced runs sandboxes in each network mode next to two Pods of the test:
// "peer" (no bay label: a stranger to the sandboxes) and "bay" (labelled as bay's Pods, whom a
// sandbox admits), and a listener of the test on the node's address.
func TestNetworkPolicyEnforced(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "netpol")
	img := testImage(t, env)
	nodeIP := env.NodeIP(t)
	host := hostServer(t, nodeIP)
	peer := startPeer(t, env, ns, "peer", img, nil)
	bayPod := startPeer(t, env, ns, "bay", img, map[string]string{"app.kubernetes.io/name": "shipyard-bay"})
	peerURL := func(port int) string { return "http://" + net.JoinHostPort(peer, strconv.Itoa(port)) + "/health" }
	bayURL := "http://" + net.JoinHostPort(bayPod, strconv.Itoa(testimage.Port))

	// Controls: every target is reachable from a Pod that no policy selects.
	for _, target := range []string{host + "/health", peerURL(testimage.Port), peerURL(peerPort2)} {
		expectReached(t, bayURL, target, "control: bay's Pod -> "+target)
	}
	expectReached(t, "http://"+net.JoinHostPort(peer, strconv.Itoa(testimage.Port)), bayURL+"/health", "control: peer Pod -> bay's Pod")

	// blockNode narrows security.blocked_hosts to the node's address alone, so that the Pod
	// network (private, closed by the default blocked hosts) is open to open and allowlist
	// sandboxes while the node stays closed.
	blockNode := func(c *k8s.Config) { c.BlockedRanges = []netip.Prefix{netip.PrefixFrom(nodeIP, 32)} }

	t.Run("none", func(t *testing.T) {
		d := newDriver(t, env, ns, nil)
		ep := startSandbox(t, d, "np-none", img, bay.NetworkPolicy{Mode: bay.NetworkNone})
		waitEnforced(t, ep, peerURL(testimage.Port), "egress none: sandbox -> peer Pod")
		expectRefused(t, ep, host+"/health", "egress none: sandbox -> node")
		// Ingress: bay's Pods only, on the runtime port.
		expectReached(t, bayURL, ep+"/health", "ingress: bay's Pod -> sandbox")
		expectRefused(t, "http://"+net.JoinHostPort(peer, strconv.Itoa(testimage.Port)), ep+"/health", "ingress: peer Pod -> sandbox")
		// bay outside the cluster, on the node, by both of the driver's paths: the Pod address
		// (pod_ip) and the API server's Pod proxy (proxy). The enforcer admits what comes from
		// the node itself (the kubelet's probes come from there too).
		getOK(t, ep+"/health", "bay on the node -> sandbox by Pod address")
		dp := newDriver(t, env, ns, func(c *k8s.Config) { c.ConnectMode = k8s.ConnectProxy })
		t.Cleanup(func() { _ = dp.Close() })
		inst, err := dp.InspectInstance(t.Context(), "np-none")
		if err != nil {
			t.Fatal(err)
		}
		getOK(t, inst.Containers[0].Endpoint+"/health", "bay on the node -> sandbox through the API server")
	})

	t.Run("open-default-blocked-hosts", func(t *testing.T) {
		d := newDriver(t, env, ns, nil)
		ep := startSandbox(t, d, "np-open-default", img, bay.NetworkPolicy{Mode: bay.NetworkOpen})
		waitEnforced(t, ep, peerURL(testimage.Port), "egress open, default blocked hosts: sandbox -> peer Pod (private address)")
	})

	t.Run("open", func(t *testing.T) {
		d := newDriver(t, env, ns, blockNode)
		ep := startSandbox(t, d, "np-open", img, bay.NetworkPolicy{Mode: bay.NetworkOpen})
		waitEnforced(t, ep, host+"/health", "egress open: sandbox -> node (a blocked host)")
		expectReached(t, ep, peerURL(testimage.Port), "egress open: sandbox -> peer Pod")
		expectReached(t, ep, peerURL(peerPort2), "egress open: sandbox -> peer Pod's second port")
	})

	t.Run("allowlist", func(t *testing.T) {
		d := newDriver(t, env, ns, blockNode)
		allow := net.JoinHostPort(peer, strconv.Itoa(testimage.Port))
		ep := startSandbox(t, d, "np-allow", img, bay.NetworkPolicy{Mode: bay.NetworkAllowlist, Allow: []string{allow}})
		waitEnforced(t, ep, peerURL(peerPort2), "egress allowlist "+allow+": sandbox -> the peer's other port")
		expectReached(t, ep, peerURL(testimage.Port), "egress allowlist "+allow+": sandbox -> "+allow)
		expectRefused(t, ep, bayURL+"/health", "egress allowlist "+allow+": sandbox -> bay's Pod")
		expectRefused(t, ep, host+"/health", "egress allowlist "+allow+": sandbox -> node")
	})
}

// hostServer serves 200 on the node's address (a port outside the NodePort range, which
// kube-router opens to every Pod whatever its policy) until the test ends; its base URL.
func hostServer(t *testing.T, ip netip.Addr) string {
	t.Helper()
	ln := k8stest.ListenNode(t, ip)
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// startPeer runs a Pod of the test image with two servers (testimage.Port and peerPort2),
// waits until both answer the test and returns its address.
func startPeer(t *testing.T, env *k8stest.Env, ns, name, img string, labels map[string]string) string {
	t.Helper()
	ctx := t.Context()
	no := false
	var grace int64
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken:  &no,
			TerminationGracePeriodSeconds: &grace,
		},
	}
	for i, port := range []int{testimage.Port, peerPort2} {
		pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{
			Name: fmt.Sprintf("s%d", i), Image: img, ImagePullPolicy: corev1.PullNever,
			Env: []corev1.EnvVar{{Name: "PORT", Value: strconv.Itoa(port)}},
		})
	}
	if _, err := env.Clientset.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = env.Clientset.CoreV1().Pods(ns).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
	})
	deadline := time.Now().Add(60 * time.Second)
	var ip string
	for ip == "" {
		p, err := env.Clientset.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			ip = p.Status.PodIP
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s not running after 60 s: %+v", name, p.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, port := range []int{testimage.Port, peerPort2} {
		getOK(t, "http://"+net.JoinHostPort(ip, strconv.Itoa(port))+"/health", "pod "+name)
	}
	return ip
}

// startSandbox creates an instance of the test image with network policy p through d and
// returns its runtime's endpoint once it answers.
func startSandbox(t *testing.T, d *k8s.Driver, name, img string, p bay.NetworkPolicy) string {
	t.Helper()
	sp := spec(name, img)
	sp.Network = p
	return startSpec(t, d, sp)
}

// startSpec creates the instance sp through d and returns its runtime's endpoint once it
// answers.
func startSpec(t *testing.T, d *k8s.Driver, sp bay.InstanceSpec) string {
	t.Helper()
	ctx := t.Context()
	inst, err := d.CreateInstance(ctx, sp)
	if err != nil {
		t.Fatalf("create %s: %v", sp.Name, err)
	}
	t.Cleanup(func() { _ = d.DestroyInstance(context.WithoutCancel(ctx), sp.Name) })
	ep := inst.Containers[0].Endpoint
	getOK(t, ep+"/health", "sandbox "+sp.Name)
	return ep
}

// getOK waits (30 s at most) until url answers 200 to the test.
func getOK(t *testing.T, url, what string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := hc.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("status %d: %s", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: GET %s: %v", what, url, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// fetch asks the test image's server at from to GET target (its own timeout: 2 s) and says
// whether target answered; an error is a failure to ask from itself.
func fetch(from, target string) (bool, string, error) {
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{Proxy: nil}}
	resp, err := hc.Get(from + "/fetch?url=" + url.QueryEscape(target))
	if err != nil {
		return false, "", err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		var r struct{ Status int }
		if err := json.Unmarshal(body, &r); err != nil {
			return false, "", fmt.Errorf("fetch reply %q: %w", body, err)
		}
		return r.Status == http.StatusOK, fmt.Sprintf("status %d", r.Status), nil
	case http.StatusBadGateway:
		return false, string(body), nil
	}
	return false, "", fmt.Errorf("fetch: status %d: %s", resp.StatusCode, body)
}

// expectReached asserts that from reaches target (three tries: a loaded machine may be slow
// to answer within the fetch's 2 s).
func expectReached(t *testing.T, from, target, what string) {
	t.Helper()
	var detail string
	for range 3 {
		ok, d, err := fetch(from, target)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		detail = d
	}
	t.Errorf("%s: not reached (%s); its policy admits it", what, detail)
}

// expectRefused asserts, in one try, that from cannot reach target.
func expectRefused(t *testing.T, from, target, what string) {
	t.Helper()
	ok, d, err := fetch(from, target)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if ok {
		t.Errorf("%s: reached (%s); its policy refuses it: is the node's NetworkPolicy enforcer running?", what, d)
	}
}

// waitEnforced waits until from cannot reach target: the sign that the enforcer has applied
// the new sandbox's policy, after which the other refusals are asserted in one try each (and
// each reports its own failure when nothing enforces).
func waitEnforced(t *testing.T, from, target, what string) {
	t.Helper()
	start := time.Now()
	for {
		ok, d, err := fetch(from, target)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if !ok {
			t.Logf("%s: refused %v after the sandbox answered (%s)", what, time.Since(start).Round(time.Millisecond), d)
			return
		}
		if time.Since(start) > enforceWithin {
			t.Errorf("%s: still reached after %v (%s); its policy refuses it: is the node's NetworkPolicy enforcer running?", what, enforceWithin, d)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestServiceProxy: the node's service proxy (kube-proxy, scripts/k8s/up.sh) makes a Service's
// cluster address lead to its Pods, and a Pod's connection through it keeps the Pod's source
// address: a NetworkPolicy admitting only "client" Pods lets the client through the Service
// and refuses a stranger (masqueraded to the node's address, the stranger would pass, as the
// enforcer admits the node).
func TestServiceProxy(t *testing.T) {
	env := k8stest.Node(t)
	ns := env.Namespace(t, "svcproxy")
	img := testImage(t, env)
	ctx := t.Context()
	startPeer(t, env, ns, "target", img, map[string]string{"role": "target"})
	client := startPeer(t, env, ns, "client", img, map[string]string{"role": "client"})
	stranger := startPeer(t, env, ns, "stranger", img, map[string]string{"role": "stranger"})
	svc, err := env.Clientset.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "target"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"role": "target"}, Ports: []corev1.ServicePort{{
			Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(testimage.Port)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	target := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/health"
	from := func(ip string) string { return "http://" + net.JoinHostPort(ip, strconv.Itoa(testimage.Port)) }
	// The proxy programs the Service within moments of its endpoints: wait for the first
	// success from the client.
	deadline := time.Now().Add(enforceWithin)
	for {
		ok, d, err := fetch(from(client), target)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the Service's address %s leads nowhere after %v (%s): is the node's service proxy running?", target, enforceWithin, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
	expectReached(t, from(stranger), target, "control: stranger -> Service, no policy yet")
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(testimage.Port)
	if _, err := env.Clientset.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "clients-only"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"role": "target"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
		},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitEnforced(t, from(stranger), target, "stranger -> Service, policy admitting clients only")
	expectReached(t, from(client), target, "client -> Service, policy admitting clients only")
}
