package bay

import (
	"testing"
	"time"
)

func TestPinHolds(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	idle := func() *Sandbox {
		return &Sandbox{ID: "sb", CurrentSessionID: "s1", IdleExpiresAt: &past, ExpiresAt: &past, Version: 3}
	}
	pin := Pin{SandboxID: "sb", SessionID: "s1", Version: 3, Reason: ReasonIdle}
	if !pin.Holds(idle(), now) {
		t.Fatal("idle pin does not hold on its own snapshot")
	}
	for name, mut := range map[string]func(*Sandbox){
		"deleted":     func(s *Sandbox) { s.DeletedAt = &past },
		"keepalive":   func(s *Sandbox) { s.IdleExpiresAt = &future },
		"no deadline": func(s *Sandbox) { s.IdleExpiresAt = nil },
		"new session": func(s *Sandbox) { s.CurrentSessionID = "s2" },
		"version":     func(s *Sandbox) { s.Version = 4 },
		"warm":        func(s *Sandbox) { s.IsWarm = true },
	} {
		s := idle()
		mut(s)
		if pin.Holds(s, now) {
			t.Errorf("idle pin holds after %s", name)
		}
	}
	ttl := Pin{SandboxID: "sb", Reason: ReasonTTL}
	s := idle()
	s.Version = 9
	s.CurrentSessionID = "s9"
	if !ttl.Holds(s, now) {
		t.Error("ttl pin must hold whatever changed but expiry")
	}
	s.ExpiresAt = &future
	if ttl.Holds(s, now) {
		t.Error("ttl pin holds before expiry")
	}
	rot := Pin{SandboxID: "sb", Reason: ReasonRotate}
	if rot.Holds(&Sandbox{ID: "sb", IsWarm: true, WarmState: WarmAvailable}, now) ||
		!rot.Holds(&Sandbox{ID: "sb", IsWarm: true, WarmState: WarmRetiring}, now) ||
		rot.Holds(&Sandbox{ID: "sb", IsWarm: false, WarmState: WarmRetiring}, now) {
		t.Error("rotate pin: only warm retiring sandboxes")
	}
	if (Pin{SandboxID: "sb", Reason: "bogus"}).Holds(&Sandbox{ID: "sb"}, now) || (Pin{SandboxID: "x", Reason: ReasonOrphan}).Holds(&Sandbox{ID: "sb"}, now) {
		t.Error("unknown reason or other sandbox must not hold")
	}
}

func TestStaleStart(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	started := now.Add(-2 * time.Minute)
	s := &Session{ObservedState: SessionStarting, CreatedAt: now, StartedAt: &started}
	if !s.StaleStart(now, time.Minute) || s.StaleStart(now, 3*time.Minute) {
		t.Error("StaleStart uses StartedAt against the bound")
	}
	s.ObservedState = SessionRunning
	if s.StaleStart(now, time.Minute) {
		t.Error("running session is never stale")
	}
}

func TestSessionFromEarlierBoot(t *testing.T) {
	for _, tc := range []struct {
		row, boot string
		want      bool
	}{
		{"bay/aaaa", "bay/bbbb", true},  // an earlier incarnation
		{"bay", "bay/bbbb", true},       // a row naming the instance alone
		{"bay/bbbb", "bay/bbbb", false}, // this very process
		{"other/aaaa", "bay/bbbb", false},
		{"bayx/aaaa", "bay/bbbb", false}, // another instance sharing a prefix
		{"bay/aaaa", "", false},          // no boot id: only the age rule applies
	} {
		s := &Session{InstanceID: tc.row}
		if got := s.FromEarlierBoot("bay", tc.boot); got != tc.want {
			t.Errorf("session of %q, boot %q: %v, want %v", tc.row, tc.boot, got, tc.want)
		}
	}
}
