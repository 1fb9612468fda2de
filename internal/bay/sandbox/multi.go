package sandbox

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Labels of the containers of a multi-container session (contract 6.7).
const (
	LabelContainerName = "bay.container_name"
	LabelRuntimeType   = "bay.runtime_type"
)

// networkName is the bridge network of a multi-container session: "bay_net_<session_id>".
func networkName(sessionID string) string { return "bay_net_" + sessionID }

// multiContainerName is a container of a multi-container session: "bay-<session_id>-<name>".
func multiContainerName(sessionID, name string) string { return "bay-" + sessionID + "-" + name }

// startMulti starts a multi-container session: a session network, every container created in
// config order (each persisted at once, so that stop finds it), all started in parallel, all
// waited for in parallel (each container's /health within the readiness bound). Any failure
// removes every container and the network (detached) and marks the session failed.
func (s *Service) startMulti(ctx context.Context, sb *bay.Sandbox, prof *bay.Profile, sess *bay.Session, ref string) (*bay.Session, error) {
	log := s.log.With("sandbox_id", sb.ID, "session_id", sess.ID)
	began := time.Now()
	net := networkName(sess.ID)
	var created []bay.SessionContainer
	fail := func(msg string, cause error) error {
		if s.failMulti(ctx, sess, created) {
			return errStoppedWhileStarting(sb.ID)
		}
		log.Error(msg, "err", cause)
		return internal(msg, cause)
	}
	err := s.driver.CreateNetwork(ctx, net, map[string]string{
		bay.LabelManaged: "true", bay.LabelSessionID: sess.ID, bay.LabelSandboxID: sb.ID,
		bay.LabelInstanceID: s.cfg.InstanceID, bay.LabelCreatedAt: s.now().Format(time.RFC3339),
	})
	if err != nil {
		return nil, fail("Failed to create the session network", fmt.Errorf("create network %s: %w", net, err))
	}
	primary := prof.Primary().Name
	for i := range prof.Containers {
		c := &prof.Containers[i]
		spec := s.containerSpec(sb, prof, c, sess, ref)
		spec.Name = multiContainerName(sess.ID, c.Name)
		spec.Hostname = c.Name
		spec.Network = net
		spec.Labels[LabelContainerName] = c.Name
		spec.Labels[LabelRuntimeType] = c.RuntimeType
		spec.Env["BAY_CONTAINER_NAME"] = c.Name
		id, err := s.driver.CreateContainer(ctx, spec)
		if err != nil {
			return nil, fail("Failed to create the runtime containers", fmt.Errorf("create container %s: %w", spec.Name, err))
		}
		caps := append([]string{}, c.Capabilities...)
		sort.Strings(caps)
		created = append(created, bay.SessionContainer{Name: c.Name, ContainerID: id, Status: "created", RuntimeType: c.RuntimeType, Capabilities: caps})
		snapshot := append([]bay.SessionContainer(nil), created...)
		err = s.updateSession(ctx, sess.ID, func(cur *bay.Session) {
			cur.Containers = snapshot
			if c.Name == primary {
				cur.ContainerID = id
			}
		})
		if err != nil {
			s.failMulti(ctx, sess, created)
			return nil, s.startAborted(ctx, sb.ID, sess, err)
		}
	}

	eps := make([]string, len(created))
	errs := make([]error, len(created))
	var wg sync.WaitGroup
	for i := range created {
		wg.Add(1)
		go func() {
			defer wg.Done()
			eps[i], errs[i] = s.driver.StartContainer(ctx, created[i].ContainerID)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fail("Failed to start the runtime containers", fmt.Errorf("start container %s: %w", created[i].Name, err))
		}
	}
	for i, err := range s.waitAllReady(ctx, eps) {
		if err != nil {
			if s.failMulti(ctx, sess, created) {
				return nil, errStoppedWhileStarting(sb.ID)
			}
			log.Warn("runtime failed to become ready", "container", created[i].Name, "err", err)
			e := notReady("Containers not ready: ["+created[i].Name+"]", sb.ID, true)
			e.Err = err
			return nil, e
		}
	}
	now := s.now()
	p := 0
	for i := range created {
		created[i].Endpoint, created[i].Status = eps[i], "running"
		if created[i].Name == primary {
			p = i
		}
	}
	err = s.updateSession(ctx, sess.ID, func(cur *bay.Session) {
		cur.Containers = created
		cur.ContainerID, cur.Endpoint = created[p].ContainerID, created[p].Endpoint
		cur.ObservedState = bay.SessionRunning
		cur.LastObservedAt = &now
	})
	if err != nil {
		s.failMulti(ctx, sess, created)
		return nil, s.startAborted(ctx, sb.ID, sess, err)
	}
	sess.Containers, sess.ContainerID, sess.Endpoint = created, created[p].ContainerID, created[p].Endpoint
	sess.ObservedState, sess.LastObservedAt = bay.SessionRunning, &now
	s.markProbed(sess.ID, now)
	log.Info("session ready", "containers", len(created), "endpoint", sess.Endpoint, "startup_ms", time.Since(began).Milliseconds())
	return sess, nil
}

// waitAllReady waits for every endpoint in parallel and returns one error per endpoint.
func (s *Service) waitAllReady(ctx context.Context, eps []string) []error {
	errs := make([]error, len(eps))
	var wg sync.WaitGroup
	for i := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.waitReady(ctx, eps[i])
		}()
	}
	wg.Wait()
	return errs
}

// failMulti removes every created container and the session network (detached), then marks
// the session failed. It reports whether the session row was gone (stopped meanwhile).
func (s *Service) failMulti(ctx context.Context, sess *bay.Session, created []bay.SessionContainer) bool {
	s.removeMulti(ctx, sess.ID, created)
	return s.failSession(ctx, sess, "")
}

// removeMulti removes the containers of a multi-container session in parallel, then its
// network on a detached context (a cancelled caller must not leak the network).
func (s *Service) removeMulti(ctx context.Context, sessionID string, cs []bay.SessionContainer) {
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { s.removeContainer(ctx, c.ContainerID) })
	}
	wg.Wait()
	dctx, cancel := detached(ctx, s.cfg.StopTimeout)
	defer cancel()
	s.removeNetwork(dctx, networkName(sessionID))
}

// removeNetwork removes a session network; errors are logged (missing is success).
func (s *Service) removeNetwork(ctx context.Context, name string) {
	if err := s.driver.RemoveNetwork(ctx, name); err != nil {
		s.log.Error("remove session network", "network", name, "err", err)
	}
}

// removeSessionResources removes a session's containers (and network), forgetting its caches.
func (s *Service) removeSessionResources(ctx context.Context, sess *bay.Session) {
	s.forgetProbe(sess.ID)
	if sess.Endpoint != "" {
		s.ship.ForgetEndpoint(sess.Endpoint)
	}
	if len(sess.Containers) == 0 {
		s.removeContainer(ctx, sess.ContainerID)
		return
	}
	for _, c := range sess.Containers {
		if c.Endpoint != "" {
			s.ship.ForgetEndpoint(c.Endpoint)
		}
	}
	s.removeMulti(ctx, sess.ID, sess.Containers)
}
