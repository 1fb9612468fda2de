package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// ByteSize is a size in bytes, written as a number of bytes or with a 1024-based suffix
// (k, m, g, t; optionally followed by "i" or "b": "10g", "512Mi", "1GB").
type ByteSize int64

// UnmarshalYAML implements yaml.Unmarshaler.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("expected a size, got %s", describe(n))
	}
	v, err := ParseBytes(n.Value)
	if err != nil {
		return err
	}
	*b = ByteSize(v)
	return nil
}

// ParseBytes parses a size: plain bytes ("1048576") or a number with a 1024-based unit
// ("1g", "512m", "1.5G", "256Ki", "2GB"). Units are case-insensitive. It is the reference's
// memory syntax (k/m/g × 1024) with t and the i/b spellings added.
func ParseBytes(s string) (int64, error) {
	orig := s
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "" {
		return 0, fmt.Errorf("empty size")
	}
	s = strings.TrimSuffix(s, "b")
	s = strings.TrimSuffix(s, "i")
	mult := float64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult != 1 {
			s = strings.TrimSpace(s[:len(s)-1])
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("invalid size %q (want bytes or a number with k/m/g/t, e.g. \"512m\")", orig)
	}
	v := f * mult
	if v >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", orig)
	}
	return int64(v), nil
}
