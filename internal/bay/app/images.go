package app

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// imageCheckTimeout bounds bay's start-up look at the profiles' images.
const imageCheckTimeout = 10 * time.Second

// findMissingImages returns the profile images the platform lacks (none when the driver cannot
// tell or the engine does not answer: the first start then says what it finds).
func findMissingImages(ctx context.Context, ic bay.ImageChecker, profiles []bay.Profile, log *slog.Logger) []bay.MissingImage {
	ctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
	defer cancel()
	missing, err := bay.FindMissingImages(ctx, ic, profiles...)
	if err != nil {
		log.WarnContext(ctx, "could not check the profiles' images", "err", err)
	}
	return missing
}

// warnMissingImages logs a warning for every profile whose image the engine lacks and bay
// does not build: creates of those profiles are refused (400, with the hint) until it is built.
func warnMissingImages(ctx context.Context, missing []bay.MissingImage, builds *bay.ImageBuilds, log *slog.Logger) {
	for _, m := range missing {
		if _, building := builds.Building(m.Image); building {
			continue
		}
		log.WarnContext(ctx, "profile image missing: creates of this profile are refused until it is built",
			"profile", m.Profile, "image", m.Image, "hint", bay.ImageBuildHint(m.Image))
	}
}

// buildOrder is the order bay builds its own images in: a stand-in before the images it
// stands in for, the small ones first, so that sandboxes are served as early as possible.
var buildOrder = []string{"ship:base", "ship:latest", "gull:latest"}

// planImageBuilds decides which of the missing profile images bay builds itself
// (images.build_missing): those of bay.BuiltImages that are sandbox images, plus the stand-in
// of each when the platform lacks it too. It records them in builds (so creates meanwhile are
// told the image is being built, not that it is missing) together with every stand-in that is
// already present, and returns them in build order.
func planImageBuilds(ctx context.Context, ic bay.ImageChecker, missing []bay.MissingImage, builds *bay.ImageBuilds, log *slog.Logger) []string {
	var plan []string
	add := func(img string) {
		if !slices.Contains(plan, img) {
			plan = append(plan, img)
		}
	}
	for _, m := range missing {
		if !slices.Contains(buildOrder, m.Image) {
			continue // not a sandbox image bay's recipe makes
		}
		if standIn, ok := bay.ImageStandIns[m.Image]; ok {
			cctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
			present, err := ic.ImageExists(cctx, standIn)
			cancel()
			switch {
			case err != nil:
				log.WarnContext(ctx, "could not check a stand-in image", "image", standIn, "err", err)
			case present:
				builds.Start(m.Image, standIn)
			default:
				add(standIn)
			}
		}
		add(m.Image)
	}
	slices.SortStableFunc(plan, func(a, b string) int { return slices.Index(buildOrder, a) - slices.Index(buildOrder, b) })
	for _, img := range plan {
		if _, ok := builds.Building(img); !ok {
			builds.Start(img, "")
		}
		log.InfoContext(ctx, "profile image missing: bay builds it in the background", "image", img)
	}
	return plan
}

// buildImages builds plan's images one at a time (each is CPU-, disk- and network-bound), lets
// the images each one stands in for start on it once it is built, and warms the driver's image
// cache of each (warm may be nil). A failed build is logged with the hint to build it by hand;
// creates of its profiles are then refused like those of any missing image.
func buildImages(ctx context.Context, plan []string, builds *bay.ImageBuilds,
	build func(ctx context.Context, image string, progress io.Writer) error,
	warm func(ctx context.Context, image string), log *slog.Logger) {
	for _, img := range plan {
		began := time.Now()
		progress := &lineLogger{ctx: ctx, log: log.With("image", img)}
		err := build(ctx, img, progress)
		progress.flush()
		builds.Done(img)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.ErrorContext(ctx, "background image build failed: creates of its profiles are refused until it is built",
				"image", img, "err", err, "hint", bay.ImageBuildHint(img))
			continue
		}
		log.InfoContext(ctx, "image built", "image", img, "took_s", time.Since(began).Round(time.Second).Seconds())
		for dependent, standIn := range bay.ImageStandIns {
			if _, building := builds.Building(dependent); building && standIn == img {
				builds.Start(dependent, img)
				log.InfoContext(ctx, "new sessions start on a stand-in until the image is built", "image", dependent, "stand_in", img)
			}
		}
		if warm != nil {
			warm(ctx, img)
		}
	}
}

// lineLogger logs each line written to it (a build's progress) at info.
type lineLogger struct {
	ctx context.Context
	log *slog.Logger
	mu  sync.Mutex
	buf []byte
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.emit(string(l.buf[:i]))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.emit(string(l.buf))
	l.buf = nil
}

func (l *lineLogger) emit(line string) {
	if line = strings.TrimSpace(line); line != "" {
		l.log.InfoContext(l.ctx, "image build", "progress", line)
	}
}
