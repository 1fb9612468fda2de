package k8s

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/k8s/kube"
)

// A snapshot mount (bay.Mount.Snapshot: a skill version's folder, a skills index) lives on
// bay's own filesystem, which the node running the Pod does not have. In host_mounts
// configmap (the default) the driver copies it into the cluster: its files go into immutable
// ConfigMaps named by a digest of their paths, modes and contents, and come back at their
// relative paths through a projected volume (files 0444, executables 0555). Equal content
// gives equal names, so sandboxes, and every bay of a deployment, share one set of objects;
// a create that finds the object made already (by an earlier session, or another bay racing
// on the same content) uses it.
//
// What a tree becomes: regular files at their paths; a symbolic link to a regular file
// inside the tree as a copy of that file (a projected volume has no links); a link leaving
// the tree, a link to a directory and any other kind of file refuse the create. Empty
// directories are not carried (a projected volume makes directories for its files only).
// One file larger than a ConfigMap's budget refuses the create (validation_error naming it).
//
// Lifetime: before the Pod is created every ConfigMap it will mount gets annLastUsed set to
// now (a patch: the metadata of an immutable ConfigMap may change). The orphan GC
// (CollectSnapshots) deletes those of the deployment that no Pod mounts and whose last use is
// older than its grace period, each only while unchanged since it was listed, so a use that
// marked it meanwhile keeps it.

// HostMounts says how the driver delivers snapshot mounts.
type HostMounts string

// The ways to deliver a snapshot mount.
const (
	// HostMountsConfigMap copies it into immutable ConfigMaps (any cluster).
	HostMountsConfigMap HostMounts = "configmap"
	// HostMountsHostPath mounts the path on the node (bay's directory must be there).
	HostMountsHostPath HostMounts = "hostpath"
)

const (
	// filesBudget bounds the data (and key names) of one ConfigMap: the API server refuses a
	// ConfigMap of more than 1 MiB of data, and an object's request must stay under 1.5 MiB
	// once base64 (4/3) and the metadata are added.
	filesBudget = 900 << 10
	// filesLayout names the packing below; it is hashed into every name, so a change of the
	// layout (or the budget) never reuses the objects of another.
	filesLayout = "shipyard-files/v1"
	// annLastUsed is when a Pod was last about to mount the ConfigMap (RFC 3339).
	annLastUsed = "shipyard.dev/last-used"
	// annFilesDigest is the digest of the whole snapshot a ConfigMap is part of.
	annFilesDigest = "shipyard.dev/files-digest"
	// labelKind tells the driver's kinds of shared objects apart (a bay label, written with
	// the configured prefix).
	labelKind = "bay.kind"
	kindFiles = "files"
	// Modes of delivered files.
	modeFile = 0o444
	modeExec = 0o555
)

// packedFile is one file of a snapshot.
type packedFile struct {
	path string // relative, slash-separated
	mode int32
	data []byte
}

// filesChunk is one ConfigMap of a snapshot: its name and files (keys f<i>, i counting over
// the whole snapshot).
type filesChunk struct {
	name  string
	first int // key index of files[0]
	files []packedFile
}

// filesPack is a snapshot mount packed into ConfigMaps.
type filesPack struct {
	source string
	digest string // hex sha256 of the layout and every file
	// subPath is the file's path in the volume when the source is one file (mounted alone),
	// "" for a tree.
	subPath string
	chunks  []filesChunk
}

// errOversized is the validation error of one file too large for a ConfigMap.
func errOversized(source, rel string, size int64) error {
	return bay.Errorf(bay.CodeValidation,
		"The read-only mount %s holds %s of %d bytes; the Kubernetes driver delivers such files through ConfigMaps of at most %d bytes each (driver.k8s.host_mounts: hostpath mounts the node's path instead)",
		source, rel, size, filesBudget).
		WithDetails(map[string]any{"file": path.Join(source, rel), "size": size, "limit": filesBudget})
}

// filesNamePrefix is the label prefix as the start of an object name ("shipyard.dev/" ->
// "shipyard.dev", "Acme_X" -> "acme-x").
func filesNamePrefix(labelPrefix string) string {
	b := []byte(strings.ToLower(labelPrefix))
	for i, c := range b {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '.' && c != '-' {
			b[i] = '-'
		}
	}
	p := strings.Trim(string(b), "-.")
	if p == "" || len(p) > 200 {
		return DefaultLabelPrefix
	}
	return p
}

