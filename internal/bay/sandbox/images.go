package sandbox

import (
	"context"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// imageCheckTimeout bounds the image check of a create: an engine that does not answer in
// time does not block creation (the start then reports what it finds).
const imageCheckTimeout = 5 * time.Second

// checkImages refuses a profile whose image the platform lacks: validation_error (400) with
// details {reason: image_missing, profile, image, hint}, at create time rather than at the
// first call (there is no registry, so the image will not appear by itself). A driver without
// bay.ImageChecker, or an engine that cannot say, lets the create through.
func (s *Service) checkImages(ctx context.Context, prof *bay.Profile) error {
	ic, ok := bay.DriverPort[bay.ImageChecker](s.driver)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
	defer cancel()
	missing, err := bay.FindMissingImages(cctx, ic, *prof)
	if err != nil {
		s.log.WarnContext(ctx, "image check failed; creating anyway", "profile", prof.ID, "err", err)
		return nil
	}
	if len(missing) == 0 {
		return nil
	}
	m := missing[0]
	hint := bay.ImageBuildHint(m.Image)
	return bay.Errorf(bay.CodeValidation, "Image %s of profile %s is not on the container engine: %s", m.Image, m.Profile, hint).
		WithDetails(map[string]any{"reason": "image_missing", "profile": m.Profile, "image": m.Image, "hint": hint})
}

// invalidProfile is the validation_error of an unknown profile: the reference's message
// "Invalid profile: X", followed by the valid ones (also in details.valid_profiles).
func (s *Service) invalidProfile(id string) *bay.Error {
	valid := make([]string, 0, len(s.cfg.Profiles))
	for _, p := range s.cfg.Profiles {
		valid = append(valid, p.ID)
	}
	return bay.Errorf(bay.CodeValidation, "Invalid profile: %s (valid: %s)", id, strings.Join(valid, ", ")).
		WithDetails(map[string]any{"valid_profiles": valid})
}
