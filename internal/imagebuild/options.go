// Package imagebuild builds the Shipyard sandbox image without a registry:
// mmdebstrap builds a Debian root filesystem as a tar stream that is imported
// through the Docker Engine API (ImageImport, which also sets the runtime
// configuration: user 1000:1000, /workspace, tini, port 8123), then one layer
// with the static ship binary, the built-in skills and the matplotlibrc is
// added by an ImageLoad of a docker-archive that references the imported
// layer (or, as a fallback, by a classic-builder ImageBuild; see load.go).
//
// Images are tagged by content: ship:<flavour>-<hash12> where the hash covers
// the recipe (package lists, hook, files, skills) and the ship binary, and
// shipyard-rootfs:<flavour>-<hash12> where the hash covers only what goes into
// the root filesystem. An unchanged recipe and binary are never rebuilt, and a
// new ship binary re-runs only the last step (well under a second).
package imagebuild

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// Flavour selects the package set of the image.
type Flavour string

const (
	// FlavourFull is the data-science image (ship:latest).
	FlavourFull Flavour = "full"
	// FlavourBase is the small image for fast tests (ship:base).
	FlavourBase Flavour = "base"
	// FlavourGull is the browser runtime's image (gull:latest): headless
	// Chromium, fonts and the gull daemon; no Python, no Node.
	FlavourGull Flavour = "gull"
	// FlavourBay is the control plane's own image (bay:latest): the static bay binary on a
	// minimal Debian (tini, certificates, nft), for Kubernetes (deploy/kubernetes) and
	// docker-compose (deploy/compose). Not a sandbox image.
	FlavourBay Flavour = "bay"
)

// Flavours lists the known flavours.
var Flavours = []Flavour{FlavourFull, FlavourBase, FlavourGull, FlavourBay}

// flavourSpec is what differs between the flavours.
type flavourSpec struct {
	repo     string   // repository of the content and friendly tags
	tag      string   // friendly tag
	lists    []string // package lists under packages/
	hook     string   // customize hook in the recipe
	daemon   string   // the runtime binary: /opt/shipyard/bin/<daemon>
	binary   string   // its default path on the host
	imageEnv string   // variable naming the content tag in the image (never BAY_*: bay reads those as config)
	filesDir string   // recipe dir copied to /opt/shipyard ("" for none)
	skills   string   // recipe dir copied to /opt/shipyard/skills
	changes  []string // runtime configuration of the imported root filesystem
	// sandboxUser is the image's SHIP_SANDBOX_USER and runtimeCaps its LabelRuntimeCaps: set
	// for the flavours whose runtime separates privileges (ship), empty for the others.
	sandboxUser string
	runtimeCaps string
}

var flavourSpecs = map[Flavour]flavourSpec{
	FlavourFull: {repo: ImageRepo, tag: "ship:latest", lists: []string{"base", "full"}, hook: hookPath,
		daemon: "ship", binary: DefaultShipBinary, imageEnv: "SHIP_IMAGE", filesDir: filesDir, skills: skillsDir, changes: rootfsChanges,
		sandboxUser: SandboxUser, runtimeCaps: RuntimeCaps},
	FlavourBase: {repo: ImageRepo, tag: "ship:base", lists: []string{"base"}, hook: hookPath,
		daemon: "ship", binary: DefaultShipBinary, imageEnv: "SHIP_IMAGE", filesDir: filesDir, skills: skillsDir, changes: rootfsChanges,
		sandboxUser: SandboxUser, runtimeCaps: RuntimeCaps},
	FlavourGull: {repo: GullImageRepo, tag: "gull:latest", lists: []string{"gull"}, hook: gullHookPath,
		daemon: "gull", binary: DefaultGullBinary, imageEnv: "GULL_IMAGE", skills: gullSkillsDir, changes: gullRootfsChanges},
	FlavourBay: {repo: BayImageRepo, tag: "bay:latest", lists: []string{"bay"}, hook: bayHookPath,
		daemon: "bay", binary: DefaultBayBinary, imageEnv: "SHIPYARD_BAY_IMAGE", changes: bayRootfsChanges},
}

func (f Flavour) spec() flavourSpec { return flavourSpecs[f] }

// Valid reports whether f is a known flavour.
func (f Flavour) Valid() bool { _, ok := flavourSpecs[f]; return ok }

// DefaultTag is the friendly tag of a flavour: ship:latest, ship:base,
// gull:latest or bay:latest.
func (f Flavour) DefaultTag() string { return f.spec().tag }

