package bay

import (
	"context"
	"sort"
	"strings"
)

// What the services answer. They return these domain values; the HTTP layer alone renders them
// into the wire types of api/bayapi.

// Capabilities a profile may offer.
const (
	CapFilesystem = "filesystem"
	CapShell      = "shell"
	CapPython     = "python"
	CapBrowser    = "browser"
)

// Exec types of execution history.
const (
	ExecPython       = "python"
	ExecShell        = "shell"
	ExecBrowser      = "browser"
	ExecBrowserBatch = "browser_batch"
)

// DefaultProfileID is the profile of a sandbox created without one.
const DefaultProfileID = "python-default"

// DefaultPageLimit is the page size of a list asked for without one.
const DefaultPageLimit = 50

// TxHook is called inside the transaction that makes an effect durable, with the result the
// caller will get; the idempotency layer uses it (through the HTTP layer, which renders the
// result first) to store its record atomically with the effect. An error aborts the
// transaction.
type TxHook[T any] func(ctx context.Context, tx Tx, result T) error

// Page is one page of a list ordered by id; NextCursor is "" on the last page.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// SandboxView is a sandbox as its owner sees it: the row, its status computed at one instant,
// its profile's capabilities and, for a ready sandbox read on its own, a description of each
// container of its session (nil otherwise).
type SandboxView struct {
	*Sandbox
	Status       string
	Capabilities []string
	Containers   []ContainerView
	// Network is the policy the sandbox's compute runs under: its own, else its profile's.
	Network NetworkPolicy
}

// ContainerView describes one container of a ready session. Version and Healthy are nil when
// the runtime did not answer in time.
type ContainerView struct {
	Name         string
	RuntimeType  string
	Status       string
	Version      *string
	Capabilities []string
	Healthy      *bool
}

// ExecutionPage is one page of execution history and the count of every matching entry.
type ExecutionPage struct {
	Entries []*Execution
	Total   int
}

// PythonResult is the outcome of a Python cell. ExecutionTimeMS covers the runtime call only.
type PythonResult struct {
	ExecutionID     string
	Success         bool
	Text            string              // the cell's text output
	Stdout, Stderr  string              // the cell's streams apart
	Images          []map[string]string // [{"image/png": "<base64>"}]
	Error           *string
	ExecutionCount  *int
	ExecutionTimeMS int64
	Code            *string // the code, when the caller asked for it back
	KernelRestarted bool
	KernelNotice    string
	OutputTruncated bool
	ImagesTruncated bool
	ErrorTruncated  bool   // the error was cut at the stderr cap
	Notice          string // what the runtime did on its own to run the call
	TimedOut        bool   // the cell ran past its timeout and was interrupted
}

// ShellResult is the outcome of a shell command. Error is the runtime's error, else the
// command's trimmed stderr, else nil.
type ShellResult struct {
	ExecutionID     string
	Success         bool
	Output          string
	Error           *string
	ExitCode        int
	ExecutionTimeMS int64
	Command         *string // the command, when the caller asked for it back
	StdoutTruncated bool
	StderrTruncated bool
	Notice          string
	TimedOut        bool // the command ran past its timeout and was killed (ExitCode -1)
}

// BrowserResult is the outcome of one browser command.
type BrowserResult struct {
	ExecutionID     string
	Success         bool
	Output          string
	Error           *string
	ExitCode        int
	ExecutionTimeMS int64
	TraceRef        *string // blob:<id> of the stored trace, when asked for
}

// BrowserStep is one command of a browser batch.
type BrowserStep struct {
	Cmd        string
	Stdout     string
	Stderr     string
	ExitCode   int
	StepIndex  int
	DurationMS int64
}

// BrowserBatchResult is the outcome of a browser batch.
type BrowserBatchResult struct {
	ExecutionID     string
	Steps           []BrowserStep
	TotalSteps      int
	CompletedSteps  int
	Success         bool
	DurationMS      int64
	ExecutionTimeMS int64
	TraceRef        *string // blob:<id> of the stored trace, when asked for
}

// FileEntry is one entry of a workspace directory listing.
type FileEntry struct {
	Name         string
	Path         string // absolute, e.g. /workspace/src
	IsFile       bool
	IsDir        bool
	Size         *int64 // nil for directories
	ModifiedTime float64
}

// NormalizeTags normalises a comma-separated tag list: split, trim, drop empty, dedupe, sort,
// join with ","; empty -> nil.
func NormalizeTags(tags *string) *string {
	if tags == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, t := range strings.Split(*tags, ",") {
		t = strings.TrimSpace(t)
		if t != "" && !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.Strings(out)
	j := strings.Join(out, ",")
	return &j
}
