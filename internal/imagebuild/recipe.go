package imagebuild

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	shipimage "github.com/shipyard-dev/shipyard/image"
)

// Format versions: bump them when the Go code changes what is built from the
// same recipe files, so that the content tags change too.
const (
	rootfsFormat = "shipyard-rootfs/1"
	imageFormat  = "shipyard-image/4"
)

// Recipe paths inside Options.Recipe.
const (
	packagesDir = "packages"
	hookPath    = "hooks/customize.sh"
	filesDir    = "files"
	skillsDir   = "skills"
	// The gull flavour's hook and skills.
	gullHookPath  = "gull/customize.sh"
	gullSkillsDir = "gull/skills"
	// The bay flavour's hook (it has no files and no skills).
	bayHookPath  = "bay/customize.sh"
	shipyardDir  = "/opt/shipyard"
	mplConfigDir = shipyardDir + "/mplconfig"
)

// mmdebstrap settings that shape the root filesystem (part of its hash).
var (
	mmdebstrapVariant = "apt"
	dpkgOpts          = []string{
		"path-exclude=/usr/share/doc/*",
		"path-include=/usr/share/doc/*/copyright",
		"path-exclude=/usr/share/man/*",
		"path-exclude=/usr/share/info/*",
		"path-exclude=/usr/share/locale/*",
		"path-exclude=/usr/share/lintian/*",
	}
	aptOpts = []string{`Acquire::Retries "3"`}
)

// Plan is what will be built: the packages, the content hashes and the tags.
// It is computed from the recipe and the ship binary only (no engine, no
// network).
type Plan struct {
	Flavour  Flavour
	Suite    string
	Packages []string
	// RootfsHash covers the package list, the hook and the mmdebstrap
	// settings; ContentHash covers RootfsHash, the files added by the
	// ImageBuild step and the ship binary. Both are hex SHA-256.
	RootfsHash  string
	ContentHash string
	ShipSHA256  string
	RootfsTag   string
	ContentTag  string
	Tag         string
	ShipBinary  string

	sourceDateEpoch int64
	recipe          fs.FS
	ship            []byte
}

// NewPlan reads the recipe and the ship binary and computes the tags. It fails
// when the ship binary is missing (run `make build`).
func NewPlan(opts Options) (Plan, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return Plan{}, err
	}
	return newPlan(opts)
}

func newPlan(opts Options) (Plan, error) {
	recipe := opts.Recipe
	if recipe == nil {
		recipe = shipimage.Files
	}
	p := Plan{
		Flavour:         opts.Flavour,
		Suite:           opts.Suite,
		Tag:             opts.Tag,
		ShipBinary:      opts.ShipBinary,
		sourceDateEpoch: opts.SourceDateEpoch,
		recipe:          recipe,
	}
	spec := opts.Flavour.spec()
	pkgs, err := Packages(recipe, opts.Flavour)
	if err != nil {
		return Plan{}, err
	}
	extra, err := readPackageFiles(opts.PackageFiles)
	if err != nil {
		return Plan{}, err
	}
	pkgs = append(pkgs, extra...)
	slices.Sort(pkgs)
	p.Packages = slices.Compact(pkgs)
	hook, err := fs.ReadFile(recipe, spec.hook)
	if err != nil {
		return Plan{}, fmt.Errorf("read recipe hook: %w", err)
	}
	// Read once: the hash and the image must have the same bytes even if
	// `make build` rewrites the file meanwhile.
	p.ship, err = readShip(opts.ShipBinary)
	if err != nil {
		return Plan{}, err
	}
	shipSum := sha256.Sum256(p.ship)
	p.ShipSHA256 = hex.EncodeToString(shipSum[:])

	h := newHasher(rootfsFormat)
	h.field("arch", runtime.GOARCH)
	h.field("suite", p.Suite)
	h.field("variant", mmdebstrapVariant)
	h.field("flavour", string(p.Flavour))
	h.field("source-date-epoch", strconv.FormatInt(p.sourceDateEpoch, 10))
	h.list("dpkgopts", dpkgOpts)
	h.list("aptopts", aptOpts)
	h.list("changes", spec.changes)
	h.list("packages", p.Packages)
	h.field(spec.hook, string(hook))
	p.RootfsHash = h.sum()
	p.RootfsTag = RootfsRepo + ":" + string(p.Flavour) + "-" + p.RootfsHash[:12]

	h = newHasher(imageFormat)
	h.field("rootfs", p.RootfsHash)
	h.field("dockerfile", p.dockerfileTemplate())
	files, err := contextFiles(recipe, spec)
	if err != nil {
		return Plan{}, err
	}
	for _, f := range files {
		h.field(f.recipePath, string(f.data))
	}
	h.field("ship", p.ShipSHA256)
	h.field("hot-paths", p.HotPaths())
	h.field("sandbox-user", spec.sandboxUser)
	h.field("runtime-caps", spec.runtimeCaps)
	p.ContentHash = h.sum()
	p.ContentTag = spec.repo + ":" + string(p.Flavour) + "-" + p.ContentHash[:12]
	return p, nil
}