// packMount reads a snapshot mount's source (a directory tree, or one file delivered at the
// target's base name) from bay's filesystem and packs it under namePrefix.
func packMount(m bay.Mount, namePrefix string) (*filesPack, error) {
	fi, err := os.Stat(m.Source)
	if err != nil {
		return nil, fmt.Errorf("read-only mount %s: %w", m.Source, err)
	}
	var files []packedFile
	single := ""
	switch {
	case fi.Mode().IsRegular():
		single = path.Base(m.Target)
		f, err := readPacked(m.Source, m.Source, single, fi)
		if _, ok := errors.AsType[*bay.Error](err); err != nil && !ok {
			return nil, fmt.Errorf("read-only mount %s: %w", m.Source, err)
		}
		if err != nil {
			return nil, err
		}
		files = []packedFile{f}
	case fi.IsDir():
		if files, err = readTree(m.Source); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("read-only mount %s: neither a directory nor a regular file", m.Source)
	}
	for _, f := range files {
		if first, _, _ := strings.Cut(f.path, "/"); strings.HasPrefix(first, "..") {
			// The kubelet keeps a projected volume's own entries under "..": such a name
			// cannot be delivered.
			return nil, bay.Errorf(bay.CodeValidation, "The read-only mount %s holds %s, a name starting with '..' that a Kubernetes volume cannot carry", m.Source, f.path)
		}
	}
	return pack(m.Source, single, files, namePrefix), nil
}

// readPacked reads the regular file p (fi) as the entry rel of the mount of root.
func readPacked(root, p, rel string, fi fs.FileInfo) (packedFile, error) {
	if fi.Size() > filesBudget {
		return packedFile{}, errOversized(root, rel, fi.Size())
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return packedFile{}, err
	}
	if len(data) > filesBudget { // grew since its stat
		return packedFile{}, errOversized(root, rel, int64(len(data)))
	}
	mode := int32(modeFile)
	if fi.Mode()&0o111 != 0 {
		mode = modeExec
	}
	return packedFile{path: rel, mode: mode, data: data}, nil
}

// readTree reads every file of the tree at root (see the rules above).
func readTree(root string) ([]packedFile, error) {
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, fmt.Errorf("read-only mount %s: %w", root, err)
	}
	var files []packedFile
	err = filepath.WalkDir(real, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == real || d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(real, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		src := p
		if d.Type()&fs.ModeSymlink != 0 {
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return bay.Errorf(bay.CodeValidation, "The read-only mount %s holds %s, a symbolic link that resolves to nothing", root, rel)
			}
			if in, err := filepath.Rel(real, target); err != nil || in == ".." || strings.HasPrefix(in, ".."+string(filepath.Separator)) || filepath.IsAbs(in) {
				return bay.Errorf(bay.CodeValidation, "The read-only mount %s holds %s, a symbolic link leaving the tree", root, rel)
			}
			src = target
		}
		fi, err := os.Stat(src)
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return bay.Errorf(bay.CodeValidation, "The read-only mount %s holds %s, which is not a regular file (or a link to one inside the tree)", root, rel)
		}
		f, err := readPacked(root, src, rel, fi)
		if err != nil {
			return err
		}
		files = append(files, f)
		return nil
	})
	if err != nil {
		if _, ok := errors.AsType[*bay.Error](err); ok {
			return nil, err
		}
		return nil, fmt.Errorf("read-only mount %s: %w", root, err)
	}
	return files, nil
}

func fileKey(i int) string { return "f" + strconv.Itoa(i) }

