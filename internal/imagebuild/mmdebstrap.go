package imagebuild

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// mmdebstrapArgs returns the arguments that make mmdebstrap write the root
// filesystem of p as a tar to stdout. hookScript is the host path of the
// customize hook.
func mmdebstrapArgs(p Plan, m Mirrors, hookScript string) []string {
	args := []string{
		"--variant=" + mmdebstrapVariant,
		"--verbose",
		"--include=" + strings.Join(p.Packages, ","),
	}
	for _, o := range dpkgOpts {
		args = append(args, "--dpkgopt="+o)
	}
	for _, o := range aptOpts {
		args = append(args, "--aptopt="+o)
	}
	if eatmydataHooks != "" {
		args = append(args, "--hook-dir="+eatmydataHooks)
	}
	args = append(args,
		fmt.Sprintf(`--customize-hook=sh %s "$1" %s`, shellQuote(hookScript), p.Flavour),
		p.Suite, "-")
	return append(args, m.Lines(p.Suite)...)
}

// eatmydataHookDir is mmdebstrap's own hook directory that runs dpkg under eatmydata, which
// turns the fsync of every unpacked file into a no-op, and removes eatmydata from the root
// filesystem afterwards, so the content is the same with or without it (it is not part of the
// content tags). The build writes a tar, so a crash loses the build anyway: nothing needs the
// syncs. On this project's machines the full image's unpack phase took minutes of syncs.
const eatmydataHookDir = "/usr/share/mmdebstrap/hooks/eatmydata"

// eatmydataHooks is eatmydataHookDir when the installed mmdebstrap ships it, "" otherwise.
var eatmydataHooks = func() string {
	if st, err := os.Stat(eatmydataHookDir); err == nil && st.IsDir() {
		return eatmydataHookDir
	}
	return ""
}()

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// progressFilter turns mmdebstrap's verbose stderr (apt and dpkg output) into
// a few progress lines: mmdebstrap's own I:/W:/E: lines, apt's size summary,
// and periodic download/install counters. It keeps the last lines for error
// messages.
type progressFilter struct {
	out     io.Writer
	verbose bool
	every   time.Duration
	now     func() time.Time

	mu         sync.Mutex
	tail       []string
	errs       []string
	gets       int
	getBytes   int64
	needBytes  int64
	setups     int
	lastReport time.Time
	phase      string
	seen       map[string]bool
}

const tailLines = 60

func newProgressFilter(out io.Writer, verbose bool) *progressFilter {
	return &progressFilter{out: out, verbose: verbose, every: 5 * time.Second, now: time.Now, seen: map[string]bool{}}
}

var (
	getSize   = regexp.MustCompile(`\[([0-9][0-9,.]*) ?([kMG]?B)\]\s*$`)
	needToGet = regexp.MustCompile(`^Need to get ([0-9][0-9,.]*) ?([kMG]?B)`)
)

// parseAptSize parses apt's human sizes ("72.4 kB", "1,234 B", "30.3 MB").
func parseAptSize(num, unit string) int64 {
	f, err := strconv.ParseFloat(strings.ReplaceAll(num, ",", ""), 64)
	if err != nil {
		return 0
	}
	mult := map[string]float64{"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[unit]
	return int64(f * mult)
}

// Consume reads lines from r until EOF.
func (f *progressFilter) Consume(r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		f.line(sc.Text())
	}
	f.mu.Lock()
	f.reportLocked(true)
	f.mu.Unlock()
}

func (f *progressFilter) line(l string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l = strings.TrimRight(l, "\r")
	f.tail = append(f.tail, l)
	if len(f.tail) > tailLines {
		f.tail = f.tail[len(f.tail)-tailLines:]
	}
	if strings.HasPrefix(l, "E: ") {
		f.errs = append(f.errs, strings.TrimPrefix(l, "E: "))
	}
	if f.verbose {
		fmt.Fprintf(f.out, "    %s\n", l)
		return
	}
	switch {
	case strings.HasPrefix(l, "Get:"):
		f.enterLocked("download")
		f.gets++
		if m := getSize.FindStringSubmatch(l); m != nil {
			f.getBytes += parseAptSize(m[1], m[2])
		}
	case strings.HasPrefix(l, "Setting up "):
		f.enterLocked("install")
		f.setups++
	case strings.HasPrefix(l, "I: "), strings.HasPrefix(l, "W: "), strings.HasPrefix(l, "E: "),
		strings.HasPrefix(l, "Need to get "), strings.HasPrefix(l, "After this operation"),
		strings.HasPrefix(l, "Fetched "):
		if f.seen[l] {
			return // apt and mmdebstrap repeat some lines
		}
		f.seen[l] = true
		f.reportLocked(true)
		if strings.HasPrefix(l, "I: ") || strings.HasPrefix(l, "Need to get ") {
			// A new stage: count its downloads and installs from zero.
			f.gets, f.getBytes, f.needBytes, f.setups = 0, 0, 0, 0
		}
		if m := needToGet.FindStringSubmatch(l); m != nil {
			f.needBytes = parseAptSize(m[1], m[2])
		}
		fmt.Fprintf(f.out, "    %s\n", l)
		return
	default:
		return
	}
	f.reportLocked(false)
}

// enterLocked switches to a counting phase, reporting the previous one.
func (f *progressFilter) enterLocked(phase string) {
	if f.phase != phase {
		f.reportLocked(true)
		f.phase = phase
	}
}

// reportLocked prints the counters when they changed and enough time passed
// (or always when flush is set).
func (f *progressFilter) reportLocked(flush bool) {
	if f.phase == "" {
		return
	}
	if !flush && f.now().Sub(f.lastReport) < f.every {
		return
	}
	switch f.phase {
	case "download":
		if f.needBytes > 0 {
			fmt.Fprintf(f.out, "    fetched %d files (%s of %s)\n", f.gets, humanBytes(f.getBytes), humanBytes(f.needBytes))
		} else {
			fmt.Fprintf(f.out, "    fetched %d files (%s)\n", f.gets, humanBytes(f.getBytes))
		}
	case "install":
		fmt.Fprintf(f.out, "    set up %d packages\n", f.setups)
	}
	f.phase = ""
	f.lastReport = f.now()
}

// Failure summarises mmdebstrap's errors and the last lines of its output.
func (f *progressFilter) Failure() (errs []string, tail string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...), strings.Join(f.tail, "\n")
}

// failureHint says what to do for well-known mmdebstrap failures.
func failureHint(output string, m Mirrors) string {
	switch {
	case containsAny(output, "Could not resolve", "Temporary failure resolving", "Failed to fetch",
		"Unable to connect", "Connection failed", "Could not connect", "404  Not Found", "does not have a Release file"):
		return fmt.Sprintf("the Debian archive is unreachable: check the mirror (%s) or pass --mirror URL", m.Archive)
	case containsAny(output, "Unable to locate package", "has no installation candidate", "unmet dependencies"):
		return "a package in image/packages/*.txt cannot be installed from " + m.Archive
	case containsAny(output, "need to be root", "unshare", "Operation not permitted"):
		return "mmdebstrap needs root (or unprivileged user namespaces for --mode=unshare)"
	case containsAny(output, "customize-hook", "customize.sh"):
		return "the customize hook image/hooks/customize.sh failed"
	}
	return ""
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func humanBytes(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f GB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	}
	return fmt.Sprintf("%d B", n)
}
