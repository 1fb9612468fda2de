package bay

import (
	"context"
	"strings"
	"sync"
)

// ImageChecker is implemented by drivers that can tell whether an image is present on their
// platform (there is no registry: a missing image is never pulled, it must be built). It is
// optional: without it, a missing image is found at the first start.
type ImageChecker interface {
	// ImageExists reports whether ref is present; an error means the platform did not say.
	ImageExists(ctx context.Context, ref string) (bool, error)
}

// BuiltImages maps the tags `bay image build` makes to the command that builds each
// (internal/imagebuild's flavours; a test there keeps the two in step).
var BuiltImages = map[string]string{
	"ship:latest": "bay image build --flavour full (make image)",
	"ship:base":   "bay image build --flavour base (make image-base)",
	"gull:latest": "bay image build --flavour gull (make image-gull)",
	"bay:latest":  "bay image build --flavour bay (make image-bay)",
}

// ImageStandIns maps an image `bay image build` makes to a smaller one of the same recipe
// that new sessions may start on while bay builds the first in the background: ship:base has
// the same runtime as ship:latest with the base package set only.
var ImageStandIns = map[string]string{"ship:latest": "ship:base"}

// ImageBuildHint says how to get image onto the platform.
func ImageBuildHint(image string) string {
	if cmd, ok := BuiltImages[image]; ok {
		return "build it with `" + strings.Replace(cmd, " (", "` (", 1)
	}
	return "build it on the container engine (for example a Dockerfile FROM ship:latest) or change the profile's image"
}

// DriverPort returns d's optional port T (UsageReporter, ImageChecker), looking through
// decorators that expose the driver they wrap with Unwrap() Driver.
func DriverPort[T any](d Driver) (T, bool) {
	for d != nil {
		if p, ok := d.(T); ok {
			return p, true
		}
		u, ok := d.(interface{ Unwrap() Driver })
		if !ok {
			break
		}
		d = u.Unwrap()
	}
	var zero T
	return zero, false
}

// MissingImage is an image of a profile that its platform lacks.
type MissingImage struct {
	Profile string
	Image   string
}

// FindMissingImages asks ic about every image of the profiles (each image once) and returns
// the missing ones in profile order. It stops at the first error.
func FindMissingImages(ctx context.Context, ic ImageChecker, profiles ...Profile) ([]MissingImage, error) {
	known := map[string]bool{}
	var out []MissingImage
	for _, p := range profiles {
		for _, c := range p.Containers {
			present, seen := known[c.Image]
			if !seen {
				ok, err := ic.ImageExists(ctx, c.Image)
				if err != nil {
					return out, err
				}
				known[c.Image], present = ok, ok
			}
			if !present {
				out = append(out, MissingImage{Profile: p.ID, Image: c.Image})
			}
		}
	}
	return out, nil
}

// ImageBuilds tracks the profile images bay builds in the background at start
// (images.build_missing) and, for each, the present image that new sessions start on until it
// is built (ship:base for ship:latest: the same runtime with fewer packages). An image is in
// the set from the moment bay decides to build it until its build ends, successfully or not.
// The zero value is empty and ready; a nil *ImageBuilds is empty and never changes.
type ImageBuilds struct {
	mu       sync.RWMutex
	building map[string]string // image -> stand-in ("" none yet)
}

// Start records that image is being built, with standIn ("" none) for new sessions meanwhile.
// Calling it again for the same image replaces the stand-in.
func (b *ImageBuilds) Start(image, standIn string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.building == nil {
		b.building = map[string]string{}
	}
	b.building[image] = standIn
}

// Done records that image's build ended: new sessions use the image itself (or, if the build
// failed, are refused with the hint to build it, as for any missing image).
func (b *ImageBuilds) Done(image string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.building, image)
}

// Building reports whether image is being built, and its stand-in ("" none).
func (b *ImageBuilds) Building(image string) (standIn string, building bool) {
	if b == nil {
		return "", false
	}
	b.mu.RLock()
	defer b.mu.RUnlock()
	standIn, building = b.building[image]
	return standIn, building
}

// Image is the image a new session's container starts from: image's stand-in while image is
// being built and has one, image otherwise.
func (b *ImageBuilds) Image(image string) string {
	if standIn, ok := b.Building(image); ok && standIn != "" {
		return standIn
	}
	return image
}
