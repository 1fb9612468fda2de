package imagebuild

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/shipyard-dev/shipyard/internal/hostlock"
)

// Build makes sure the image of opts exists and the friendly tag points at it.
// Without opts.Force, an existing content tag is reused (nothing is built) and
// an existing root filesystem is reused (only the ImageBuild step runs). With
// opts.Force both steps run again.
//
// Errors say what failed: the ship binary is missing, mmdebstrap is missing or
// failed (archive unreachable, unknown package), the engine is unreachable.
func Build(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	opts, err := opts.withDefaults()
	if err != nil {
		return Result{}, err
	}
	b := &builder{opts: opts, out: opts.Progress, log: opts.Logger}
	res, err := b.run(ctx, start)
	if err != nil {
		b.logf("FAILED after %s", time.Since(start).Round(100*time.Millisecond))
		return Result{}, err
	}
	return res, nil
}

// EnsureImage is Build without Force: the cheap call for tests, benchmarks
// and `make run` that need an up-to-date image. It returns immediately when
// the content tag exists.
func EnsureImage(ctx context.Context, opts Options) (Result, error) {
	opts.Force = false
	return Build(ctx, opts)
}

// NewEngine connects to the Docker engine from the environment (DOCKER_HOST,
// default unix socket) with API version negotiation, and checks that it
// answers.
func NewEngine(ctx context.Context) (*client.Client, error) {
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if err := ping(ctx, c); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func ping(ctx context.Context, e Engine) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := e.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("docker engine unreachable at %s (is dockerd running? may this user use its socket, e.g. /var/run/docker.sock?): %w",
			e.DaemonHost(), err)
	}
	return nil
}

type builder struct {
	opts Options
	out  io.Writer
	log  interface {
		Debug(msg string, args ...any)
		Warn(msg string, args ...any)
	}
	engine Engine
}

func (b *builder) logf(format string, args ...any) {
	fmt.Fprintf(b.out, format+"\n", args...)
}

func (b *builder) run(ctx context.Context, start time.Time) (Result, error) {
	plan, err := newPlan(b.opts)
	if err != nil {
		return Result{}, err
	}
	if w := shipBinaryWarning(plan.ShipBinary); w != "" {
		b.logf("warning: %s", w)
	}
	b.engine = b.opts.Engine
	if b.engine == nil {
		c, err := NewEngine(ctx)
		if err != nil {
			return Result{}, err
		}
		defer c.Close()
		b.engine = c
	} else if err := ping(ctx, b.engine); err != nil {
		return Result{}, err
	}

	// One build per flavour at a time on this machine (parallel test
	// binaries call EnsureImage concurrently); re-check under the lock.
	unlock, err := hostlock.Acquire(ctx, "shipyard-imagebuild-"+string(plan.Flavour), func() {
		b.logf("waiting for another build of the %s image on this machine...", plan.Flavour)
	})
	if err != nil {
		return Result{}, err
	}
	defer unlock()

	res := Result{Tag: plan.Tag, ContentTag: plan.ContentTag, RootfsTag: plan.RootfsTag}
	if !b.opts.Force {
		if img, ok, err := b.inspect(ctx, plan.ContentTag); err != nil {
			return Result{}, err
		} else if ok {
			if err := b.tag(ctx, plan.ContentTag, plan.Tag); err != nil {
				return Result{}, err
			}
			res.ImageID, res.Size, res.Cached, res.RootfsCached = img.ID, img.Size, true, true
			res.Duration = time.Since(start)
			b.logf("%s is up to date: %s (%s, %s)", plan.Tag, plan.ContentTag, humanBytes(img.Size), shortID(img.ID))
			return res, nil
		}
	}

	// With Force the tags move to new images: remember the old ones so that
	// they do not stay behind untagged (the full rootfs is GBs).
	var replaced []string
	if b.opts.Force {
		for _, ref := range []string{plan.ContentTag, plan.RootfsTag} {
			if img, ok, err := b.inspect(ctx, ref); err != nil {
				return Result{}, err
			} else if ok {
				replaced = append(replaced, img.ID)
			}
		}
	}

	b.logf("building %s (%s flavour, Debian %s, %d packages) -> %s", plan.Tag, plan.Flavour, plan.Suite, len(plan.Packages), plan.ContentTag)
	_, rootfsExists, err := b.inspect(ctx, plan.RootfsTag)
	if err != nil {
		return Result{}, err
	}
	if rootfsExists && !b.opts.Force {
		b.logf("[1/2] root filesystem %s: cached", plan.RootfsTag)
		res.RootfsCached = true
	} else {
		if err := b.buildRootfs(ctx, plan); err != nil {
			return Result{}, err
		}
	}
	t := time.Now()
	if err := b.finalStep(ctx, plan); err != nil {
		return Result{}, err
	}
	img, ok, err := b.inspect(ctx, plan.ContentTag)
	if err != nil {
		return Result{}, err
	}
	if !ok {
		return Result{}, fmt.Errorf("the last build step succeeded but %s does not exist", plan.ContentTag)
	}
	b.logf("[2/2] done in %s", roundDuration(time.Since(t)))
	if !b.opts.KeepOld && len(b.opts.PackageFiles) == 0 {
		b.pruneOld(ctx, plan)
		b.removeReplaced(ctx, replaced)
	}
	res.ImageID, res.Size = img.ID, img.Size
	res.Duration = time.Since(start)
	b.logf("built %s = %s (%s, %s) in %s", plan.Tag, plan.ContentTag, humanBytes(img.Size), shortID(img.ID), roundDuration(res.Duration))
	b.log.Debug("image built", "tag", plan.Tag, "content_tag", plan.ContentTag, "size", img.Size, "duration", res.Duration)
	return res, nil
}

