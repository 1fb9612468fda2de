package k8stest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os/exec"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/clientcmd"
)

// NodeIP is the node's IPv4 InternalIP (the host's address Pods reach it by).
func (e *Env) NodeIP(t testing.TB) netip.Addr {
	t.Helper()
	n, err := e.Clientset.CoreV1().Nodes().Get(t.Context(), NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range n.Status.Addresses {
		if ip, err := netip.ParseAddr(a.Address); a.Type == corev1.NodeInternalIP && err == nil && ip.Is4() {
			return ip
		}
	}
	t.Fatalf("node %s has no IPv4 InternalIP: %v", n.Name, n.Status.Addresses)
	return netip.Addr{}
}

// Forward accepts TCP connections on addr and joins each to a new connection dial makes,
// until the test ends; it returns the address it listens on.
func Forward(t testing.TB, addr string, dial func() (net.Conn, error)) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := dial()
			if err != nil {
				in.Close()
				continue
			}
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return ln.Addr().String()
}

// ListenNode listens on a free port of the node's address ip outside the NodePort range
// (30000-32767, which the test node's NetworkPolicy enforcer opens to every Pod whatever its
// policy) until the test ends.
func ListenNode(t testing.TB, ip netip.Addr) net.Listener {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp4", netip.AddrPortFrom(ip, 0).String())
		if err != nil {
			t.Fatal(err)
		}
		if p := ln.Addr().(*net.TCPAddr).Port; p >= 30000 && p <= 32767 {
			ln.Close()
			continue
		}
		t.Cleanup(func() { ln.Close() })
		return ln
	}
	t.Fatal("no free port outside the NodePort range")
	return nil
}

// The egress gateway's Service and ports, as the tests deploy it (deploy/kubernetes ships the
// same shape).
const (
	EgressService     = "shipyard-egress"
	EgressAdminPort   = 9090
	EgressBarrierPort = 9091
)

// EgressGatewayOptions describe a gateway Deployment of a test.
type EgressGatewayOptions struct {
	// Namespace holds the gateway (and, in the tests, the sandboxes it watches).
	Namespace string
	// Image is bay's image (deploytest.BayImage), already on the node.
	Image string
	// Config is bay's config.yaml as the gateway reads it; its token_file must be
	// TokenPath.
	Config string
	// Token is the admin port's token.
	Token string
	// Replicas of the Deployment (default 1).
	Replicas int32
}

// TokenPath is where the gateway's Pods find the admin token (the Secret's mount).
const TokenPath = "/var/run/shipyard-egress/token"

