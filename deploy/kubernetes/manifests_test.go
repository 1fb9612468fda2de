package kubernetes_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/shipyard-dev/shipyard/deploy/deploytest"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// rendered is deploy/kubernetes as `kubectl kustomize` renders it, decoded strictly (an unknown
// or misspelt field fails) into the API's types.
type rendered struct {
	objects []runtime.Object
	// bay's Deployment, Service and PodDisruptionBudget; the egress gateway's.
	deployment, gateway *appsv1.Deployment
	service, gatewaySvc *corev1.Service
	pdb, gatewayPDB     *policyv1.PodDisruptionBudget
	configMap           *corev1.ConfigMap
	roles               []*rbacv1.Role
	bindings            []*rbacv1.RoleBinding
	policies            []*networkingv1.NetworkPolicy
	namespaces          map[string]*corev1.Namespace
}

func render(t *testing.T, dir string) rendered {
	t.Helper()
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatalf("kubectl (with its built-in kustomize) is needed to render %s: %v", dir, err)
	}
	out, err := exec.Command("kubectl", "kustomize", dir).Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v", dir, err)
	}
	strict := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true, Strict: true})
	r := rendered{namespaces: map[string]*corev1.Namespace{}}
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := strict.Decode(doc, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v\n%s", dir, err, doc)
		}
		r.objects = append(r.objects, obj)
		switch o := obj.(type) {
		case *appsv1.Deployment:
			*pick(t, o.Name, &r.deployment, &r.gateway) = o
		case *corev1.Service:
			*pick(t, o.Name, &r.service, &r.gatewaySvc) = o
		case *policyv1.PodDisruptionBudget:
			*pick(t, o.Name, &r.pdb, &r.gatewayPDB) = o
		case *corev1.ConfigMap:
			r.configMap = o
		case *rbacv1.Role:
			r.roles = append(r.roles, o)
		case *rbacv1.RoleBinding:
			r.bindings = append(r.bindings, o)
		case *networkingv1.NetworkPolicy:
			r.policies = append(r.policies, o)
		case *corev1.Namespace:
			r.namespaces[o.Name] = o
		case *corev1.ServiceAccount:
		default:
			t.Errorf("%s renders an unexpected %v", dir, gvk)
		}
	}
	if r.deployment == nil || r.service == nil || r.pdb == nil || r.configMap == nil {
		t.Fatalf("%s lacks the Deployment, Service, PodDisruptionBudget or ConfigMap", dir)
	}
	if r.gateway == nil || r.gatewaySvc == nil || r.gatewayPDB == nil {
		t.Fatalf("%s lacks the egress gateway's Deployment, Service or PodDisruptionBudget", dir)
	}
	return r
}

// gatewayName names the egress gateway's objects.
const gatewayName = "shipyard-egress"

// pick is bay's slot for an object named bay, the gateway's for one named gatewayName.
func pick[T any](t *testing.T, name string, bay, gateway *T) *T {
	t.Helper()
	switch name {
	case "bay":
		return bay
	case gatewayName:
		return gateway
	}
	t.Fatalf("unexpected object %s", name)
	return nil
}