type imageInfo struct {
	ID   string
	Size int64
}

// inspect looks an image up by reference; ok is false when it does not exist.
func (b *builder) inspect(ctx context.Context, ref string) (imageInfo, bool, error) {
	l, err := b.engine.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", ref)})
	if err != nil {
		return imageInfo{}, false, fmt.Errorf("list images %s: %w", ref, err)
	}
	for _, s := range l.Items {
		for _, t := range s.RepoTags {
			if t == ref {
				return imageInfo{ID: s.ID, Size: s.Size}, true, nil
			}
		}
	}
	return imageInfo{}, false, nil
}

func (b *builder) tag(ctx context.Context, src, dst string) error {
	if src == dst {
		return nil
	}
	if _, err := b.engine.ImageTag(ctx, client.ImageTagOptions{Source: src, Target: dst}); err != nil {
		return fmt.Errorf("tag %s as %s: %w", src, dst, err)
	}
	return nil
}

// buildRootfs runs mmdebstrap and streams its tar into ImageImport.
func (b *builder) buildRootfs(ctx context.Context, plan Plan) (err error) {
	t := time.Now()
	bin := b.opts.Mmdebstrap
	if bin == "" {
		bin = "mmdebstrap"
	}
	bin, err = exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("mmdebstrap not found (install it: apt-get install mmdebstrap): %w", err)
	}
	mirrors, err := resolveMirrors(b.opts)
	if err != nil {
		return err
	}
	b.logf("[1/2] root filesystem: mmdebstrap %s from %s (security: %s) -> %s",
		plan.Suite, mirrors.Archive, orNone(mirrors.Security), plan.RootfsTag)

	dir, err := os.MkdirTemp("", "shipyard-imagebuild-")
	if err != nil {
		return fmt.Errorf("temp dir for the hook: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // readable from mmdebstrap's unshare mode
		return fmt.Errorf("temp dir for the hook: %w", err)
	}
	hook := filepath.Join(dir, "customize.sh")
	hookData, err := readRecipe(plan, plan.Flavour.spec().hook)
	if err != nil {
		return err
	}
	if err := os.WriteFile(hook, hookData, 0o755); err != nil {
		return fmt.Errorf("write hook: %w", err)
	}

	cmdCtx, cancelCmd := context.WithCancel(ctx)
	defer cancelCmd()
	cmd := exec.CommandContext(cmdCtx, bin, mmdebstrapArgs(plan, mirrors, hook)...)
	cmd.Env = append(os.Environ(), fmt.Sprintf("SOURCE_DATE_EPOCH=%d", plan.sourceDateEpoch))
	// SIGTERM lets mmdebstrap unmount /proc, /dev... of its chroot.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("mmdebstrap stderr: %w", err)
	}
	tarR, tarW := io.Pipe()
	cmd.Stdout = tarW
	filter := newProgressFilter(b.out, b.opts.Verbose)
	b.log.Debug("running mmdebstrap", "args", cmd.Args)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start mmdebstrap: %w", err)
	}
	filterDone := make(chan struct{})
	go func() {
		defer close(filterDone)
		filter.Consume(stderr)
	}()
	cmdDone := make(chan error, 1)
	var mmdebstrapTime time.Duration // written before cmdDone is sent
	go func() {
		<-filterDone // Wait closes stderr: read it all first
		werr := cmd.Wait()
		mmdebstrapTime = time.Since(t)
		if werr != nil {
			tarW.CloseWithError(fmt.Errorf("mmdebstrap: %w", werr))
		} else {
			tarW.Close()
		}
		cmdDone <- werr
	}()

	counter := &countingReader{r: tarR}
	importErr := b.importTar(cmdCtx, counter, plan)
	if importErr != nil {
		// Stop mmdebstrap if it is still writing, then report its failure
		// first: a failed mmdebstrap is the cause of a failed import.
		tarR.CloseWithError(importErr)
		cancelCmd()
	}
	cmdErr := <-cmdDone
	if cmdErr != nil && ctx.Err() == nil {
		errs, tail := filter.Failure()
		if len(errs) > 2 {
			errs = append(errs[:2], fmt.Sprintf("(%d more errors above)", len(errs)-2))
		}
		msg := strings.Join(errs, "; ")
		if msg == "" {
			msg = lastLine(tail)
		}
		err := fmt.Errorf("mmdebstrap failed (%v): %s", cmdErr, msg)
		if hint := failureHint(tail, mirrors); hint != "" {
			err = fmt.Errorf("%w\n  hint: %s", err, hint)
		}
		if !b.opts.Verbose {
			b.logf("  last lines of mmdebstrap:\n%s", indent(tail, "    | "))
		}
		return err
	}
	if importErr != nil {
		return importErr
	}
	if cmdErr != nil {
		return fmt.Errorf("mmdebstrap: %w", cmdErr)
	}
	b.logf("[1/2] root filesystem imported: %s of tar in %s (mmdebstrap finished after %s)",
		humanBytes(counter.n), roundDuration(time.Since(t)), roundDuration(mmdebstrapTime))
	return nil
}