// DeployEgressGateway runs `bay egress-gateway` in o.Namespace as the shipped manifests do
// (a ServiceAccount allowed to read the namespace's Pods and the Service, the config and the
// token as a ConfigMap and a Secret, the Service with the gateway's named ports, the
// Deployment with its readiness probe) and waits until every replica is ready. The API server
// is reached through a forwarder on the node's address (the test node's API server listens on
// loopback and its kubernetes Service has no endpoints). It returns the Service's ClusterIP.
func (e *Env) DeployEgressGateway(t testing.TB, o EgressGatewayOptions) netip.Addr {
	t.Helper()
	ctx := t.Context()
	ns, cs := o.Namespace, e.Clientset
	replicas := max(o.Replicas, 1)
	kc, err := clientcmd.BuildConfigFromFlags("", e.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	apiHost, err := hostOf(kc.Host)
	if err != nil {
		t.Fatal(err)
	}
	api := Forward(t, netip.AddrPortFrom(e.NodeIP(t), 0).String(), func() (net.Conn, error) { return net.Dial("tcp", apiHost) })
	fwdHost, fwdPort, _ := net.SplitHostPort(api)

	labels := map[string]string{"app.kubernetes.io/name": EgressService}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels}
	}
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("egress gateway: create %s: %v", what, err)
		}
	}
	_, err = cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: meta(EgressService)}, metav1.CreateOptions{})
	must("service account", err)
	_, err = cs.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: meta(EgressService), Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
	}}, metav1.CreateOptions{})
	must("role", err)
	_, err = cs.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta(EgressService),
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: EgressService},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: EgressService, Namespace: ns}},
	}, metav1.CreateOptions{})
	must("role binding", err)
	_, err = cs.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta(EgressService + "-config"),
		Data: map[string]string{"config.yaml": o.Config}}, metav1.CreateOptions{})
	must("config map", err)
	_, err = cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: meta(EgressService + "-admin"),
		StringData: map[string]string{"token": o.Token}}, metav1.CreateOptions{})
	must("secret", err)
	sp := func(name string, proto corev1.Protocol, port, target int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Protocol: proto, Port: port, TargetPort: intstr.FromInt32(target)}
	}
	svc, err := cs.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: meta(EgressService), Spec: corev1.ServiceSpec{
		Selector: labels,
		Ports: []corev1.ServicePort{sp("dns", corev1.ProtocolUDP, 53, 5353), sp("dns-tcp", corev1.ProtocolTCP, 53, 5353),
			sp("http", corev1.ProtocolTCP, 80, 8080), sp("tls", corev1.ProtocolTCP, 443, 8443),
			sp("proxy", corev1.ProtocolTCP, 3128, 3128), sp("admin", corev1.ProtocolTCP, EgressAdminPort, EgressAdminPort),
			sp("barrier", corev1.ProtocolTCP, EgressBarrierPort, EgressBarrierPort)},
	}}, metav1.CreateOptions{})
	must("service", err)
	f, tr, uid := false, true, int64(1000)
	_, err = cs.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta(EgressService), Spec: appsv1.DeploymentSpec{
		Replicas: &replicas,
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{
				ServiceAccountName: EgressService,
				EnableServiceLinks: &f,
				SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: &tr, RunAsUser: &uid, RunAsGroup: &uid,
					SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
				Containers: []corev1.Container{{
					Name: "gateway", Image: o.Image, ImagePullPolicy: corev1.PullNever,
					Args: []string{"egress-gateway", "--config", "/etc/bay/config.yaml"},
					Env: []corev1.EnvVar{
						{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
						{Name: "KUBERNETES_SERVICE_HOST", Value: fwdHost}, {Name: "KUBERNETES_SERVICE_PORT", Value: fwdPort},
					},
					VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/bay", ReadOnly: true},
						{Name: "token", MountPath: "/var/run/shipyard-egress", ReadOnly: true}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
						Path: "/readyz", Port: intstr.FromInt32(EgressAdminPort)}}, PeriodSeconds: 1},
					SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &tr,
						Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				}},
				Volumes: []corev1.Volume{
					{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
						LocalObjectReference: corev1.LocalObjectReference{Name: EgressService + "-config"}}}},
					{Name: "token", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: EgressService + "-admin"}}},
				},
			},
		},
	}}, metav1.CreateOptions{})
	must("deployment", err)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("kubectl", "--kubeconfig", e.Kubeconfig, "-n", ns, "logs", "-l",
				"app.kubernetes.io/name="+EgressService, "--tail", "80", "--prefix").CombinedOutput()
			t.Logf("the egress gateway's logs:\n%s", out)
		}
	})
	wctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	for {
		d, err := cs.AppsV1().Deployments(ns).Get(wctx, EgressService, metav1.GetOptions{})
		if err == nil && d.Status.ReadyReplicas == replicas {
			break
		}
		if wctx.Err() != nil {
			out, _ := exec.Command("kubectl", "--kubeconfig", e.Kubeconfig, "-n", ns, "describe", "pods", "-l",
				"app.kubernetes.io/name="+EgressService).CombinedOutput()
			t.Fatalf("the egress gateway did not become ready: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
	if err != nil {
		t.Fatalf("the gateway Service's ClusterIP %q: %v", svc.Spec.ClusterIP, err)
	}
	return ip
}

// hostOf is the host:port of a URL such as https://127.0.0.1:16443.
func hostOf(u string) (string, error) {
	pu, err := url.Parse(u)
	if err != nil || pu.Host == "" {
		return "", fmt.Errorf("API server address %q", u)
	}
	return pu.Host, nil
}
