package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/term"
)

func isTerminal(f *os.File) bool { return term.IsTerminal(int(f.Fd())) }

// progress is a small transfer progress bar drawn on a terminal with "\r"; it is a no-op
// writer when out is nil.
type progress struct {
	mu    sync.Mutex
	out   io.Writer
	label string
	total int64 // -1 = unknown
	n     int64
	start time.Time
	last  time.Time
	now   func() time.Time
}

func newProgress(out io.Writer, label string, total int64) *progress {
	t := time.Now()
	return &progress{out: out, label: label, total: total, start: t, now: time.Now}
}

// Write counts bytes (use it in an io.TeeReader or io.MultiWriter).
func (p *progress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += int64(len(b))
	if p.out != nil {
		if t := p.now(); t.Sub(p.last) >= 100*time.Millisecond {
			p.last = t
			p.drawLocked(false)
		}
	}
	return len(b), nil
}

// Done draws the final state and ends the line.
func (p *progress) Done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.out != nil {
		p.drawLocked(true)
	}
}

func human(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (p *progress) drawLocked(final bool) {
	el := p.now().Sub(p.start).Seconds()
	rate := ""
	if el > 0 {
		rate = human(int64(float64(p.n)/el)) + "/s"
	}
	line := fmt.Sprintf("%s %s", p.label, human(p.n))
	if p.total > 0 {
		const width = 24
		frac := float64(p.n) / float64(p.total)
		frac = min(frac, 1)
		filled := int(frac * width)
		bar := make([]byte, width)
		for i := range bar {
			bar[i] = ' '
			if i < filled {
				bar[i] = '='
			}
		}
		line = fmt.Sprintf("%s [%s] %3.0f%% %s / %s", p.label, bar, frac*100, human(p.n), human(p.total))
	}
	fmt.Fprintf(p.out, "\r%s %s\x1b[K", line, rate)
	if final {
		fmt.Fprintln(p.out)
	}
}
