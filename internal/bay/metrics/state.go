package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// stateTimeout bounds the store reads of one scrape.
const stateTimeout = 5 * time.Second

var (
	descSandboxes = prometheus.NewDesc("bay_sandboxes", "Sandboxes (warm pool excluded) by computed status.", []string{"status"}, nil)
	descSessions  = prometheus.NewDesc("bay_sessions", "Sessions by observed state (starting, running, ...).", []string{"state"}, nil)
	descWarm      = prometheus.NewDesc("bay_warmpool_sandboxes", "Warm-pool sandboxes by profile and warm state (pending, available, retiring).", []string{"profile", "state"}, nil)
	descStateErr  = prometheus.NewDesc("bay_state_scrape_error", "1 when the store could not be read for the gauges of this scrape.", nil, nil)
)

// RegisterState adds the gauges read from store at each scrape: sandboxes by status, sessions
// by state, the warm pool by profile and state. Two queries per scrape, bounded in time.
func (m *Metrics) RegisterState(store bay.Reader) {
	m.reg.MustRegister(&stateCollector{store: store, m: m})
}

type stateCollector struct {
	store bay.Reader
	m     *Metrics
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSandboxes
	ch <- descSessions
	ch <- descWarm
	ch <- descStateErr
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), stateTimeout)
	defer cancel()
	sbs, err := c.store.ListSandboxes(ctx, bay.SandboxQuery{})
	var sessions []*bay.Session
	if err == nil {
		sessions, err = c.store.ListSessions(ctx, bay.SessionQuery{})
	}
	if err != nil {
		c.m.log.Warn("metrics: store not readable", "err", err)
		ch <- prometheus.MustNewConstMetric(descStateErr, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(descStateErr, prometheus.GaugeValue, 0)

	byID := make(map[string]*bay.Session, len(sessions))
	states := map[bay.SessionState]int{bay.SessionPending: 0, bay.SessionStarting: 0, bay.SessionRunning: 0, bay.SessionFailed: 0}
	for _, s := range sessions {
		byID[s.ID] = s
		states[s.ObservedState]++
	}
	for st, n := range states {
		ch <- prometheus.MustNewConstMetric(descSessions, prometheus.GaugeValue, float64(n), string(st))
	}

	now := time.Now().UTC()
	statuses := map[string]int{bay.StatusIdle: 0, bay.StatusStarting: 0, bay.StatusReady: 0, bay.StatusFailed: 0, bay.StatusExpired: 0}
	type warmKey struct{ profile, state string }
	warm := map[warmKey]int{}
	for _, sb := range sbs {
		if sb.IsWarm {
			st := sb.WarmState
			if st == bay.WarmPending {
				st = "pending"
			}
			warm[warmKey{sb.ProfileID, st}]++
			continue
		}
		statuses[bay.ComputeStatus(sb, byID[sb.CurrentSessionID], now)]++
	}
	for st, n := range statuses {
		ch <- prometheus.MustNewConstMetric(descSandboxes, prometheus.GaugeValue, float64(n), st)
	}
	for k, n := range warm {
		ch <- prometheus.MustNewConstMetric(descWarm, prometheus.GaugeValue, float64(n), k.profile, k.state)
	}
}
