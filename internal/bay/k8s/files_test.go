package k8s

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// writeTree writes files (path -> content; a path ending in "*" is executable, the star
// dropped) under a new directory and returns it.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for p, content := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, "*") {
			p, mode = strings.TrimSuffix(p, "*"), 0o755
		}
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(full, mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func mustPack(t *testing.T, src, target string) *filesPack {
	t.Helper()
	p, err := packMount(bay.Mount{Source: src, Target: target, ReadOnly: true, Snapshot: true}, "bay")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// items lists a pack's projected items as "path mode key@configmap".
func items(p *filesPack) map[string]string {
	out := map[string]string{}
	v := p.volume("v")
	for _, s := range v.Projected.Sources {
		for _, it := range s.ConfigMap.Items {
			out[it.Path] = fmt.Sprintf("%o %s@%s", *it.Mode, it.Key, s.ConfigMap.Name)
		}
	}
	return out
}

func TestPackNamesFollowContent(t *testing.T) {
	tree := map[string]string{"SKILL.md": "# s\n", "scripts/run.sh*": "#!/bin/sh\necho hi\n", "ref/a/b.txt": "deep"}
	a, b := mustPack(t, writeTree(t, tree), "/skills/s"), mustPack(t, writeTree(t, tree), "/skills/s")
	if len(a.chunks) != 1 || a.chunks[0].name != b.chunks[0].name || a.digest != b.digest {
		t.Fatalf("equal trees packed apart: %+v / %+v", a.chunks, b.chunks)
	}
	if !strings.HasPrefix(a.chunks[0].name, "bay-files-"+a.digest[:20]+"-0") || len(a.chunks[0].name) != len("bay-files-")+20+2 {
		t.Errorf("name %q", a.chunks[0].name)
	}
	got := items(a)
	for p, mode := range map[string]string{"SKILL.md": "444", "scripts/run.sh": "555", "ref/a/b.txt": "444"} {
		if !strings.HasPrefix(got[p], mode+" ") {
			t.Errorf("item %s = %q, want mode %s", p, got[p], mode)
		}
	}
	changed := map[string]string{"SKILL.md": "# t\n", "scripts/run.sh*": "#!/bin/sh\necho hi\n", "ref/a/b.txt": "deep"}
	if c := mustPack(t, writeTree(t, changed), "/skills/s"); c.chunks[0].name == a.chunks[0].name {
		t.Error("changed content kept the name")
	}
	notExec := map[string]string{"SKILL.md": "# s\n", "scripts/run.sh": "#!/bin/sh\necho hi\n", "ref/a/b.txt": "deep"}
	if c := mustPack(t, writeTree(t, notExec), "/skills/s"); c.chunks[0].name == a.chunks[0].name {
		t.Error("a changed mode kept the name")
	}
	if p, _ := packMount(bay.Mount{Source: writeTree(t, tree), Target: "/skills/s", ReadOnly: true}, "shipyard.dev"); !strings.HasPrefix(p.chunks[0].name, "shipyard.dev-files-") {
		t.Errorf("prefixed name %q", p.chunks[0].name)
	}
	for in, want := range map[string]string{"bay": "bay", "shipyard.dev/": "shipyard.dev", "Acme_X": "acme-x", "": "bay"} {
		if got := filesNamePrefix(in); got != want {
			t.Errorf("filesNamePrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestPackChunksAcrossConfigMaps(t *testing.T) {
	tree := map[string]string{}
	big := strings.Repeat("x", 400<<10)
	for i := range 5 {
		tree[fmt.Sprintf("data/part%d.bin", i)] = big + strconv.Itoa(i)
	}
	tree["run*"] = "#!/bin/sh\n"
	p := mustPack(t, writeTree(t, tree), "/skills/big")
	// Sorted: data/part0..4 then run; two 400 KiB files fill a 900 KiB budget.
	if len(p.chunks) != 3 {
		t.Fatalf("%d chunks, want 3", len(p.chunks))
	}
	keys := map[string]bool{}
	for i, c := range p.chunks {
		if want := fmt.Sprintf("bay-files-%s-%d", p.digest[:20], i); c.name != want {
			t.Errorf("chunk %d named %s, want %s", i, c.name, want)
		}
		size := 0
		for j, f := range c.files {
			size += len(f.data)
			k := fileKey(c.first + j)
			if keys[k] {
				t.Errorf("key %s used twice", k)
			}
			keys[k] = true
		}
		if size > filesBudget {
			t.Errorf("chunk %d holds %d bytes", i, size)
		}
	}
	got := items(p)
	if len(got) != 6 || !strings.HasPrefix(got["run"], "555 ") || !strings.HasSuffix(got["run"], "-2") || !strings.HasSuffix(got["data/part0.bin"], "-0") {
		t.Errorf("items = %v", got)
	}
}

func TestPackRefusesAnOversizedFile(t *testing.T) {
	dir := writeTree(t, map[string]string{"SKILL.md": "ok", "blob.bin": strings.Repeat("y", filesBudget+1)})
	_, err := packMount(bay.Mount{Source: dir, Target: "/skills/s", ReadOnly: true, Snapshot: true}, "bay")
	var be *bay.Error
	if !errors.As(err, &be) || be.Code != bay.CodeValidation || !strings.Contains(be.Message, "blob.bin") ||
		!strings.Contains(be.Message, strconv.Itoa(filesBudget+1)) || !strings.Contains(be.Message, strconv.Itoa(filesBudget)) {
		t.Fatalf("oversized file: %v, want a validation error naming the file, its size and the limit", err)
	}
	if be.Details["file"] != filepath.Join(dir, "blob.bin") || be.Details["size"] != int64(filesBudget+1) {
		t.Errorf("details %v", be.Details)
	}
	// Exactly the limit fits.
	ok := writeTree(t, map[string]string{"blob.bin": strings.Repeat("y", filesBudget)})
	if p := mustPack(t, ok, "/skills/s"); len(p.chunks) != 1 {
		t.Errorf("a file of exactly the limit: %d chunks", len(p.chunks))
	}
}

func TestPackLinksAndEmptyDirectories(t *testing.T) {
	dir := writeTree(t, map[string]string{"SKILL.md": "# s", "bin/tool*": "#!/bin/sh\n"})
	if err := os.Symlink("../SKILL.md", filepath.Join(dir, "bin", "readme")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("bin/tool", filepath.Join(dir, "tool")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o755); err != nil {
		t.Fatal(err)
	}
	p := mustPack(t, dir, "/skills/s")
	got := items(p)
	if len(got) != 4 || !strings.HasPrefix(got["bin/readme"], "444 ") || !strings.HasPrefix(got["tool"], "555 ") {
		t.Errorf("items = %v, want the links as copies of their targets and no empty directory", got)
	}
	for _, f := range p.chunks[0].files {
		if f.path == "bin/readme" && string(f.data) != "# s" {
			t.Errorf("the link's copy holds %q", f.data)
		}
	}
	refused := func(name string, mk func(dir string) error, want string) {
		t.Helper()
		dir := writeTree(t, map[string]string{"SKILL.md": "# s"})
		if err := mk(dir); err != nil {
			t.Fatal(err)
		}
		_, err := packMount(bay.Mount{Source: dir, Target: "/skills/s", ReadOnly: true, Snapshot: true}, "bay")
		if be, ok := errors.AsType[*bay.Error](err); !ok || be.Code != bay.CodeValidation || !strings.Contains(be.Message, want) {
			t.Errorf("%s: %v, want a validation error saying %q", name, err, want)
		}
	}
	outside := writeTree(t, map[string]string{"secret": "s3cret"})
	refused("link out", func(dir string) error {
		return os.Symlink(filepath.Join(outside, "secret"), filepath.Join(dir, "leak"))
	}, "leaving the tree")
	refused("relative link up", func(dir string) error {
		return os.Symlink(filepath.Join("..", filepath.Base(outside), "secret"), filepath.Join(dir, "up")) // t.TempDir's are siblings
	}, "leaving the tree")
	refused("dangling", func(dir string) error { return os.Symlink("nothing", filepath.Join(dir, "dangling")) }, "resolves to nothing")
	refused("link to a directory", func(dir string) error {
		if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "d", "f"), nil, 0o644); err != nil {
			return err
		}
		return os.Symlink("d", filepath.Join(dir, "dlink"))
	}, "not a regular file")
	refused("dot-dot name", func(dir string) error { return os.WriteFile(filepath.Join(dir, "..data"), nil, 0o644) }, "'..'")
}

// TestSnapshotPod renders the Pod of two containers mounting a skill tree and the index file:
// one projected volume per source, shared, the file through subPath; in host_mounts hostpath
// the paths on the node, the index as a file.
func TestSnapshotPod(t *testing.T) {
	tree := writeTree(t, map[string]string{"SKILL.md": "# s", "run.sh*": "#!/bin/sh\n"})
	index := filepath.Join(writeTree(t, map[string]string{"abc.md": "| s |"}), "abc.md")
	mounts := []bay.Mount{{Source: tree, Target: "/skills/s", ReadOnly: true, Snapshot: true}, {Source: index, Target: bay.SkillsIndexFile, ReadOnly: true, Snapshot: true}}
	sp := runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkOpen})
	sp.Containers[0].Mounts = mounts
	sp.Containers = append(sp.Containers, bay.ContainerSpec{Name: "gull", RuntimeType: bay.RuntimeGull, Image: "gull:1", Port: 8115, Mounts: mounts})
	if err := validateInstance(sp); err != nil {
		t.Fatal(err)
	}
	d := testDriver(t, nil)
	files, err := d.packSnapshots(sp)
	if err != nil || len(files) != 2 {
		t.Fatalf("packSnapshots: %v, %v", files, err)
	}
	pod, err := d.instancePod(sp, kube.ObjectMeta{Name: sp.Name, Annotations: map[string]string{}}, files)
	if err != nil {
		t.Fatal(err)
	}
	projected := 0
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			t.Errorf("volume %s is a hostPath", v.Name)
		}
		if v.Projected != nil {
			projected++
		}
	}
	if projected != 2 {
		t.Errorf("%d projected volumes, want one per source", projected)
	}
	for _, c := range pod.Spec.Containers {
		byPath := map[string]kube.VolumeMount{}
		for _, m := range c.VolumeMounts {
			byPath[m.MountPath] = m
		}
		if m := byPath["/skills/s"]; !m.ReadOnly || m.SubPath != "" || m.Name != "files0" {
			t.Errorf("%s: skill mount %+v", c.Name, m)
		}
		if m := byPath[bay.SkillsIndexFile]; !m.ReadOnly || m.SubPath != "INDEX.md" || m.Name != "files1" {
			t.Errorf("%s: index mount %+v", c.Name, m)
		}
	}
	if _, err := d.instancePod(sp, kube.ObjectMeta{Annotations: map[string]string{}}, nil); err == nil {
		t.Error("a snapshot mount without its pack rendered")
	}

	hp := testDriver(t, func(c *Config) { c.HostMounts = HostMountsHostPath })
	files, err = hp.packSnapshots(sp)
	if err != nil || files != nil {
		t.Fatalf("hostpath mode packed: %v, %v", files, err)
	}
	pod, err = hp.instancePod(sp, kube.ObjectMeta{Annotations: map[string]string{}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]kube.HostPathType{}
	for _, v := range pod.Spec.Volumes {
		if v.HostPath != nil {
			types[v.HostPath.Path] = *v.HostPath.Type
		}
	}
	if types[tree] != kube.HostPathDirectory || types[index] != kube.HostPathFile {
		t.Errorf("host paths %v, want the tree a directory and the index a file", types)
	}
	bad := DefaultConfig()
	bad.HostMounts = "nfs"
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "host_mounts") {
		t.Errorf("host_mounts nfs: %v", err)
	}
}