// TestManifests checks deploy/kubernetes without a cluster: every object decodes strictly, bay
// runs hardened as two replicas behind a Service and a PodDisruptionBudget that select it, its
// rights are exactly what its driver uses and only in the sandboxes' namespace, both
// namespaces deny traffic by default, and the shipped config.yaml is one bay accepts and
// that agrees with the manifests (namespaces, the labels its NetworkPolicies admit).
func TestManifests(t *testing.T) {
	r := render(t, filepath.Join(deploytest.RepoRoot(t), "deploy", "kubernetes"))
	const botNS, sbNS = "shipyard", "shipyard-sandboxes"

	d := r.deployment
	pod := d.Spec.Template
	if d.Namespace != botNS || d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("deployment %s/%s replicas %v: want two in %s", d.Namespace, d.Name, d.Spec.Replicas, botNS)
	}
	sel, err := metaSelector(d.Spec.Selector.MatchLabels)
	if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
		t.Errorf("deployment selector %v does not select its pods %v", d.Spec.Selector, pod.Labels)
	}
	ps := pod.Spec.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 1000 ||
		ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v: want non-root uid 1000, seccomp RuntimeDefault", ps)
	}
	if pod.Spec.ServiceAccountName != "bay" || pod.Spec.HostNetwork || pod.Spec.HostPID || pod.Spec.HostIPC {
		t.Errorf("pod: service account %q, host namespaces %v %v %v", pod.Spec.ServiceAccountName, pod.Spec.HostNetwork, pod.Spec.HostPID, pod.Spec.HostIPC)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("bay's pod has %d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	sc := c.SecurityContext
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 ||
		(sc.Privileged != nil && *sc.Privileged) {
		t.Errorf("container security context %+v: want no escalation, read-only root, ALL dropped, none added", sc)
	}
	if c.Resources.Limits.Memory().IsZero() || c.Resources.Limits.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
		t.Errorf("container resources %+v: want requests and limits", c.Resources)
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
		c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/health" {
		t.Errorf("probes: readiness %+v liveness %+v", c.ReadinessProbe, c.LivenessProbe)
	}
	var port int32
	for _, p := range c.Ports {
		if p.Name == "http" {
			port = p.ContainerPort
		}
	}
	secretEnv := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secretEnv[e.Name] = true
		}
		if strings.Contains(strings.ToLower(e.Name), "key") || strings.Contains(e.Name, "DATABASE") {
			if e.Value != "" {
				t.Errorf("env %s has a literal value in the manifest", e.Name)
			}
		}
	}
	if !secretEnv["BAY_DATABASE__URL"] || !secretEnv["BAY_API_KEY"] {
		t.Errorf("the database URL and the API key must come from Secrets: %v", c.Env)
	}

	s := r.service
	if s.Namespace != botNS || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(s.Spec.Selector) == 0 {
		t.Errorf("service %s selector %v does not select bay's pods", s.Name, s.Spec.Selector)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].TargetPort.String() != "http" || port != 8114 {
		t.Errorf("service ports %+v, container port http=%d", s.Spec.Ports, port)
	}
	psel, err := metaSelector(r.pdb.Spec.Selector.MatchLabels)
	if err != nil || r.pdb.Namespace != botNS || !psel.Matches(labels.Set(pod.Labels)) ||
		r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() != 1 {
		t.Errorf("pdb %+v: want minAvailable 1 of bay's pods", r.pdb.Spec)
	}

	// RBAC: bay's rights are exactly what internal/bay/k8s calls (in the sandboxes' namespace,
	// and in its own only the gateway's Service and Pods), the gateway's what it watches and
	// reads; each Role is bound to its service account alone.
	wantRoles := map[string]map[string][]string{
		sbNS + "/bay-driver": {
			"pods":                   {"create", "delete", "get", "list", "patch", "watch"},
			"secrets":                {"create", "delete", "get", "list"},
			"persistentvolumeclaims": {"create", "delete", "get", "list"},
			"networkpolicies":        {"create", "delete", "get", "patch"},
			"configmaps":             {"create", "delete", "list", "patch"},
		},
		botNS + "/bay-egress":     {"services": {"get"}, "pods": {"list"}},
		sbNS + "/" + gatewayName:  {"pods": {"get", "list", "watch"}},
		botNS + "/" + gatewayName: {"services": {"get"}},
	}
	wantSubject := map[string]string{"bay-driver": "bay", "bay-egress": "bay", gatewayName: gatewayName}
	if len(r.roles) != len(wantRoles) {
		t.Errorf("%d Roles, want %d", len(r.roles), len(wantRoles))
	}
	for _, role := range r.roles {
		want, ok := wantRoles[role.Namespace+"/"+role.Name]
		if !ok {
			t.Errorf("unexpected Role %s/%s", role.Namespace, role.Name)
			continue
		}
		got := map[string][]string{}
		for _, rule := range role.Rules {
			for _, res := range rule.Resources {
				got[res] = append(got[res], rule.Verbs...)
			}
		}
		for res, verbs := range got {
			slices.Sort(verbs)
			if !slices.Equal(verbs, want[res]) {
				t.Errorf("role %s/%s grants %s %v, want %v", role.Namespace, role.Name, res, verbs, want[res])
			}
		}
		if len(got) != len(want) {
			t.Errorf("role %s/%s covers %v, want %v", role.Namespace, role.Name, got, want)
		}
	}
	if len(r.bindings) != len(wantRoles) {
		t.Errorf("%d RoleBindings, want %d", len(r.bindings), len(wantRoles))
	}
	for _, b := range r.bindings {
		if _, ok := wantRoles[b.Namespace+"/"+b.RoleRef.Name]; !ok || len(b.Subjects) != 1 ||
			b.Subjects[0].Name != wantSubject[b.RoleRef.Name] || b.Subjects[0].Namespace != botNS {
			t.Errorf("role binding %s/%s: %+v", b.Namespace, b.Name, b)
		}
	}

	// Namespaces and their default deny.
	for ns, level := range map[string]string{botNS: "restricted", sbNS: "baseline"} {
		n := r.namespaces[ns]
		if n == nil || n.Labels["pod-security.kubernetes.io/enforce"] != level {
			t.Errorf("namespace %s: want pod security %s enforced, got %v", ns, level, n)
		}
		deny := false
		for _, p := range r.policies {
			deny = deny || (p.Namespace == ns && len(p.Spec.PodSelector.MatchLabels) == 0 && len(p.Spec.PodSelector.MatchExpressions) == 0 &&
				len(p.Spec.Ingress) == 0 && len(p.Spec.Egress) == 0 && len(p.Spec.PolicyTypes) == 2)
		}
		if !deny {
			t.Errorf("namespace %s has no default-deny NetworkPolicy", ns)
		}
	}

	// The shipped config.yaml, as bay loads it with the Secrets' variables set.
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(r.configMap.Data["config.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{File: file, Env: []string{
		"BAY_DATABASE__URL=postgresql://bay:secret@postgres.example:5432/bay", "BAY_API_KEY=sk-0123456789abcdef0123"}})
	if err != nil {
		t.Fatalf("bay refuses the ConfigMap's config.yaml: %v", err)
	}
	k := cfg.Driver.K8s
	if cfg.Driver.Type != "k8s" || k.Namespace != sbNS || k.Kubeconfig != "" || k.BayNamespace != botNS || !k.NetworkPolicy || k.ConnectMode != "pod_ip" {
		t.Errorf("driver config %+v", cfg.Driver)
	}
	if !labels.SelectorFromSet(k.BayPodLabels).Matches(labels.Set(pod.Labels)) || len(k.BayPodLabels) == 0 {
		t.Errorf("bay_pod_labels %v do not select bay's pods %v: sandboxes would refuse bay", k.BayPodLabels, pod.Labels)
	}
	if cfg.Server.Host != "0.0.0.0" || cfg.Server.Port != int(port) || cfg.Security.AllowAnonymous {
		t.Errorf("server %+v, anonymous %v", cfg.Server, cfg.Security.AllowAnonymous)
	}
	checkGateway(t, r, k.EgressGateway, c)
}

