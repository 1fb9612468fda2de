package app

import (
	"context"
	"log/slog"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/capability"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/learning"
	"github.com/shipyard-dev/shipyard/internal/bay/sandbox"
	"github.com/shipyard-dev/shipyard/internal/bay/skillrel"
)

// skillLifecycle returns the skill lifecycle over the store (nil when the store does not keep
// it) and the browser learning loop (a loop that waits for the end when there is none).
func skillLifecycle(store bay.Store, svc *sandbox.Service, caps *capability.Service, cfg *config.Config, instanceID string,
	log *slog.Logger) (*skillrel.Service, func(context.Context) error) {
	ss, ok := store.(bay.SkillStore)
	if !ok {
		return nil, func(ctx context.Context) error { <-ctx.Done(); return nil }
	}
	skills := skillrel.New(ss, skillrel.Options{Now: svc.Now})
	l := learning.New(store, svc, caps, skills, learning.Options{Config: cfg.BrowserLearning,
		AutoReleaseEnabled: cfg.BrowserAutoReleaseEnabled, Holder: instanceID, Log: log})
	return skills, l.Run
}