// fakeConfigMaps is the ConfigMap and Pod API as the API server answers it, in memory.
type fakeConfigMaps struct {
	mu      sync.Mutex
	cms     map[string]*kube.ConfigMap
	pods    []kube.Pod
	rv      int
	creates int
	// beforeCreate and beforePodList, when set, run before a create or a Pod list is
	// answered (races to script).
	beforeCreate  func(body []byte)
	beforePodList func()
}

func (f *fakeConfigMaps) status(w http.ResponseWriter, code int, reason string) {
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d}`, reason, code)
}

func (f *fakeConfigMaps) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	const base = "/api/v1/namespaces/bay/configmaps"
	name := strings.TrimPrefix(strings.TrimPrefix(r.URL.Path, base), "/")
	body, _ := io.ReadAll(r.Body)
	if r.Method == http.MethodPost && f.beforeCreate != nil {
		f.beforeCreate(body)
	}
	if strings.HasSuffix(r.URL.Path, "/pods") && f.beforePodList != nil {
		f.beforePodList()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case r.URL.Path == "/api/v1/namespaces/bay/pods" && r.Method == http.MethodGet:
		_ = json.NewEncoder(w).Encode(kube.PodList{Items: f.pods})
	case !strings.HasPrefix(r.URL.Path, base):
		f.status(w, http.StatusNotFound, kube.ReasonNotFound)
	case r.Method == http.MethodGet && name == "":
		var list kube.ConfigMapList
		for _, cm := range f.cms {
			list.Items = append(list.Items, *cm)
		}
		_ = json.NewEncoder(w).Encode(list)
	case r.Method == http.MethodPost:
		var cm kube.ConfigMap
		if err := json.Unmarshal(body, &cm); err != nil || cm.Kind != "ConfigMap" || cm.Immutable == nil || !*cm.Immutable {
			f.status(w, http.StatusUnprocessableEntity, kube.ReasonInvalid)
			return
		}
		if _, ok := f.cms[cm.Name]; ok {
			f.status(w, http.StatusConflict, kube.ReasonAlreadyExists)
			return
		}
		f.rv++
		f.creates++
		cm.ResourceVersion = strconv.Itoa(f.rv)
		f.cms[cm.Name] = &cm
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(cm)
	case (r.Method == http.MethodPatch || r.Method == http.MethodDelete) && f.cms[name] == nil:
		f.status(w, http.StatusNotFound, kube.ReasonNotFound)
	case r.Method == http.MethodPatch:
		cm := f.cms[name]
		var patch struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		if r.Header.Get("Content-Type") != kube.MergePatchType || json.Unmarshal(body, &patch) != nil {
			f.status(w, http.StatusBadRequest, kube.ReasonBadRequest)
			return
		}
		for k, v := range patch.Metadata.Annotations {
			cm.Annotations[k] = v
		}
		f.rv++
		cm.ResourceVersion = strconv.Itoa(f.rv)
		_ = json.NewEncoder(w).Encode(cm)
	case r.Method == http.MethodDelete:
		cm := f.cms[name]
		var opts deleteBody
		_ = json.Unmarshal(body, &opts)
		if opts.Preconditions.ResourceVersion != "" && opts.Preconditions.ResourceVersion != cm.ResourceVersion {
			f.status(w, http.StatusConflict, kube.ReasonConflict)
			return
		}
		delete(f.cms, name)
		fmt.Fprint(w, `{"kind":"Status","status":"Success"}`)
	default:
		f.status(w, http.StatusMethodNotAllowed, "MethodNotAllowed")
	}
}

type deleteBody struct {
	Preconditions struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"preconditions"`
}