func readRecipe(plan Plan, p string) ([]byte, error) {
	data, err := fs.ReadFile(plan.recipe, p)
	if err != nil {
		return nil, fmt.Errorf("read recipe %s: %w", p, err)
	}
	return data, nil
}

// importTar sends the root filesystem tar to the engine.
func (b *builder) importTar(ctx context.Context, r io.Reader, plan Plan) error {
	resp, err := b.engine.ImageImport(ctx, client.ImageImportSource{Source: r, SourceName: "-"}, plan.RootfsTag,
		client.ImageImportOptions{
			Message: fmt.Sprintf("shipyard %s root filesystem (Debian %s)", plan.Flavour, plan.Suite),
			Changes: append(slices.Clone(plan.Flavour.spec().changes),
				fmt.Sprintf("LABEL %s=%s %s=%s %s=%s", LabelRootfsHash, plan.RootfsHash, LabelFlavour, plan.Flavour, LabelSuite, plan.Suite)),
		})
	if err != nil {
		return fmt.Errorf("import root filesystem into the engine: %w", err)
	}
	defer resp.Close()
	if _, err := decodeStream(resp, nil); err != nil {
		return fmt.Errorf("import root filesystem into the engine: %w", err)
	}
	return nil
}

// finalStep adds /opt/shipyard, SHIP_IMAGE and the labels to the root
// filesystem and tags the result with the content and the friendly tags.
func (b *builder) finalStep(ctx context.Context, plan Plan) error {
	if !b.opts.ClassicBuild {
		b.logf("[2/2] adding %s, skills and labels (ImageLoad of one layer on %s)", plan.Flavour.spec().daemon, plan.RootfsTag)
		err := b.loadImage(ctx, plan)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return err
		}
		b.logf("    %v\n    falling back to the classic builder", err)
	}
	b.logf("[2/2] adding %s, skills and labels (ImageBuild FROM %s)", plan.Flavour.spec().daemon, plan.RootfsTag)
	_, err := b.buildImage(ctx, plan)
	return err
}