// checkGateway: the egress gateway runs hardened from bay's image with bay's config, behind a
// Service whose named ports (numeric targetPorts) are the container's, ready by its admin
// port's /readyz; bay's config points at that Service, and bay and the gateway read the token
// from the same Secret at the configured path; a NetworkPolicy admits the sandboxes to it and
// bay to its admin port.
func checkGateway(t *testing.T, r rendered, g config.K8sEgressGatewayConfig, bay corev1.Container) {
	t.Helper()
	const botNS = "shipyard"
	d := r.gateway
	pod := d.Spec.Template
	if d.Namespace != botNS || g.Service != gatewayName || g.Namespace != botNS || d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
		t.Errorf("gateway %s/%s (replicas %v), config's egress_gateway %+v", d.Namespace, d.Name, d.Spec.Replicas, g)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("the gateway's pod has %d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ps, sc := pod.Spec.SecurityContext, c.SecurityContext
	if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.SeccompProfile == nil || sc == nil ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0 {
		t.Errorf("gateway security %+v %+v", ps, sc)
	}
	if c.Image != bay.Image || !slices.Equal(c.Args, []string{"egress-gateway", "--config", "/etc/bay/config.yaml"}) || pod.Spec.ServiceAccountName != gatewayName {
		t.Errorf("gateway container %s %v (service account %s)", c.Image, c.Args, pod.Spec.ServiceAccountName)
	}
	podIP := false
	for _, e := range c.Env {
		podIP = podIP || (e.Name == "POD_IP" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP")
	}
	if !podIP {
		t.Errorf("gateway env %v: want POD_IP from status.podIP", c.Env)
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.ReadinessProbe.HTTPGet.Port.String() != "admin" {
		t.Errorf("gateway readiness probe %+v", c.ReadinessProbe)
	}
	s := r.gatewaySvc
	if s.Namespace != botNS || !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod.Labels)) || len(s.Spec.Selector) == 0 {
		t.Errorf("gateway service selector %v does not select its pods %v", s.Spec.Selector, pod.Labels)
	}
	names := map[string]bool{}
	for _, p := range s.Spec.Ports {
		names[p.Name] = true
		if p.TargetPort.Type != 0 || ports[p.Name] != p.TargetPort.IntVal {
			t.Errorf("gateway service port %s: targetPort %s, the container's %d (want the same number)", p.Name, p.TargetPort.String(), ports[p.Name])
		}
	}
	for _, n := range []string{"dns", "dns-tcp", "http", "tls", "proxy", "admin"} {
		if !names[n] {
			t.Errorf("gateway service lacks port %s", n)
		}
	}
	// The token: one Secret, mounted by both at the directory of token_file.
	mounted := func(spec corev1.PodSpec, ctr corev1.Container) string {
		for _, v := range spec.Volumes {
			if v.Secret == nil {
				continue
			}
			for _, m := range ctr.VolumeMounts {
				if m.Name == v.Name && m.MountPath+"/token" == g.TokenFile {
					return v.Secret.SecretName
				}
			}
		}
		return ""
	}
	if a, b := mounted(r.deployment.Spec.Template.Spec, bay), mounted(pod.Spec, c); a == "" || a != b {
		t.Errorf("the admin token %s: bay mounts Secret %q, the gateway %q", g.TokenFile, a, b)
	}
	var np *networkingv1.NetworkPolicy
	for _, p := range r.policies {
		if p.Namespace == botNS && p.Name == gatewayName {
			np = p
		}
	}
	if np == nil || !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(pod.Labels)) || len(np.Spec.Ingress) != 2 {
		t.Errorf("gateway NetworkPolicy %+v", np)
	}
}

func metaSelector(m map[string]string) (labels.Selector, error) {
	if len(m) == 0 {
		return labels.Nothing(), nil
	}
	return labels.SelectorFromSet(m), nil
}
