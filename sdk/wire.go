package sdk

import (
	"encoding/json"
	"math"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// The SDK's result types have plain fields; this file holds the helpers that convert them from
// and to the wire types of api/bayapi. The rules, the same for every type:
//   - a wire string that may be null is a string; "" is null on the wire;
//   - a wire timestamp is a time.Time in UTC; a null one is the zero time.Time;
//   - a wire count of milliseconds or seconds is a time.Duration;
//   - a slice keeps the wire's distinction between null (nil) and [] (empty, non-nil).
//
// Each result type marshals to JSON as its wire object (MarshalJSON converts it back), so a
// program that prints a result prints what bay sent.

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func wtime(t time.Time) bayapi.Time { return bayapi.NewTime(t) }

func optTime(p *bayapi.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.Time
}

func wOptTime(t time.Time) *bayapi.Time {
	if t.IsZero() {
		return nil
	}
	v := bayapi.NewTime(t)
	return &v
}

// optStdTime is for the wire types that carry a time.Time of their own (RFC 3339).
func optStdTime(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return *p
}

func wOptStdTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

func millis(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func seconds(n int64) time.Duration { return time.Duration(n) * time.Second }

// convert maps a slice, keeping nil nil (null on the wire) and empty empty ([]).
func convert[A, B any](in []A, f func(*A) B) []B {
	if in == nil {
		return nil
	}
	out := make([]B, len(in))
	for i := range in {
		out[i] = f(&in[i])
	}
	return out
}

// decodeAs decodes b as the wire type W and stores its conversion in dst.
func decodeAs[W, T any](b []byte, dst *T, from func(*W) T) error {
	var w W
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*dst = from(&w)
	return nil
}

// unixTime is a wire time in float seconds since the epoch (ship's modified_time) as a
// time.Time, to the nanosecond; unixSeconds gives back the same float64.
func unixTime(f float64) time.Time {
	if f == 0 {
		return time.Time{}
	}
	sec := math.Floor(f)
	ns := math.Round((f - sec) * 1e9)
	return time.Unix(int64(sec), int64(ns)).UTC()
}

func unixSeconds(t time.Time) float64 {
	if t.IsZero() {
		return 0
	}
	return float64(t.Unix()) + float64(t.Nanosecond())/1e9
}
