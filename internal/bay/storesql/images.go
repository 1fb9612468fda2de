package storesql

import (
	"encoding/json"
	"fmt"
)

// EncodeImages is the column value of an execution's images: JSON, or nil (NULL) for none.
func EncodeImages(images []map[string]string) *string {
	if len(images) == 0 {
		return nil
	}
	b, err := json.Marshal(images)
	if err != nil {
		return nil // a []map[string]string always marshals
	}
	s := string(b)
	return &s
}

// DecodeImages reads the column back (nil for NULL).
func DecodeImages(col *string) ([]map[string]string, error) {
	if col == nil || *col == "" {
		return nil, nil
	}
	var out []map[string]string
	if err := json.Unmarshal([]byte(*col), &out); err != nil {
		return nil, fmt.Errorf("decode images: %w", err)
	}
	return out, nil
}