// buildImage runs the classic-builder ImageBuild step and returns the image ID.
func (b *builder) buildImage(ctx context.Context, plan Plan) (string, error) {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(plan.WriteContext(pw)) }()
	defer pr.Close()
	tags := []string{plan.ContentTag}
	if plan.Tag != plan.ContentTag {
		tags = append(tags, plan.Tag)
	}
	resp, err := b.engine.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        tags,
		Remove:      true,
		ForceRemove: true,
		NetworkMode: network.NetworkNone,
		Version:     build.BuilderV1,
		NoCache:     b.opts.Force,
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	defer resp.Body.Close()
	id, err := decodeStream(resp.Body, func(m jsonstream.Message) {
		for _, l := range strings.Split(strings.TrimRight(m.Stream, "\n"), "\n") {
			if strings.TrimSpace(l) != "" {
				b.logf("    %s", l)
			}
		}
	})
	if err != nil {
		return "", fmt.Errorf("image build: %w", err)
	}
	return id, nil
}

// decodeStream reads an engine JSON message stream to its end; it returns the
// first error message, and the image ID of an aux message if any.
func decodeStream(r io.Reader, each func(jsonstream.Message)) (string, error) {
	dec := json.NewDecoder(r)
	var id string
	for {
		var m jsonstream.Message
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return id, nil
		} else if err != nil {
			return id, fmt.Errorf("read engine response: %w", err)
		}
		if m.Error != nil {
			return id, fmt.Errorf("engine: %s", m.Error.Message)
		}
		if m.Aux != nil {
			var aux struct{ ID string }
			if json.Unmarshal(*m.Aux, &aux) == nil && aux.ID != "" {
				id = aux.ID
			}
		}
		if strings.HasPrefix(m.Status, "sha256:") {
			id = m.Status
		}
		if each != nil {
			each(m)
		}
	}
}

// pruneContentMinAge protects recent content images from pruning: another
// process (a parallel test binary, another checkout) may have just built one
// from a different ship binary and be about to use it. They are small: all of
// a flavour share the rootfs layer.
const pruneContentMinAge = time.Hour

// pruneOld removes the tags of older images of the same flavour (the images
// themselves go when no tag and no container uses them): rootfs images other
// than the current one, and content images older than pruneContentMinAge.
// Failures (an image used by a container) are only logged.
func (b *builder) pruneOld(ctx context.Context, plan Plan) {
	for _, repo := range []struct {
		repo, keep string
		minAge     time.Duration
	}{
		{plan.Flavour.Repo(), plan.ContentTag, pruneContentMinAge},
		{RootfsRepo, plan.RootfsTag, 0},
	} {
		l, err := b.engine.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("reference", repo.repo+":"+string(plan.Flavour)+"-*")})
		if err != nil {
			b.log.Warn("list old images", "err", err)
			continue
		}
		for _, s := range l.Items {
			if time.Since(time.Unix(s.Created, 0)) < repo.minAge {
				continue
			}
			for _, t := range s.RepoTags {
				if t == repo.keep || !isContentTag(t, repo.repo, plan.Flavour) {
					continue
				}
				if _, err := b.engine.ImageRemove(ctx, t, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
					b.log.Warn("remove old image", "tag", t, "err", err)
					continue
				}
				b.logf("removed old image tag %s", t)
			}
		}
	}
}

// removeReplaced removes images that lost their tags to a forced rebuild,
// unless they are still in use or tagged otherwise (then it only logs).
func (b *builder) removeReplaced(ctx context.Context, ids []string) {
	for _, id := range ids {
		l, err := b.engine.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).Add("dangling", "true")})
		if err != nil {
			b.log.Warn("list dangling images", "err", err)
			return
		}
		if !slices.ContainsFunc(l.Items, func(s image.Summary) bool { return s.ID == id }) {
			continue // still tagged (e.g. the build produced the same image)
		}
		if _, err := b.engine.ImageRemove(ctx, id, client.ImageRemoveOptions{PruneChildren: true}); err != nil {
			b.log.Warn("remove replaced image", "id", id, "err", err)
			continue
		}
		b.logf("removed replaced image %s", shortID(id))
	}
}

func isContentTag(t, repo string, f Flavour) bool {
	rest, ok := strings.CutPrefix(t, repo+":"+string(f)+"-")
	if !ok || len(rest) != 12 {
		return false
	}
	return strings.Trim(rest, "0123456789abcdef") == ""
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(10 * time.Millisecond)
	}
	return d.Round(time.Second)
}

func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n"+prefix)
}
