//go:build k8s

package kubernetes_test

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/shipyard-dev/shipyard/deploy/deploytest"
	"github.com/shipyard-dev/shipyard/internal/testenv/k8stest"
	"github.com/shipyard-dev/shipyard/internal/testenv/pgtest"
	"github.com/shipyard-dev/shipyard/sdk"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) } // stops the PostgreSQL the test starts

// sandboxImage is the profile image of the smoke test's sandboxes: ship:base, or
// SHIPYARD_E2E_IMAGE.
var sandboxImage = func() string {
	if v := os.Getenv("SHIPYARD_E2E_IMAGE"); v != "" {
		return v
	}
	return "ship:base"
}()

const apiKey = "sk-deploy-0123456789abcdef"

func kubectl(t *testing.T, env *k8stest.Env, timeout time.Duration, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.Context()), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", env.Kubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestDeploymentOnCluster applies deploy/kubernetes to the test cluster and smoke-tests bay
// through its Service: bay's image built offline and copied to the node, PostgreSQL as the
// external database, both replicas Ready (the apply passes the namespaces' Pod Security
// levels), a sandbox created, run and deleted through the Service, a sandbox created through
// one replica and used through the other, and nothing left after the delete.
//
// The test cluster has no kube-proxy and no cluster DNS, so what those would give bay is given
// by the test's overlay instead: the API server's address (KUBERNETES_SERVICE_HOST/PORT, a
// forwarder of the test on the node's address), the database by address (a forwarder to the
// test's PostgreSQL), and the Service reached with `kubectl port-forward service/bay`. The
// node enforces NetworkPolicies (kube-router's firewall), so the shipped policies are
// exercised: bay's admits the API server and the database by their usual ports only, and the
// test's forwarders listen on others, so the overlay adds a policy admitting bay's egress to
// the forwarders alone (as an operator names the addresses of theirs).
func TestDeploymentOnCluster(t *testing.T) {
	env := k8stest.Node(t)
	cs := env.Clientset
	ctx := t.Context()
	for _, ns := range []string{"shipyard", "shipyard-sandboxes"} {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			t.Fatalf("namespace %s exists already (another run, or a deployment of yours): remove it first", ns)
		}
	}
	node, err := cs.CoreV1().Nodes().Get(ctx, k8stest.NodeName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var nodeIP string
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			nodeIP = a.Address
		}
	}
	if nodeIP == "" {
		t.Fatalf("node %s has no InternalIP", node.Name)
	}

	bayImage := deploytest.BayImage(t)
	env.ImportImage(t, bayImage)
	env.ImportImage(t, sandboxImage)

	// The API server, as bay's Pods would reach it through the kubernetes Service.
	kc, err := clientcmd.BuildConfigFromFlags("", env.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(kc.Host)
	if err != nil {
		t.Fatal(err)
	}
	apiAddr := k8stest.Forward(t, nodeIP+":0", func() (net.Conn, error) { return net.Dial("tcp", api.Host) })
	// The database: a fresh one on the test's PostgreSQL, by TCP on the node's address.
	pg := pgtest.Shared(t)
	dbURL, err := url.Parse(pgtest.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(pg.SocketDir(), fmt.Sprintf(".s.PGSQL.%d", pg.Port()))
	pgAddr := k8stest.Forward(t, nodeIP+":0", func() (net.Conn, error) { return net.Dial("unix", sock) })
	database := fmt.Sprintf("postgresql://%s@%s%s?sslmode=disable", pgtest.Superuser, pgAddr, dbURL.Path)

	// The overlay: the shipped kustomization with the test's image, Secrets, addresses and a
	// profile on the sandbox image appended to the shipped config.yaml.
	root := deploytest.RepoRoot(t)
	shipped := render(t, filepath.Join(root, "deploy", "kubernetes")).configMap.Data["config.yaml"]
	config := shipped + fmt.Sprintf("profiles:\n  - id: python-default\n    image: %q\n    resources: {cpus: 1.0, memory: \"512m\"}\n    capabilities: [filesystem, shell, python]\n    idle_timeout: 600\n", sandboxImage)
	dir := t.TempDir()
	base, err := filepath.Rel(dir, filepath.Join(root, "deploy", "kubernetes"))
	if err != nil {
		t.Fatal(err)
	}
	apiHost, apiPort, _ := net.SplitHostPort(apiAddr)
	_, pgPort, _ := net.SplitHostPort(pgAddr)
	forwarders := fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: bay-test-forwarders, namespace: shipyard}
spec:
  podSelector:
    matchExpressions: [{key: app.kubernetes.io/name, operator: In, values: [shipyard-bay, shipyard-egress]}]
  policyTypes: [Egress]
  egress:
    - to: [{ipBlock: {cidr: %s/32}}]
      ports: [{protocol: TCP, port: %s}, {protocol: TCP, port: %s}]
`, nodeIP, apiPort, pgPort)
	repo, tag, _ := strings.Cut(bayImage, ":")
	overlay := fmt.Sprintf(`apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [%q, forwarders.yaml]
images: [{name: bay, newName: %q, newTag: %q}]
secretGenerator:
  - {name: bay-database, namespace: shipyard, literals: [%q], options: {disableNameSuffixHash: true}}
  - {name: bay-api-key, namespace: shipyard, literals: [%q], options: {disableNameSuffixHash: true}}
  - {name: shipyard-egress-admin, namespace: shipyard, literals: ["token=egress-admin-token-0123456789"], options: {disableNameSuffixHash: true}}
configMapGenerator:
  - {name: bay-config, namespace: shipyard, behavior: replace, files: [config.yaml], options: {disableNameSuffixHash: true}}
patches:
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: bay, namespace: shipyard}
      spec:
        template:
          spec:
            containers:
              - name: bay
                env:
                  - {name: KUBERNETES_SERVICE_HOST, value: %[6]q}
                  - {name: KUBERNETES_SERVICE_PORT, value: %[7]q}
  - patch: |
      apiVersion: apps/v1
      kind: Deployment
      metadata: {name: shipyard-egress, namespace: shipyard}
      spec:
        template:
          spec:
            containers:
              - name: gateway
                env:
                  - {name: KUBERNETES_SERVICE_HOST, value: %[6]q}
                  - {name: KUBERNETES_SERVICE_PORT, value: %[7]q}
