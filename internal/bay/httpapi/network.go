package httpapi

import (
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// networkPolicy converts a request's policy (nil stays nil: the profile's).
func networkPolicy(p *bayapi.NetworkPolicy) *bay.NetworkPolicy {
	if p == nil {
		return nil
	}
	return &bay.NetworkPolicy{Mode: bay.NetworkMode(p.Mode), Allow: p.Allow, Deny: p.Deny}
}

func (s *Server) setNetwork(w http.ResponseWriter, r *http.Request) {
	var req bayapi.NetworkPolicy
	if err := decodeBody(w, r, &req, "mode"); err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.svc.SetNetwork(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"), *networkPolicy(&req))
	replyAs(s, w, r, out, err, renderSandbox)
}

func (s *Server) networkEvents(w http.ResponseWriter, r *http.Request) {
	events, denied, err := s.svc.NetworkEvents(r.Context(), Owner(r.Context()), r.PathValue("sandbox_id"))
	out := &bayapi.NetworkEventList{Items: make([]bayapi.NetworkEvent, 0, len(events)), Denied: denied}
	for _, e := range events {
		out.Items = append(out.Items, bayapi.NetworkEvent{Time: bayapi.NewTime(e.Time), Kind: e.Kind, Host: e.Host, Port: e.Port, Rule: e.Rule})
	}
	s.reply(w, r, out, err)
}

// renderNetwork renders a policy with its effective mode and non-nil lists.
func renderNetwork(p bay.NetworkPolicy) *bayapi.NetworkPolicy {
	out := &bayapi.NetworkPolicy{Mode: string(p.EffectiveMode()), Allow: []string{}, Deny: []string{}}
	out.Allow = append(out.Allow, p.Allow...)
	out.Deny = append(out.Deny, p.Deny...)
	return out
}