func fakeAPI(t *testing.T) (*Driver, *fakeConfigMaps) {
	t.Helper()
	f := &fakeConfigMaps{cms: map[string]*kube.ConfigMap{}}
	return apiDriver(t, f), f
}

// apiDriver is a test driver whose API server is h.
func apiDriver(t *testing.T, h http.Handler) *Driver {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cs, err := kube.New(&kube.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := testDriver(t, nil)
	d.cs = cs
	return d
}

// TestEnsureSnapshots creates the ConfigMaps once (immutable, binary data, labelled) and marks
// them used on every later create; one made meanwhile by another bay is used; one holding other
// content is refused.
func TestEnsureSnapshots(t *testing.T) {
	d, f := fakeAPI(t)
	big := strings.Repeat("z", 500<<10)
	tree := writeTree(t, map[string]string{"SKILL.md": "# s", "a.bin": big, "b.bin": big})
	sp := runtimeSpec(bay.NetworkPolicy{Mode: bay.NetworkOpen})
	sp.Labels = map[string]string{bay.LabelDeployment: "dep-1", bay.LabelSandboxID: "sb-1"}
	sp.Containers[0].Mounts = []bay.Mount{{Source: tree, Target: "/skills/s", ReadOnly: true, Snapshot: true}}
	files, err := d.packSnapshots(sp)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if err := d.ensureSnapshots(ctx, sp, files); err != nil {
		t.Fatal(err)
	}
	if f.creates != 2 || len(f.cms) != 2 {
		t.Fatalf("%d creates, %d objects; want 2 ConfigMaps", f.creates, len(f.cms))
	}
	p := files[tree]
	for _, c := range p.chunks {
		cm := f.cms[c.name]
		if cm == nil {
			t.Fatalf("no ConfigMap %s", c.name)
		}
		if cm.Labels["bay.managed"] != "true" || cm.Labels["bay.deployment"] != "dep-1" || cm.Labels["bay.kind"] != kindFiles ||
			cm.Labels[labelManagedBy] != managedBy || cm.Labels["bay.sandbox_id"] != "" {
			t.Errorf("%s labels %v", c.name, cm.Labels)
		}
		if cm.Annotations[annFilesDigest] != p.digest || cm.Annotations[annLastUsed] == "" {
			t.Errorf("%s annotations %v", c.name, cm.Annotations)
		}
		for i, fl := range c.files {
			if string(cm.BinaryData[fileKey(c.first+i)]) != string(fl.data) {
				t.Errorf("%s: key %s does not hold %s", c.name, fileKey(c.first+i), fl.path)
			}
		}
	}
	first := f.cms[p.chunks[0].name].Annotations[annLastUsed]
	time.Sleep(2 * time.Millisecond)
	if err := d.ensureSnapshots(ctx, sp, files); err != nil {
		t.Fatal(err)
	}
	if f.creates != 2 {
		t.Errorf("the second use created again (%d creates)", f.creates)
	}
	if again := f.cms[p.chunks[0].name].Annotations[annLastUsed]; again <= first {
		t.Errorf("last use %s, then %s: not marked again", first, again)
	}

	// Another bay creates the object between this one's patch (not found) and its create.
	d2, f2 := fakeAPI(t)
	other, _ := d.filesConfigMap(sp, p, p.chunks[1], "2020-01-01T00:00:00Z")
	f2.beforeCreate = func(body []byte) {
		f2.mu.Lock()
		defer f2.mu.Unlock()
		if strings.Contains(string(body), other.Name) && f2.cms[other.Name] == nil {
			other.ResourceVersion = "100"
			f2.cms[other.Name] = other
		}
	}
	if err := d2.ensureSnapshots(ctx, sp, files); err != nil {
		t.Fatalf("racing another bay: %v", err)
	}
	if f2.creates != 1 || f2.cms[other.Name].Annotations[annLastUsed] == "2020-01-01T00:00:00Z" {
		t.Errorf("%d creates; the object made by the other bay marked %s; want it used and marked", f2.creates, f2.cms[other.Name].Annotations[annLastUsed])
	}

	f.cms[p.chunks[0].name].Annotations[annFilesDigest] = "something-else"
	if err := d.ensureSnapshots(ctx, sp, files); err == nil || !strings.Contains(err.Error(), "other content") {
		t.Errorf("a ConfigMap of other content: %v", err)
	}
}

// TestCollectSnapshots selects the ConfigMaps of the deployment that no Pod mounts and that
// went unused for the grace period, and deletes each only while unchanged.
func TestCollectSnapshots(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	cm := func(name, dep string, lastUsed time.Time) kube.ConfigMap {
		labels := map[string]string{labelManagedBy: managedBy, "bay.managed": "true", "bay.kind": kindFiles}
		if dep != "" {
			labels["bay.deployment"] = dep
		}
		ann := map[string]string{}
		if !lastUsed.IsZero() {
			ann[annLastUsed] = lastUsed.Format(time.RFC3339Nano)
		}
		return kube.ConfigMap{ObjectMeta: kube.ObjectMeta{Name: name, Labels: labels, Annotations: ann, CreationTimestamp: now.Add(-time.Hour), ResourceVersion: "1"}}
	}
	old, fresh := now.Add(-10*time.Minute), now.Add(-time.Minute)
	cms := []kube.ConfigMap{
		cm("old-unused", "dep-1", old),
		cm("old-projected", "dep-1", old),
		cm("old-configmap-volume", "dep-1", old),
		cm("fresh", "dep-1", fresh),
		cm("no-annotation", "dep-1", time.Time{}), // its creation, an hour ago
		cm("other-deployment", "dep-2", old),
		cm("no-deployment", "", old),
	}
	pods := []kube.Pod{{Spec: kube.PodSpec{Volumes: []kube.Volume{
		{Name: "files0", VolumeSource: kube.VolumeSource{Projected: &kube.ProjectedVolumeSource{Sources: []kube.VolumeProjection{{ConfigMap: &kube.ConfigMapProjection{LocalObjectReference: kube.LocalObjectReference{Name: "old-projected"}}}}}}},
		{Name: "cm", VolumeSource: kube.VolumeSource{ConfigMap: &kube.ConfigMapVolumeSource{LocalObjectReference: kube.LocalObjectReference{Name: "old-configmap-volume"}}}},
	}}}}
	names := func(list []kube.ConfigMap) []string {
		var out []string
		for _, c := range list {
			out = append(out, c.Name)
		}
		slices.Sort(out)
		return out
	}
	cutoff := now.Add(-5 * time.Minute)
	if got := names(unusedSnapshots(cms, pods, "bay.deployment", "dep-1", cutoff)); !slices.Equal(got, []string{"no-annotation", "old-unused"}) {
		t.Errorf("dep-1: %v", got)
	}
	if got := names(unusedSnapshots(cms, pods, "bay.deployment", "", cutoff)); !slices.Equal(got, []string{"no-deployment"}) {
		t.Errorf("no deployment: %v", got)
	}

	d, f := fakeAPI(t)
	for i := range cms {
		f.cms[cms[i].Name] = &cms[i]
	}
	f.pods = pods
	ctx := t.Context()
	got, err := d.CollectSnapshots(ctx, "dep-1", cutoff, true)
	if slices.Sort(got); err != nil || !slices.Equal(got, []string{"no-annotation", "old-unused"}) || len(f.cms) != len(cms) {
		t.Fatalf("dry run: %v, %v; %d left", got, err, len(f.cms))
	}
	// "old-unused" is marked used between the list and its delete: it stays.
	f.beforePodList = func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.cms["old-unused"].ResourceVersion = "2"
	}
	got, err = d.CollectSnapshots(ctx, "dep-1", cutoff, false)
	if err != nil || !slices.Equal(got, []string{"no-annotation"}) {
		t.Fatalf("collect: %v, %v", got, err)
	}
	if _, ok := f.cms["old-unused"]; !ok {
		t.Error("a ConfigMap changed since the list was deleted")
	}
}