`, base, repo, tag, "url="+database, "api-key="+apiKey, apiHost, apiPort)
	for name, data := range map[string]string{"kustomization.yaml": overlay, "config.yaml": config, "forwarders.yaml": forwarders} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	t.Cleanup(func() {
		if t.Failed() {
			out, _ := exec.Command("kubectl", "--kubeconfig", env.Kubeconfig, "-n", "shipyard", "logs", "-l",
				"app.kubernetes.io/name=shipyard-bay", "--tail", "60", "--prefix").CombinedOutput()
			t.Logf("bay's logs:\n%s", out)
		}
		kubectl(t, env, 3*time.Minute, "delete", "-k", dir, "--wait=true", "--timeout=150s", "--ignore-not-found")
	})
	t0 := time.Now()
	kubectl(t, env, time.Minute, "apply", "-k", dir)
	kubectl(t, env, 4*time.Minute, "-n", "shipyard", "rollout", "status", "deployment/bay", "--timeout=210s")
	t.Logf("apply to both replicas Ready: %v", time.Since(t0).Round(time.Millisecond))
	// The egress gateway comes up with its own rights: it reads its Service and lists the
	// sandbox Pods before its readiness probe passes.
	kubectl(t, env, 3*time.Minute, "-n", "shipyard", "rollout", "status", "deployment/shipyard-egress", "--timeout=150s")

	pods, err := cs.CoreV1().Pods("shipyard").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=shipyard-bay"})
	if err != nil {
		t.Fatal(err)
	}
	var ips []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.PodIP != "" {
			ips = append(ips, p.Status.PodIP)
		}
	}
	if len(ips) != 2 {
		t.Fatalf("want two bay Pods with addresses, got %v", ips)
	}
	// The EndpointSlice controller follows the Pods' readiness a moment after the rollout
	// sees it (seen: one ready endpoint right after the rollout said both were).
	var ready []string
	for deadline := time.Now().Add(30 * time.Second); ; {
		slices, err := cs.DiscoveryV1().EndpointSlices("shipyard").List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=bay"})
		if err != nil {
			t.Fatal(err)
		}
		ready = ready[:0]
		for _, sl := range slices.Items {
			for _, ep := range sl.Endpoints {
				if ep.Conditions.Ready != nil && *ep.Conditions.Ready {
					ready = append(ready, ep.Addresses...)
				}
			}
		}
		if len(ready) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if len(ready) != 2 {
		t.Fatalf("the Service has ready endpoints %v 30 s after the rollout, want both replicas", ready)
	}

	// Through the Service.
	svc := portForward(t, env, "service/bay")
	c, err := sdk.New(svc, apiKey, sdk.WithTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cold, rest := deploytest.Smoke(t, c)
	t.Logf("smoke through the Service: create + first python exec %v; shell, write, read, delete %v", cold.Round(time.Millisecond), rest.Round(time.Millisecond))

	// Two replicas, one service: a sandbox made through one is used and deleted through the
	// other.
	a, err := sdk.New("http://"+net.JoinHostPort(ips[0], "8114"), apiKey, sdk.WithTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	b, err := sdk.New("http://"+net.JoinHostPort(ips[1], "8114"), apiKey, sdk.WithTimeout(3*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	sbA, err := a.CreateSandbox(ctx, sdk.CreateSandboxRequest{})
	if err != nil {
		t.Fatalf("create through replica 1: %v", err)
	}
	defer sbA.Delete(context.WithoutCancel(ctx))
	sbB, err := b.GetSandbox(ctx, sbA.ID)
	if err != nil {
		t.Fatalf("get through replica 2: %v", err)
	}
	if sh, err := sbB.Shell(ctx, "echo $((40 + 2))"); err != nil || strings.TrimSpace(sh.Output) != "42" {
		t.Fatalf("shell through replica 2: %+v %v", sh, err)
	}
	if err := a.DeleteSandbox(ctx, sbA.ID); err != nil {
		t.Fatalf("delete through replica 1: %v", err)
	}

	// Nothing of the sandboxes is left in their namespace.
	deadline := time.Now().Add(90 * time.Second)
	for {
		left, err := cs.CoreV1().Pods("shipyard-sandboxes").List(ctx, metav1.ListOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		claims, err := cs.CoreV1().PersistentVolumeClaims("shipyard-sandboxes").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(left.Items) == 0 && len(claims.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d Pods and %d claims left in shipyard-sandboxes 90 s after the deletes", len(left.Items), len(claims.Items))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// TestManifestsOnAPIServer needs only the API server (`make k8s-up-tier1`): the namespaces and
// bay's ServiceAccount, Role and RoleBinding are applied, everything else is accepted by a
// server-side dry run; a Pod of the Deployment's template is admitted under the "restricted"
// level its namespace enforces while the same Pod with a capability added is refused; and bay's
// ServiceAccount may do exactly the driver's verbs in the sandboxes' namespace and nothing in its
// own or cluster-wide.
func TestManifestsOnAPIServer(t *testing.T) {
	env := k8stest.Cluster(t)
	cs := env.Clientset
	ctx := t.Context()
	for _, ns := range []string{"shipyard", "shipyard-sandboxes"} {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); err == nil {
			t.Fatalf("namespace %s exists already (another run, or a deployment of yours): remove it first", ns)
		}
	}
	r := render(t, filepath.Join(deploytest.RepoRoot(t), "deploy", "kubernetes"))
	t.Cleanup(func() {
		for _, ns := range []string{"shipyard", "shipyard-sandboxes"} {
			if err := cs.CoreV1().Namespaces().Delete(context.WithoutCancel(ctx), ns, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete namespace %s: %v", ns, err)
			}
		}
	})
	dir := t.TempDir()
	var real, all strings.Builder
	out, err := exec.Command("kubectl", "kustomize", filepath.Join(deploytest.RepoRoot(t), "deploy", "kubernetes")).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		all.WriteString(doc + "\n---\n")
		if m := regexp.MustCompile(`(?m)^kind: (\w+)$`).FindStringSubmatch(doc); m != nil && (m[1] == "Namespace" || m[1] == "ServiceAccount" || m[1] == "Role" || m[1] == "RoleBinding") {
			real.WriteString(doc + "\n---\n")
		}
	}
	for name, data := range map[string]string{"real.yaml": real.String(), "all.yaml": all.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	kubectl(t, env, time.Minute, "apply", "-f", filepath.Join(dir, "real.yaml"))
	kubectl(t, env, time.Minute, "apply", "--dry-run=server", "-f", filepath.Join(dir, "all.yaml"))

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bay-template", Namespace: "shipyard", Labels: r.deployment.Spec.Template.Labels},
		Spec: *r.deployment.Spec.Template.Spec.DeepCopy()}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	if _, err := cs.CoreV1().Pods("shipyard").Create(ctx, pod, dry); err != nil {
		t.Fatalf("a Pod of bay's template is refused in its namespace: %v", err)
	}
	gw := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gateway-template", Namespace: "shipyard", Labels: r.gateway.Spec.Template.Labels},
		Spec: *r.gateway.Spec.Template.Spec.DeepCopy()}
	if _, err := cs.CoreV1().Pods("shipyard").Create(ctx, gw, dry); err != nil {
		t.Fatalf("a Pod of the egress gateway's template is refused in its namespace: %v", err)
	}
	bad := pod.DeepCopy()
	bad.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"NET_ADMIN"}
	if _, err := cs.CoreV1().Pods("shipyard").Create(ctx, bad, dry); !apierrors.IsForbidden(err) {
		t.Fatalf("a Pod with NET_ADMIN in namespace shipyard: want it forbidden by the restricted level, got %v", err)
	}

	type access struct {
		ns, verb, group, resource, sub string
		want                           bool
		name                           string
		user                           string // "" = bay
	}
	checks := []access{
		{"shipyard-sandboxes", "create", "", "pods", "", true, "", ""},
		{"shipyard-sandboxes", "watch", "", "pods", "", true, "", ""},
		{"shipyard-sandboxes", "delete", "", "pods", "", true, "", ""},
		{"shipyard-sandboxes", "create", "", "secrets", "", true, "", ""},
		{"shipyard-sandboxes", "list", "", "persistentvolumeclaims", "", true, "", ""},
		{"shipyard-sandboxes", "create", "networking.k8s.io", "networkpolicies", "", true, "", ""},
		{"shipyard-sandboxes", "patch", "", "configmaps", "", true, "", ""},
		{"shipyard-sandboxes", "update", "", "configmaps", "", false, "", ""},
		{"shipyard-sandboxes", "update", "", "pods", "", false, "", ""},
		{"shipyard-sandboxes", "patch", "", "secrets", "", false, "", ""},
		{"shipyard-sandboxes", "create", "", "pods", "exec", false, "", ""},
		{"shipyard-sandboxes", "get", "", "pods", "proxy", false, "", ""},
		{"shipyard-sandboxes", "create", "rbac.authorization.k8s.io", "roles", "", false, "", ""},
		{"shipyard", "get", "", "secrets", "", false, "", ""},
		{"shipyard", "create", "", "pods", "", false, "", ""},
		{"", "list", "", "nodes", "", false, "", ""},
		{"", "list", "", "pods", "", false, "", ""},
		// A PATCH of a sandbox's allowlist; what bay asks of the egress gateway.
		{"shipyard-sandboxes", "patch", "", "pods", "", true, "", ""},
		{"shipyard-sandboxes", "patch", "networking.k8s.io", "networkpolicies", "", true, "", ""},
		{"shipyard", "list", "", "pods", "", true, "", ""},
		{"shipyard", "get", "", "services", "", true, "shipyard-egress", ""},
		{"shipyard", "get", "", "services", "", false, "bay", ""},
		// The gateway: the sandbox Pods and its own Service, nothing else.
		{"shipyard-sandboxes", "watch", "", "pods", "", true, "", "shipyard-egress"},
		{"shipyard-sandboxes", "create", "", "pods", "", false, "", "shipyard-egress"},
		{"shipyard-sandboxes", "get", "", "secrets", "", false, "", "shipyard-egress"},
		{"shipyard", "get", "", "services", "", true, "shipyard-egress", "shipyard-egress"},
		{"shipyard", "get", "", "secrets", "", false, "", "shipyard-egress"},
		{"shipyard", "list", "", "pods", "", false, "", "shipyard-egress"},
	}
	for _, c := range checks {
		user := cmp.Or(c.user, "bay")
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   "system:serviceaccount:shipyard:" + user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:shipyard", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: c.ns, Verb: c.verb, Group: c.group,
				Resource: c.resource, Subresource: c.sub, Name: c.name}}}
		res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status.Allowed != c.want {
			t.Errorf("%s may %s %s/%s %s in %q: %v, want %v", user, c.verb, c.resource, c.sub, c.name, c.ns, res.Status.Allowed, c.want)
		}
	}
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) ->`)

// portForward runs `kubectl port-forward <target> :8114` until the test ends and returns the
// local URL.
func portForward(t *testing.T, env *k8stest.Env, target string) string {
	t.Helper()
	cmd := exec.Command("kubectl", "--kubeconfig", env.Kubeconfig, "-n", "shipyard", "port-forward", "--address", "127.0.0.1", target, ":8114")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatalf("kubectl port-forward: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	select {
	case port := <-found:
		return "http://127.0.0.1:" + port
	case <-time.After(30 * time.Second):
		t.Fatal("kubectl port-forward did not start within 30 s")
		return ""
	}
}
