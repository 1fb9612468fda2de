package capability

import (
	"context"
	"encoding/json"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Skills is what browser calls need of the skill lifecycle (internal/bay/skillrel): traces
// are kept as blobs of their owner, and skill runs replay an active release's commands.
type Skills interface {
	// PutBlob stores a JSON object or array; over the size bound it fails payload_too_large.
	PutBlob(ctx context.Context, owner, kind string, payload json.RawMessage) (*bay.Blob, error)
	// GetBlob reads the owner's blob named by a "blob:<id>" reference.
	GetBlob(ctx context.Context, owner, ref string) (*bay.Blob, error)
	// ActiveReplay returns the owner's active release of a skill and the commands to replay.
	ActiveReplay(ctx context.Context, owner, skillKey string) (*bay.SkillRelease, []string, error)
}

// SetSkills installs the skill lifecycle (before serving). Without it, browser calls that ask
// for a trace or for learning, and skill runs, fail with capability_not_supported.
func (s *Service) SetSkills(k Skills) { s.skills = k }

// Learning statuses of a browser history row.
const (
	learnPending = "pending"
	learnSkipped = "skipped"
)

// traceStep is one step of a stored browser trace.
type traceStep struct {
	Kind       string `json:"kind"` // individual_action
	Cmd        string `json:"cmd"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	ExitCode   int    `json:"exit_code"`
	StepIndex  int    `json:"step_index"`
	DurationMS *int64 `json:"duration_ms,omitempty"` // batches only
}

// execTrace is the trace of one browser command.
type execTrace struct {
	Kind  string      `json:"kind"` // browser_exec_trace
	Steps []traceStep `json:"steps"`
}

// batchTrace is the trace of a browser batch.
type batchTrace struct {
	Kind           string      `json:"kind"` // browser_batch_trace
	Steps          []traceStep `json:"steps"`
	TotalSteps     int         `json:"total_steps"`
	CompletedSteps int         `json:"completed_steps"`
	Success        bool        `json:"success"`
	DurationMS     int64       `json:"duration_ms"`
}

// TraceOptions say what a browser call keeps besides its history row.
type TraceOptions struct {
	Learn        bool // the row is queued for browser learning (and a trace is kept for it)
	IncludeTrace bool // the trace's reference is returned to the caller
}

func (o TraceOptions) keep() bool { return o.Learn || o.IncludeTrace }

// checkTraces refuses a call that needs the trace store when there is none, before it runs.
func (s *Service) checkTraces(o TraceOptions) error {
	if o.keep() && s.skills == nil {
		return errNoSkills()
	}
	return nil
}

// recordBrowser stores the trace of a browser call (when o asks for one), then its history row
// with the trace's reference and learning status. It returns the row's id and the reference
// to give the caller (only with IncludeTrace).
func (s *Service) recordBrowser(ctx context.Context, e *bay.Execution, o TraceOptions, trace any) (string, *string, error) {
	status := learnSkipped
	if o.Learn {
		status = learnPending
	}
	e.LearnEnabled, e.LearnStatus = o.Learn, &status
	if o.keep() {
		raw, err := json.Marshal(trace)
		if err != nil {
			return "", nil, bay.Internal("Failed to encode the browser trace", err)
		}
		// Detached like the history row: the browser already acted.
		dctx, cancel := bay.Detached(ctx, 10*time.Second)
		b, err := s.skills.PutBlob(dctx, e.Owner, bay.BlobKindBrowserTrace, raw)
		cancel()
		if err != nil {
			// The browser acted: its history row is kept, without the trace, and the caller
			// learns why there is none.
			failed, msg := "error", "trace not stored: "+bay.ErrorCode(err)
			if o.Learn {
				e.LearnStatus, e.LearnError = &failed, &msg
			}
			if _, rerr := s.insertExecution(ctx, e); rerr != nil {
				return "", nil, rerr
			}
			return "", nil, err
		}
		ref := "blob:" + b.ID
		e.PayloadRef = &ref
	}
	id, err := s.insertExecution(ctx, e)
	if err != nil || !o.IncludeTrace {
		return id, nil, err
	}
	return id, e.PayloadRef, nil
}

// GetTrace returns the owner's trace blob named by ref. The sandbox must be the owner's and
// provide the browser; the trace itself may come from any of the owner's sandboxes.
func (s *Service) GetTrace(ctx context.Context, owner, id, ref string) (*bay.Blob, error) {
	if _, _, err := s.profileWith(ctx, owner, id, bay.CapBrowser); err != nil {
		return nil, err
	}
	if s.skills == nil {
		return nil, errNoSkills()
	}
	return s.skills.GetBlob(ctx, owner, ref)
}

// SkillRunParams are the inputs of RunBrowserSkill (validated: timeout 1..600).
type SkillRunParams struct {
	Timeout      int
	StopOnError  bool
	IncludeTrace bool
	Description  *string
	Tags         *string
}

// SkillRun is the outcome of a skill run: the release replayed and the batch's result.
type SkillRun struct {
	Release *bay.SkillRelease
	*bay.BrowserBatchResult
}

// RunBrowserSkill replays the commands of the owner's active release of skillKey in the
// sandbox's browser like a batch. Its history row is tagged skill:<key>, release:<id> and
// stage:<stage> (besides the caller's tags): those tags feed the release's health.
func (s *Service) RunBrowserSkill(ctx context.Context, owner, id, skillKey string, p SkillRunParams) (*SkillRun, error) {
	if _, _, err := s.profileWith(ctx, owner, id, bay.CapBrowser); err != nil {
		return nil, err
	}
	if s.skills == nil {
		return nil, errNoSkills()
	}
	rel, cmds, err := s.skills.ActiveReplay(ctx, owner, skillKey)
	if err != nil {
		return nil, err
	}
	tags := bay.SkillTagPrefix + skillKey + "," + bay.ReleaseTagPrefix + rel.ID + "," + bay.StageTagPrefix + rel.Stage
	if p.Tags != nil {
		tags += "," + *p.Tags
	}
	res, err := s.ExecBrowserBatch(ctx, owner, id, BrowserBatchParams{Commands: cmds, Timeout: p.Timeout, StopOnError: p.StopOnError,
		Description: p.Description, Tags: &tags, Trace: TraceOptions{IncludeTrace: p.IncludeTrace}})
	if err != nil {
		return nil, err
	}
	return &SkillRun{Release: rel, BrowserBatchResult: res}, nil
}

func errNoSkills() error {
	return bay.Errorf(bay.CodeCapabilityNotSupported, "This bay keeps no skill lifecycle")
}
