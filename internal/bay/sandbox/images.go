package sandbox

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// imageCheckTimeout bounds the image check of a create: an engine that does not answer in
// time does not block creation (the start then reports what it finds).
const imageCheckTimeout = 5 * time.Second

// imagePresentTTL is how long an image the platform reported present is trusted by the create
// path. Asking the engine on every create cost about a millisecond of the lazy create's
// database-only path (bench/all, lazy create); an image removed within this time is found by
// the first start instead, as without an image checker. A missing image is never remembered:
// once it is built, the next create sees it.
const imagePresentTTL = 30 * time.Second

// imagesSeen remembers when each image was last reported present.
type imagesSeen struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// cachedChecker answers ImageExists from the remembered presence while it is fresh and asks
// the platform otherwise.
type cachedChecker struct {
	ic   bay.ImageChecker
	seen *imagesSeen
	now  time.Time
}

func (c cachedChecker) ImageExists(ctx context.Context, ref string) (bool, error) {
	c.seen.mu.Lock()
	at, ok := c.seen.seen[ref]
	c.seen.mu.Unlock()
	if ok && c.now.Sub(at) < imagePresentTTL && !at.After(c.now) {
		return true, nil
	}
	present, err := c.ic.ImageExists(ctx, ref)
	c.seen.mu.Lock()
	defer c.seen.mu.Unlock()
	if c.seen.seen == nil {
		c.seen.seen = map[string]time.Time{}
	}
	if err == nil && present {
		c.seen.seen[ref] = c.now
	} else {
		delete(c.seen.seen, ref)
	}
	return present, err
}

// checkImages refuses a profile whose image the platform lacks: validation_error (400) with
// details {reason: image_missing, profile, image, hint}, at create time rather than at the
// first call (there is no registry, so the image will not appear by itself). An image bay is
// building itself is no client mistake: it passes when a present stand-in will start in its
// place, and is unavailable (503, reason image_building, retry_after_ms) while it has none. A
// driver without bay.ImageChecker, or an engine that cannot say, lets the create through.
func (s *Service) checkImages(ctx context.Context, prof *bay.Profile) error {
	ic, ok := bay.DriverPort[bay.ImageChecker](s.driver)
	if !ok {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
	defer cancel()
	// The images sessions of this profile would start from now, stand-ins included.
	started := *prof
	started.Containers = slices.Clone(prof.Containers)
	for i := range started.Containers {
		started.Containers[i].Image = s.cfg.ImageBuilds.Image(started.Containers[i].Image)
	}
	missing, err := bay.FindMissingImages(cctx, cachedChecker{ic: ic, seen: &s.images, now: s.now()}, started)
	if err != nil {
		s.log.WarnContext(ctx, "image check failed; creating anyway", "profile", prof.ID, "err", err)
		return nil
	}
	if len(missing) == 0 {
		return nil
	}
	m := missing[0]
	if _, building := s.cfg.ImageBuilds.Building(m.Image); building {
		return bay.Errorf(bay.CodeUnavailable, "Image %s of profile %s is being built by bay; retry in a minute", m.Image, m.Profile).
			WithDetails(map[string]any{"reason": "image_building", "profile": m.Profile, "image": m.Image,
				"retry_after_ms": int(imageBuildingRetryAfter.Milliseconds())})
	}
	hint := bay.ImageBuildHint(m.Image)
	return bay.Errorf(bay.CodeValidation, "Image %s of profile %s is not on the container engine: %s", m.Image, m.Profile, hint).
		WithDetails(map[string]any{"reason": "image_missing", "profile": m.Profile, "image": m.Image, "hint": hint})
}

// checkRuntime refuses a profile whose container runtime the platform lacks (bay.RuntimeMissing:
// validation_error, reason runtime_missing), at create time rather than at the first start. A
// driver without bay.RuntimeChecker, or a platform that cannot say in time, lets the create
// through (the start then reports what it finds).
func (s *Service) checkRuntime(ctx context.Context, prof *bay.Profile) error {
	rc, ok := bay.DriverPort[bay.RuntimeChecker](s.driver)
	if !ok || prof.Runtime == bay.ContainerRuntimeDefault {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, imageCheckTimeout)
	defer cancel()
	err := rc.CheckRuntime(cctx, prof.Runtime)
	if err == nil {
		return nil
	}
	if e := (*bay.Error)(nil); bay.IsRuntimeMissing(err) && errors.As(err, &e) {
		e.Details["profile"] = prof.ID // each check makes a new error
		return e
	}
	s.log.WarnContext(ctx, "runtime check failed; creating anyway", "profile", prof.ID, "runtime", prof.Runtime, "err", err)
	return nil
}

// imageBuildingRetryAfter is the retry hint of a create refused while its image builds: the
// smallest image takes about a minute from scratch.
const imageBuildingRetryAfter = 30 * time.Second

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
