package skillrel

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// ActiveReplay returns the owner's active release of a browser skill (the highest version
// when, against the store's rule, there were several) and the commands of its candidate's
// payload, blank ones dropped.
func (s *Service) ActiveReplay(ctx context.Context, owner, skillKey string) (*bay.SkillRelease, []string, error) {
	r := s.store.SkillReads()
	v, err := r.ActiveRelease(ctx, owner, skillKey)
	if bay.IsNotFound(err) {
		return nil, nil, bay.Errorf(bay.CodeNotFound, "No active release found for skill_key: %s", skillKey)
	}
	if err != nil {
		return nil, nil, bay.Internal("Failed to read the active release", err)
	}
	c, err := liveCandidate(ctx, r, owner, v.CandidateID)
	if err != nil {
		return nil, nil, err
	}
	if c.PayloadRef == nil {
		return nil, nil, bay.Errorf(bay.CodeValidation, "Candidate payload must be a JSON object")
	}
	b, err := s.GetBlob(ctx, owner, *c.PayloadRef)
	if err != nil {
		return nil, nil, err
	}
	var doc map[string]json.RawMessage
	if json.Unmarshal(b.Payload, &doc) != nil {
		return nil, nil, bay.Errorf(bay.CodeValidation, "Candidate payload must be a JSON object")
	}
	var raw []any
	if json.Unmarshal(doc["commands"], &raw) != nil || raw == nil {
		return nil, nil, bay.Errorf(bay.CodeValidation, "Candidate payload missing 'commands' array")
	}
	var cmds []string
	for _, x := range raw {
		if c, ok := x.(string); ok && strings.TrimSpace(c) != "" {
			cmds = append(cmds, c)
		}
	}
	if len(cmds) == 0 {
		return nil, nil, bay.Errorf(bay.CodeValidation, "Candidate payload commands must not be empty")
	}
	return v, cmds, nil
}