// Packages returns the sorted, de-duplicated package list of a flavour: base.txt,
// plus full.txt for the full flavour; gull.txt alone for the gull flavour.
func Packages(recipe fs.FS, f Flavour) ([]string, error) {
	var pkgs []string
	for _, name := range f.spec().lists {
		p := path.Join(packagesDir, name+".txt")
		data, err := fs.ReadFile(recipe, p)
		if err != nil {
			return nil, fmt.Errorf("read package list: %w", err)
		}
		list, err := ParsePackageList(data)
		if err != nil {
			return nil, fmt.Errorf("package list %s: %w", p, err)
		}
		pkgs = append(pkgs, list...)
	}
	slices.Sort(pkgs)
	return slices.Compact(pkgs), nil
}

// Bounds of the operator's package files (Options.PackageFiles).
const (
	maxPackageFileBytes = 1 << 20
	maxExtraPackages    = 2000
)

// readPackageFiles reads the operator's package lists (Options.PackageFiles).
func readPackageFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("package file: %w", err)
		}
		data, err := io.ReadAll(io.LimitReader(f, maxPackageFileBytes+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("package file %s: %w", p, err)
		}
		if len(data) > maxPackageFileBytes {
			return nil, fmt.Errorf("package file %s: larger than %d bytes", p, maxPackageFileBytes)
		}
		list, err := ParsePackageList(data)
		if err != nil {
			return nil, fmt.Errorf("package file %s: %w", p, err)
		}
		out = append(out, list...)
		if len(out) > maxExtraPackages {
			return nil, fmt.Errorf("package files: more than %d packages", maxExtraPackages)
		}
	}
	return out, nil
}

// ParsePackageList parses one package name per line; `#` starts a comment.
func ParsePackageList(data []byte) ([]string, error) {
	var pkgs []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line, _, _ := strings.Cut(sc.Text(), "#")
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		if !validPackageName(line) {
			return nil, fmt.Errorf("line %d: %q is not a Debian package name", n, line)
		}
		pkgs = append(pkgs, line)
	}
	return pkgs, sc.Err()
}