// pack names and chunks files: sorted by path, filled into ConfigMaps in that order up to
// filesBudget each. Equal files give equal names and chunks.
func pack(source, single string, files []packedFile, namePrefix string) *filesPack {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b packedFile) int { return cmp.Compare(a.path, b.path) })
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%d\x00%s\x00", filesLayout, filesBudget, single)
	for _, f := range files {
		fmt.Fprintf(h, "%s\x00%o\x00%d\x00", f.path, f.mode, len(f.data))
		h.Write(f.data)
	}
	digest := hex.EncodeToString(h.Sum(nil))
	p := &filesPack{source: source, digest: digest, subPath: single}
	size := 0
	for i, f := range files {
		n := len(f.data) + len(fileKey(i))
		if len(p.chunks) == 0 || size+n > filesBudget {
			p.chunks = append(p.chunks, filesChunk{name: fmt.Sprintf("%s-files-%s-%d", namePrefix, digest[:20], len(p.chunks)), first: i})
			size = 0
		}
		c := &p.chunks[len(p.chunks)-1]
		c.files = append(c.files, f)
		size += n
	}
	if len(files) == 0 { // an empty tree is an empty directory: one ConfigMap without keys
		p.chunks = []filesChunk{{name: fmt.Sprintf("%s-files-%s-0", namePrefix, digest[:20])}}
	}
	return p
}

// volume is the projected volume of the snapshot.
func (p *filesPack) volume(name string) kube.Volume {
	src := make([]kube.VolumeProjection, 0, len(p.chunks))
	for _, c := range p.chunks {
		items := make([]kube.KeyToPath, 0, len(c.files))
		for i, f := range c.files {
			mode := f.mode
			items = append(items, kube.KeyToPath{Key: fileKey(c.first + i), Path: f.path, Mode: &mode})
		}
		src = append(src, kube.VolumeProjection{ConfigMap: &kube.ConfigMapProjection{LocalObjectReference: kube.LocalObjectReference{Name: c.name}, Items: items}})
	}
	mode := int32(modeFile)
	return kube.Volume{Name: name, VolumeSource: kube.VolumeSource{Projected: &kube.ProjectedVolumeSource{Sources: src, DefaultMode: &mode}}}
}

// filesLabels are the bay labels of a snapshot's ConfigMaps: managed, the deployment of the
// instance that first needed them, the kind.
func filesLabels(spec bay.InstanceSpec) map[string]string {
	l := map[string]string{bay.LabelManaged: "true", labelKind: kindFiles}
	if dep := spec.Labels[bay.LabelDeployment]; dep != "" {
		l[bay.LabelDeployment] = dep
	}
	return l
}

// packSnapshots packs every snapshot mount of spec (each source once), when the driver
// delivers them as ConfigMaps; nil otherwise.
func (d *Driver) packSnapshots(spec bay.InstanceSpec) (map[string]*filesPack, error) {
	if d.cfg.HostMounts != HostMountsConfigMap {
		return nil, nil
	}
	packs := map[string]*filesPack{}
	prefix := filesNamePrefix(d.cfg.LabelPrefix)
	for _, c := range spec.Containers {
		for _, m := range c.Mounts {
			if !m.Snapshot || !m.ReadOnly {
				continue
			}
			if _, ok := packs[m.Source]; ok {
				continue
			}
			p, err := packMount(m, prefix)
			if err != nil {
				return nil, err
			}
			packs[m.Source] = p
		}
	}
	return packs, nil
}

// ensureSnapshots marks every ConfigMap of the packs used now, creating those that are
// missing. A Pod create that fails afterwards leaves them: they are content-addressed, the
// next session with the same content uses them, and the orphan GC removes them once unused.
func (d *Driver) ensureSnapshots(ctx context.Context, spec bay.InstanceSpec, packs map[string]*filesPack) error {
	cms := d.cs.ConfigMaps(d.cfg.Namespace)
	now := time.Now().UTC().Format(time.RFC3339Nano)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annLastUsed: now}}})
	if err != nil {
		return err
	}
	for _, src := range slices.Sorted(maps.Keys(packs)) {
		p := packs[src]
		for _, c := range p.chunks {
			got, err := cms.Patch(ctx, c.name, kube.MergePatchType, patch)
			if kube.IsNotFound(err) {
				cm, merr := d.filesConfigMap(spec, p, c, now)
				if merr != nil {
					return merr
				}
				got, err = cms.Create(ctx, cm)
				if kube.IsAlreadyExists(err) { // made meanwhile by another session or bay
					got, err = cms.Patch(ctx, c.name, kube.MergePatchType, patch)
				}
			}
			if err != nil {
				return fmt.Errorf("configmap %s of %s: %w", c.name, src, classify(err))
			}
			if got.Annotations[annFilesDigest] != p.digest {
				return fmt.Errorf("configmap %s of %s holds other content (digest %q, want %s); delete it", c.name, src, got.Annotations[annFilesDigest], p.digest)
			}
		}
	}
	return nil
}