// FlavourOfTag returns the flavour whose friendly tag is tag (ship:latest: full).
func FlavourOfTag(tag string) (Flavour, bool) {
	for _, f := range Flavours {
		if f.DefaultTag() == tag {
			return f, true
		}
	}
	return "", false
}

// Repo is the repository of the flavour's images: ship or gull.
func (f Flavour) Repo() string { return f.spec().repo }

const (
	// DefaultShipBinary is where `make build` puts the static ship binary,
	// DefaultGullBinary the static gull binary.
	DefaultShipBinary = "bin/ship"
	DefaultGullBinary = "bin/gull"
	// DefaultBayBinary is the static bay binary of the bay flavour (`make image-bay` builds it
	// with CGO_ENABLED=0; the bin/bay of `make build` may link the host's libc).
	DefaultBayBinary = "bin/bay-static"
	// DefaultSuite is the Debian release of the root filesystem.
	DefaultSuite = "trixie"
	// DefaultSourceDateEpoch pins file times for reproducible root
	// filesystems (2025-08-09, the release of Debian 13).
	DefaultSourceDateEpoch = 1754697600
	// ImageRepo and RootfsRepo are the repositories of the final and the
	// intermediate (imported) images.
	ImageRepo     = "ship"
	GullImageRepo = "gull"
	BayImageRepo  = "bay"
	RootfsRepo    = "shipyard-rootfs"
	// ShipPort is the port the ship daemon listens on in the container,
	// GullPort the gull daemon's.
	ShipPort = 8123
	GullPort = 8115
	// BayPort is bay's HTTP port in its image (server.port's default).
	BayPort = 8114
	// NoSecurityMirror disables the trixie-security suite.
	NoSecurityMirror = "none"
)

// Labels set on the images.
const (
	LabelFlavour     = "dev.shipyard.image.flavour"
	LabelRecipeHash  = "dev.shipyard.image.recipe-hash"
	LabelRootfsHash  = "dev.shipyard.image.rootfs-hash"
	LabelShipSHA256  = "dev.shipyard.image.ship-sha256"
	LabelSuite       = "dev.shipyard.image.suite"
	LabelContentTag  = "dev.shipyard.image.content-tag"
	LabelBuilderVers = "dev.shipyard.image.builder"
	// LabelHotPaths: see Plan.HotPaths (the Docker driver reads it as docker.LabelHotPaths).
	LabelHotPaths = "dev.shipyard.image.hot-paths"
	// LabelHotPathsKey names the hot paths' content (the root filesystem hash): images that
	// share it share the driver's cache (docker.LabelHotPathsKey).
	LabelHotPathsKey = "dev.shipyard.image.hot-paths-key"
	// LabelRuntimeCaps says the image's runtime separates privileges (internal/ship/privsep):
	// started as root (user 0:0) with every capability dropped but the ones listed
	// (comma-separated) and no-new-privileges, ship switches to its own user keeping only those
	// and runs all user code as 1000:1000 with none. A driver that honours it starts the
	// container that way; started as 1000:1000 the runtime works without the separation.
	LabelRuntimeCaps = "dev.shipyard.image.runtime-caps"
)

// Engine is the part of the Docker Engine API the builder uses;
// *client.Client implements it.
type Engine interface {
	Ping(ctx context.Context, options client.PingOptions) (client.PingResult, error)
	DaemonHost() string
	ImageImport(ctx context.Context, source client.ImageImportSource, ref string, options client.ImageImportOptions) (client.ImageImportResult, error)
	ImageBuild(ctx context.Context, buildContext io.Reader, options client.ImageBuildOptions) (client.ImageBuildResult, error)
	ImageTag(ctx context.Context, options client.ImageTagOptions) (client.ImageTagResult, error)
	ImageList(ctx context.Context, options client.ImageListOptions) (client.ImageListResult, error)
	ImageInspect(ctx context.Context, imageID string, inspectOpts ...client.ImageInspectOption) (client.ImageInspectResult, error)
	ImageRemove(ctx context.Context, imageID string, options client.ImageRemoveOptions) (client.ImageRemoveResult, error)
	ImageLoad(ctx context.Context, input io.Reader, loadOpts ...client.ImageLoadOption) (client.ImageLoadResult, error)
}

var _ Engine = (*client.Client)(nil)

