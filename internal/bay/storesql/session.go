package storesql

import (
	"encoding/json"
	"fmt"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// SessionColumns are the stored form of a session's containers: the containers column's
// argument (the JSON text, or nil for NULL when the session has no containers) and the
// runtime_type, container_id and endpoint columns of its primary container, kept for operators
// reading the table.
func SessionColumns(s *bay.Session) (containers any, runtimeType, containerID, endpoint string, err error) {
	if s.Containers != nil {
		b, err := json.Marshal(s.Containers)
		if err != nil {
			return nil, "", "", "", fmt.Errorf("encode containers: %w", err)
		}
		containers = string(b)
	}
	if p := s.Primary(); p != nil {
		runtimeType, containerID, endpoint = p.RuntimeType, p.ContainerID, p.Endpoint
	}
	return containers, runtimeType, containerID, endpoint, nil
}

// SessionContainers reads a session's containers back from its columns (containers nil: the
// column is NULL). A row without the containers column but with a container id predates the
// column: its primary columns were the whole story.
func SessionContainers(containers []byte, runtimeType, containerID, endpoint string) ([]bay.SessionContainer, error) {
	switch {
	case containers != nil:
		var cs []bay.SessionContainer
		if err := json.Unmarshal(containers, &cs); err != nil {
			return nil, fmt.Errorf("decode containers: %w", err)
		}
		return cs, nil
	case containerID != "":
		status := "created"
		if endpoint != "" {
			status = "running"
		}
		return []bay.SessionContainer{{Name: runtimeType, ContainerID: containerID, Endpoint: endpoint,
			Status: status, RuntimeType: runtimeType}}, nil
	}
	return nil, nil
}
