package capability

import "context"

// CallRuntime runs call against the authorized endpoint of the container of the owner's
// sandbox that serves capability, starting its compute when needed (and refreshing its idle
// deadline, as every capability call does); a session whose runtime died during the call is
// replaced, and the call is not resent. It returns the id of the session called. The jobs API
// (internal/bay/jobs) reaches ship through it.
func (s *Service) CallRuntime(ctx context.Context, owner, id, capability string, call func(ctx context.Context, endpoint string) error) (sessionID string, err error) {
	_, sess, err := s.invoke(ctx, owner, id, capability, callOpts{}, call)
	if err != nil {
		return "", err
	}
	return sess.ID, nil
}