// Options configure Build and EnsureImage. The zero value builds the full
// flavour from bin/ship with the host's Debian mirror.
type Options struct {
	// Flavour is full (default), base, gull or bay.
	Flavour Flavour
	// Tag is the friendly tag pointed at the built image; default
	// Flavour.DefaultTag().
	Tag string
	// ShipBinary is the path of the flavour's static binary: ship (default
	// bin/ship), gull for the gull flavour (default bin/gull), bay for the bay
	// flavour (default bin/bay-static).
	ShipBinary string
	// Mirror is the Debian archive URL (for the trixie and trixie-updates
	// suites); default: the host's apt sources, else deb.debian.org.
	Mirror string
	// SecurityMirror is the URL for trixie-security; default: the host's
	// apt sources when Mirror is not set; NoSecurityMirror disables it.
	SecurityMirror string
	// Suite is the Debian release; default trixie.
	Suite string
	// SourceDateEpoch pins file times in the root filesystem; default
	// DefaultSourceDateEpoch.
	SourceDateEpoch int64
	// Force rebuilds the root filesystem and the image even when images
	// with the same content tags exist.
	Force bool
	// KeepOld keeps older images of the same flavour; by default a
	// successful build removes their tags (the rootfs images are GBs).
	KeepOld bool
	// ClassicBuild makes the last step a classic-builder ImageBuild instead
	// of an ImageLoad of the new layer (slower: see load.go).
	ClassicBuild bool
	// Verbose streams every line mmdebstrap writes instead of a summary.
	Verbose bool
	// Recipe is the recipe tree; default the embedded image.Files.
	Recipe fs.FS
	// PackageFiles are operator recipe files, each a package list like packages/*.txt (one
	// Debian package name per line, `#` comments), whose packages are installed on top of
	// the flavour's: `bay image build --packages FILE`. They are part of the root
	// filesystem's hash, so the content tags change with them. A build with them keeps the
	// other images of the flavour (as KeepOld): they are not its older versions.
	PackageFiles []string
	// Engine talks to Docker; default client.New(client.FromEnv), which
	// negotiates the API version (the engine may be as old as 1.41).
	Engine Engine
	// Mmdebstrap is the mmdebstrap executable; default looked up in PATH.
	Mmdebstrap string
	// AptRoot is where the host's apt sources are read from (tests); default "/".
	AptRoot string
	// Progress receives human-readable progress lines; default io.Discard.
	Progress io.Writer
	// Logger receives structured logs; default slog.Default().
	Logger *slog.Logger
}

// Result describes the image after Build or EnsureImage.
type Result struct {
	// Tag is the friendly tag (ship:latest, ship:base).
	Tag string
	// ContentTag is ship:<flavour>-<hash12>; RootfsTag the imported rootfs.
	ContentTag string
	RootfsTag  string
	// ImageID is the image's ID (sha256:...), Size its size in bytes.
	ImageID string
	Size    int64
	// Cached is true when no build was needed; RootfsCached when only the
	// root filesystem was reused.
	Cached       bool
	RootfsCached bool
	// Duration is the wall time of the call.
	Duration time.Duration
}

// withDefaults validates the options and fills in the defaults that need no
// I/O.
func (o Options) withDefaults() (Options, error) {
	if o.Flavour == "" {
		o.Flavour = FlavourFull
	}
	if !o.Flavour.Valid() {
		return o, fmt.Errorf("unknown flavour %q (want full, base, gull or bay)", o.Flavour)
	}
	if o.Tag == "" {
		o.Tag = o.Flavour.DefaultTag()
	}
	if o.ShipBinary == "" {
		o.ShipBinary = o.Flavour.spec().binary
	}
	if o.Suite == "" {
		o.Suite = DefaultSuite
	}
	if o.SourceDateEpoch == 0 {
		o.SourceDateEpoch = DefaultSourceDateEpoch
	}
	if o.AptRoot == "" {
		o.AptRoot = "/"
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Logger = o.Logger.With("component", "imagebuild")
	for _, m := range []string{o.Mirror, o.SecurityMirror} {
		if m == "" || m == NoSecurityMirror {
			continue
		}
		if err := checkMirrorURL(m); err != nil {
			return o, err
		}
	}
	return o, nil
}

func checkMirrorURL(m string) error {
	u, err := url.Parse(m)
	if err != nil || u.Host == "" && u.Scheme != "file" {
		return fmt.Errorf("mirror %q is not a URL (want e.g. http://deb.debian.org/debian)", m)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https", "file":
		return nil
	}
	return fmt.Errorf("mirror %q: scheme %q not supported (want http, https or file)", m, u.Scheme)
}
