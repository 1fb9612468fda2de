package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// DefaultTTL is the lifetime of a sandbox created without --ttl, as the MCP server's: a
// forgotten sandbox does not run for ever. --ttl 0 asks for no expiry.
const DefaultTTL = time.Hour

// parseSeconds reads a duration with units ("90s", "30m", "1h30m") or a bare number of
// seconds ("600"), as every duration of the CLI: whole seconds from 0 to bay's MaxTTL.
func parseSeconds(s string) (int, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.Atoi(s); err == nil {
		if n < 0 || n > bayapi.MaxTTL {
			return 0, fmt.Errorf("%q: want 0 to %d seconds", s, bayapi.MaxTTL)
		}
		return n, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration (use units: 90s, 30m, 1h; or a number of seconds)", s)
	}
	if d < 0 || d > bayapi.MaxTTL*time.Second {
		return 0, fmt.Errorf("%q: want 0s to %s", s, time.Duration(bayapi.MaxTTL)*time.Second)
	}
	if d%time.Second != 0 {
		return 0, fmt.Errorf("%q: want whole seconds", s)
	}
	return int(d / time.Second), nil
}

// secondsValue is a flag holding whole seconds, set with parseSeconds.
type secondsValue struct{ n *int }

func (v secondsValue) String() string {
	if v.n == nil {
		return ""
	}
	return (time.Duration(*v.n) * time.Second).String()
}

func (v secondsValue) Set(s string) error {
	n, err := parseSeconds(s)
	if err != nil {
		return err
	}
	*v.n = n
	return nil
}

func (v secondsValue) Type() string { return "duration" }