// validPackageName follows Debian policy 5.6.1: [a-z0-9][a-z0-9+.-]+.
func validPackageName(s string) bool {
	if len(s) < 2 {
		return false
	}
	for i, c := range s {
		switch {
		case c >= 'a' && c <= 'z', c >= '0' && c <= '9':
		case i > 0 && (c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// hasher hashes named fields with length prefixes, so that no two different
// field sequences hash the same.
type hasher struct{ buf bytes.Buffer }

func newHasher(format string) *hasher {
	h := &hasher{}
	h.field("format", format)
	return h
}

func (h *hasher) field(name, value string) {
	for _, s := range []string{name, value} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.buf.Write(n[:])
		h.buf.WriteString(s)
	}
}

func (h *hasher) list(name string, values []string) {
	h.field(name, strconv.Itoa(len(values)))
	for _, v := range values {
		h.field("", v)
	}
}

func (h *hasher) sum() string {
	s := sha256.Sum256(h.buf.Bytes())
	return hex.EncodeToString(s[:])
}

func readShip(p string) ([]byte, error) {
	st, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("runtime binary %s not found: build it first with `make build` "+
			"(CGO_ENABLED=0 go build -o bin/ship ./cmd/ship, or ./cmd/gull for the gull flavour) or pass --ship-binary: %w", p, err)
	}
	if err != nil {
		return nil, fmt.Errorf("ship binary: %w", err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("ship binary %s is not a regular file", p)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("read ship binary: %w", err)
	}
	return data, nil
}

// shipBinaryWarning returns a warning when the binary is not a static Linux
// executable for the host architecture (it would not start in the image).
func shipBinaryWarning(p string) string {
	f, err := elf.Open(p)
	if err != nil {
		return fmt.Sprintf("%s is not an ELF executable (%v); the image will not start", p, err)
	}
	defer f.Close()
	want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	if want != 0 && f.Machine != want {
		return fmt.Sprintf("%s is built for %v, not %s", p, f.Machine, runtime.GOARCH)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return fmt.Sprintf("%s is dynamically linked; build it with CGO_ENABLED=0", p)
		}
	}
	return ""
}

// ctxFile is one file of the ImageBuild context.
type ctxFile struct {
	recipePath string // path in the recipe, for the hash
	name       string // path in the build context
	data       []byte
	mode       int64
}

// contextFiles lists the recipe files that the ImageBuild step adds, sorted:
// the flavour's files dir (files/*) and skills dir (skills/** or
// gull/skills/**).
func contextFiles(recipe fs.FS, spec flavourSpec) ([]ctxFile, error) {
	var out []ctxFile
	for _, dir := range []string{spec.filesDir, spec.skills} {
		if dir == "" {
			continue
		}
		err := fs.WalkDir(recipe, dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			if !d.Type().IsRegular() {
				return fmt.Errorf("%s: only regular files are allowed in the recipe", p)
			}
			data, err := fs.ReadFile(recipe, p)
			if err != nil {
				return err
			}
			out = append(out, ctxFile{recipePath: p, name: contextName(p, spec), data: data, mode: 0o644})
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read recipe %s: %w", dir, err)
		}
	}
	slices.SortFunc(out, func(a, b ctxFile) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// rootfsChanges configure the imported root filesystem image. Everything
// that does not depend on the content hash is set here rather than in the
// Dockerfile: the classic builder commits one container per instruction,
// which costs seconds each.
var rootfsChanges = []string{
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
	"ENV HOME=/workspace",
	"ENV USER=shipyard",
	"ENV SHELL=/bin/bash",
	"ENV MPLCONFIGDIR=" + mplConfigDir,
	"ENV MATPLOTLIBRC=" + shipyardDir + "/matplotlibrc",
	"ENV PYDEVD_DISABLE_FILE_VALIDATION=1",
	"USER 1000:1000",
	"WORKDIR /workspace",
	"EXPOSE " + strconv.Itoa(ShipPort) + "/tcp",
	`ENTRYPOINT ["/usr/bin/tini", "--"]`,
	`CMD ["/usr/local/bin/ship"]`,
}

// gullRootfsChanges configure the gull flavour's root filesystem: the same
// user and workspace as ship's, the gull daemon on its port.
var gullRootfsChanges = []string{
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
	"ENV HOME=/workspace",
	"ENV USER=shipyard",
	"USER 1000:1000",
	"WORKDIR /workspace",
	"EXPOSE " + strconv.Itoa(GullPort) + "/tcp",
	`ENTRYPOINT ["/usr/bin/tini", "--"]`,
	`CMD ["/usr/local/bin/gull"]`,
}

// bayRootfsChanges configure the bay flavour's root filesystem: bay as uid 1000 with its data
// directory as the working directory; its configuration is a mounted /etc/bay/config.yaml
// (bay's last default search path) plus BAY_* variables. server.host is not set here: a BAY_*
// variable beats the file, so the deployment says where bay listens.
var bayRootfsChanges = []string{
	"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"ENV LANG=C.UTF-8",
	"ENV HOME=/var/lib/bay",
	"ENV BAY_DATA_DIR=/var/lib/bay",
	"USER 1000:1000",
	"WORKDIR /var/lib/bay",
	"EXPOSE " + strconv.Itoa(BayPort) + "/tcp",
	`ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/bay"]`,
	`CMD ["serve"]`,
}

// contextName maps a recipe path to its build context path: files/X goes to
// shipyard/X, the skills dir's X to shipyard/skills/X (all copied to
// /opt/shipyard).
func contextName(recipePath string, spec flavourSpec) string {
	if spec.filesDir != "" {
		if rest, ok := strings.CutPrefix(recipePath, spec.filesDir+"/"); ok {
			return "shipyard/" + rest
		}
	}
	if rest, ok := strings.CutPrefix(recipePath, spec.skills+"/"); ok {
		return "shipyard/skills/" + rest
	}
	return "shipyard/" + recipePath
}

// dockerfileTemplate is the second build step. It must not pull anything and
// not RUN anything: the base is the imported root filesystem, which already
// has the runtime configuration (rootfsChanges). One COPY puts ship
// (/opt/shipyard/bin/ship, linked from /usr/local/bin/ship by the hook), the
// skills and the matplotlibrc under /opt/shipyard.
const dockerfileTemplate = `FROM {{.RootfsTag}}
COPY shipyard/ {{.ShipyardDir}}/
ENV SHIP_IMAGE={{.ContentTag}}{{.SandboxEnv}}
LABEL {{.Labels}}
`

var dockerfileTmpl = template.Must(template.New("Dockerfile").Option("missingkey=error").Parse(dockerfileTemplate))

// dockerfileTemplate is the flavour's template: ship's names its content tag
// SHIP_IMAGE, gull's GULL_IMAGE.
func (p Plan) dockerfileTemplate() string {
	return strings.Replace(dockerfileTemplate, "SHIP_IMAGE", p.Flavour.spec().imageEnv, 1)
}

// Dockerfile renders the Dockerfile of the ImageBuild step.
func (p Plan) Dockerfile() string {
	tmpl := dockerfileTmpl
	if t := p.dockerfileTemplate(); t != dockerfileTemplate {
		tmpl = template.Must(template.New("Dockerfile").Option("missingkey=error").Parse(t))
	}
	var b strings.Builder
	err := tmpl.Execute(&b, map[string]any{
		"RootfsTag":   p.RootfsTag,
		"ContentTag":  p.ContentTag,
		"ShipyardDir": shipyardDir,
		"SandboxEnv":  p.sandboxEnv(),
		"Labels":      p.labelArgs(),
	})
	if err != nil {
		panic(err) // static template and data
	}
	return b.String()
}

// labelArgs renders Labels as the arguments of one LABEL instruction.
func (p Plan) labelArgs() string {
	labels := p.Labels()
	keys := slices.Sorted(maps.Keys(labels))
	args := make([]string, len(keys))
	for i, k := range keys {
		args[i] = k + "=" + strconv.Quote(labels[k])
	}
	return strings.Join(args, " \\\n      ")
}

// suitePython is the python3 version each supported Debian suite ships.
var suitePython = map[string]string{"bookworm": "3.11", "trixie": "3.13"}

// HotPaths is the LabelHotPaths value: the Python trees every kernel start imports from and
// nothing writes at run time (uid 1000 cannot). Bay's Docker driver may serve them from a
// volume when the engine's storage driver is slow to read (fuse-overlayfs).
func (p Plan) HotPaths() string {
	if p.Flavour == FlavourGull || p.Flavour == FlavourBay {
		return "" // no Python
	}
	paths := []string{"/usr/lib/python3"}
	if v := suitePython[p.Suite]; v != "" {
		paths = append(paths, "/usr/lib/python"+v)
	}
	return strings.Join(paths, ",")
}

// sandboxEnv is the ENV addition of the flavour's sandbox user ("" for none).
func (p Plan) sandboxEnv() string {
	if u := p.Flavour.spec().sandboxUser; u != "" {
		return " SHIP_SANDBOX_USER=" + u
	}
	return ""
}

// SandboxUser is the image's SHIP_SANDBOX_USER: started as root with it, ship
// separates privileges and runs user code as this uid:gid (the user shipyard
// of the hook).
const SandboxUser = "1000:1000"

// RuntimeCaps is the LabelRuntimeCaps value: the capabilities ship keeps to start user code as
// 1000:1000 (SETUID, SETGID) and to signal it (KILL).
const RuntimeCaps = "SETUID,SETGID,KILL"

// Labels are set on the final image.
func (p Plan) Labels() map[string]string {
	l := map[string]string{
		LabelHotPaths:    p.HotPaths(),
		LabelHotPathsKey: p.RootfsHash, // the hot paths come from the root filesystem alone
		LabelFlavour:     string(p.Flavour),
		LabelRecipeHash:  p.ContentHash,
		LabelRootfsHash:  p.RootfsHash,
		LabelShipSHA256:  p.ShipSHA256,
		LabelSuite:       p.Suite,
		LabelContentTag:  p.ContentTag,
		LabelBuilderVers: imageFormat,
		LabelRuntimeCaps: p.Flavour.spec().runtimeCaps,
	}
	if l[LabelRuntimeCaps] == "" {
		delete(l, LabelRuntimeCaps)
	}
	if l[LabelHotPaths] == "" {
		delete(l, LabelHotPaths)
		delete(l, LabelHotPathsKey)
	}
	return l
}

// WriteContext writes the ImageBuild context as a tar: Dockerfile and
// shipyard/{bin/ship,matplotlibrc,skills/...}. Entries are sorted, owned by
// root and dated SOURCE_DATE_EPOCH, so the same plan always gives the same
// bytes.
func (p Plan) WriteContext(w io.Writer) error {
	files, err := p.addedFiles()
	if err != nil {
		return err
	}
	files = append(files, ctxFile{name: "Dockerfile", data: []byte(p.Dockerfile()), mode: 0o644})
	return writeTar(w, files, time.Unix(p.sourceDateEpoch, 0))
}

// WriteLayer writes the image layer added on top of the root filesystem:
// opt/shipyard/{bin/ship,matplotlibrc,skills/...}, like the ImageBuild
// context's COPY would, reproducibly.
func (p Plan) WriteLayer(w io.Writer) error {
	files, err := p.addedFiles()
	if err != nil {
		return err
	}
	for i := range files {
		files[i].name = strings.TrimPrefix(shipyardDir, "/") + strings.TrimPrefix(files[i].name, "shipyard")
	}
	return writeTar(w, files, time.Unix(p.sourceDateEpoch, 0))
}

// addedFiles are the files added on top of the root filesystem, named
// shipyard/... (their path under /opt).
func (p Plan) addedFiles() ([]ctxFile, error) {
	spec := p.Flavour.spec()
	files, err := contextFiles(p.recipe, spec)
	if err != nil {
		return nil, err
	}
	return append(files, ctxFile{name: "shipyard/bin/" + spec.daemon, data: p.ship, mode: 0o755}), nil
}

// writeTar writes files sorted by name, each preceded by its not yet written
// parent directories, owned by root with the given mtime.
func writeTar(w io.Writer, files []ctxFile, mtime time.Time) error {
	files = slices.Clone(files)
	slices.SortFunc(files, func(a, b ctxFile) int { return strings.Compare(a.name, b.name) })
	mtime = mtime.UTC()
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		var parents []string
		for d := path.Dir(f.name); d != "." && d != "/" && !dirs[d]; d = path.Dir(d) {
			parents = append(parents, d)
			dirs[d] = true
		}
		slices.Reverse(parents)
		for _, d := range parents {
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: mtime, Format: tar.FormatPAX}); err != nil {
				return fmt.Errorf("write tar: %w", err)
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: mtime, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("write tar: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return fmt.Errorf("write tar: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write tar: %w", err)
	}
	return nil
}
