package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// warnMissingImages logs a warning for every profile whose image the engine lacks: creates
// of those profiles are refused (400, with the hint) until the image is built.
func warnMissingImages(ctx context.Context, drv bay.Driver, profiles []bay.Profile, log *slog.Logger) {
	ic, ok := bay.DriverPort[bay.ImageChecker](drv)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	missing, err := bay.FindMissingImages(ctx, ic, profiles...)
	if err != nil {
		log.WarnContext(ctx, "could not check the profiles' images", "err", err)
	}
	for _, m := range missing {
		log.WarnContext(ctx, "profile image missing: creates of this profile are refused until it is built",
			"profile", m.Profile, "image", m.Image, "hint", bay.ImageBuildHint(m.Image))
	}
}
