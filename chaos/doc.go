// Package chaos is the reliability suite of Shipyard: it starts the real bay binary with the
// Docker driver and two API keys (two owners), then throws hostile input at every endpoint,
// checks that neither owner reaches the other's objects, abuses the host from inside one
// sandbox while it measures a neighbour, kills and freezes processes and containers, and runs
// concurrent load. Each phase records figures into one report, printed as a markdown table in
// the test log and written to the file named by $CHAOS_REPORT when that is set.
//
// `go test ./chaos` runs the bounded version (a few minutes on 2 cores); `-chaos.long` or
// SHIPYARD_CHAOS=long runs the longer one (`make chaos`). A missing Docker engine or image
// fails the run, it never skips.
package chaos
