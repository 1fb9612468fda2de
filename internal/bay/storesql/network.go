package storesql

import (
	"encoding/json"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// EncodeNetwork is the sandboxes.network column of s: its policy as JSON, ” for none (the
// profile's).
func EncodeNetwork(s *bay.Sandbox) string {
	if s.Network == nil {
		return ""
	}
	b, err := json.Marshal(s.Network)
	if err != nil {
		panic("marshal a network policy: " + err.Error()) // strings only: never fails
	}
	return string(b)
}

// DecodeNetwork sets s.Network from the sandboxes.network column.
func DecodeNetwork(s *bay.Sandbox, col string) error {
	if col == "" {
		s.Network = nil
		return nil
	}
	var p bay.NetworkPolicy
	if err := json.Unmarshal([]byte(col), &p); err != nil {
		return fmt.Errorf("sandbox %s: network column: %w", s.ID, err)
	}
	s.Network = &p
	return nil
}