// filesConfigMap is one chunk's ConfigMap.
func (d *Driver) filesConfigMap(spec bay.InstanceSpec, p *filesPack, c filesChunk, now string) (*kube.ConfigMap, error) {
	meta, err := d.objectMeta(c.name, filesLabels(spec))
	if err != nil {
		return nil, err
	}
	meta.Annotations[annLastUsed] = now
	meta.Annotations[annFilesDigest] = p.digest
	data := make(map[string][]byte, len(c.files))
	for i, f := range c.files {
		data[fileKey(c.first+i)] = f.data
	}
	t := true
	return &kube.ConfigMap{ObjectMeta: meta, Immutable: &t, BinaryData: data}, nil
}

// CollectSnapshots deletes the snapshot ConfigMaps of deployment ("" = those without a
// deployment label) that no Pod of the namespace mounts and that were last used before
// usedBefore; with dryRun it deletes nothing. It returns the names it deleted (or would).
// Each delete holds only while the ConfigMap is unchanged since it was listed: one marked
// used meanwhile (its Pod about to be created) is kept.
func (d *Driver) CollectSnapshots(ctx context.Context, deployment string, usedBefore time.Time, dryRun bool) ([]string, error) {
	want := map[string]string{bay.LabelManaged: "true", labelKind: kindFiles}
	if deployment != "" {
		want[bay.LabelDeployment] = deployment
	}
	sel, err := d.labels.selector(want)
	if err != nil {
		return nil, fmt.Errorf("collect snapshots: %w", err)
	}
	cms := d.cs.ConfigMaps(d.cfg.Namespace)
	// ConfigMaps first, then Pods: a Pod created after the Pod list was marked its
	// ConfigMaps' use before, which changed them since the first list.
	list, err := cms.List(ctx, kube.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, fmt.Errorf("collect snapshots: list configmaps: %w", classify(err))
	}
	pods, err := d.cs.Pods(d.cfg.Namespace).List(ctx, kube.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("collect snapshots: list pods: %w", classify(err))
	}
	var out []string
	var errs []error
	for _, cm := range unusedSnapshots(list.Items, pods.Items, d.labels.key(bay.LabelDeployment), deployment, usedBefore) {
		if dryRun {
			out = append(out, cm.Name)
			continue
		}
		err := cms.DeleteUnchanged(ctx, cm.Name, cm.ResourceVersion)
		switch {
		case err == nil:
			out = append(out, cm.Name)
		case kube.IsNotFound(err), kube.HasReason(err, kube.ReasonConflict):
			// gone already, or used since it was listed
		default:
			errs = append(errs, fmt.Errorf("delete configmap %s: %w", cm.Name, classify(err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return out, fmt.Errorf("collect snapshots: %w", err)
	}
	return out, nil
}

// unusedSnapshots selects, among snapshot ConfigMaps, those of deployment (by their
// Kubernetes label depKey; "" = without one) that no Pod mounts (through a projected or a
// configMap volume) and whose last use (annLastUsed, else their creation) is before
// usedBefore.
func unusedSnapshots(cms []kube.ConfigMap, pods []kube.Pod, depKey, deployment string, usedBefore time.Time) []kube.ConfigMap {
	used := map[string]bool{}
	for _, p := range pods {
		for _, v := range p.Spec.Volumes {
			if v.ConfigMap != nil {
				used[v.ConfigMap.Name] = true
			}
			if v.Projected != nil {
				for _, s := range v.Projected.Sources {
					if s.ConfigMap != nil {
						used[s.ConfigMap.Name] = true
					}
				}
			}
		}
	}
	var out []kube.ConfigMap
	for _, cm := range cms {
		if used[cm.Name] || cm.DeletionTimestamp != nil || cm.Labels[labelManagedBy] != managedBy {
			continue
		}
		if dep, ok := cm.Labels[depKey]; deployment == "" && ok || deployment != "" && dep != hashValue(deployment) {
			continue
		}
		last := cm.CreationTimestamp
		if t, err := time.Parse(time.RFC3339Nano, cm.Annotations[annLastUsed]); err == nil {
			last = t
		}
		if last.IsZero() || !last.Before(usedBefore) {
			continue
		}
		out = append(out, cm)
	}
	return out
}
