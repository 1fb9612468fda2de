package bay

import (
	"context"
	"strings"
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
