package sdk

import (
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

// Request types of the audited execs, skill invocation and the skill lifecycle, with plain
// fields; each becomes its wire body here.

// ExecCommand is the command of an exec: Kind shell runs bash (Args like ["-lc", script]),
// Kind python runs python3 (Args like ["-c", code] or ["/workspace/inputs/main.py"]).
type ExecCommand struct {
	Kind    string
	Command string // "" = the kind's interpreter
	Args    []string
	Cwd     string
	Env     map[string]string
}

// ExecInput is a file bay writes into the project's inputs/ before the exec (sent base64).
type ExecInput struct {
	Path    string
	Content []byte
}

// ExecRequest is the body of POST /v1/sandbox/execs.
type ExecRequest struct {
	ProjectID string
	SkillID   string // "" = no skill
	Exec      ExecCommand
	Inputs    []ExecInput
	// PolicyOverrides holds policy fields (net_mode, timeout_ms, max_stdout_bytes, memory_mb,
	// ...), each of which may only lower what the settings and the skill allow; nil: none.
	PolicyOverrides json.RawMessage
	// TaskID and ConversationID tie the exec to the caller's task (audit only).
	TaskID, ConversationID string
	// NoWait returns the queued record at once instead of waiting for the end.
	NoWait bool
}

func taskRef(taskID, conversationID string) *bayapi.TaskRef {
	if taskID == "" && conversationID == "" {
		return nil
	}
	return &bayapi.TaskRef{TaskID: taskID, ConversationID: conversationID}
}

func wait(noWait bool) *bool {
	if !noWait {
		return nil
	}
	f := false
	return &f
}

func (r *ExecRequest) wire() bayapi.CreateExecRequest {
	return bayapi.CreateExecRequest{ProjectID: r.ProjectID, SkillID: r.SkillID, Exec: bayapi.ExecCommand(r.Exec),
		Inputs: convert(r.Inputs, func(in *ExecInput) bayapi.ExecInput {
			enc := base64.StdEncoding.EncodeToString(in.Content)
			return bayapi.ExecInput{Path: in.Path, ContentBase64: &enc}
		}),
		PolicyOverrides: r.PolicyOverrides, TaskRef: taskRef(r.TaskID, r.ConversationID), Wait: wait(r.NoWait)}
}

// InvokeRequest is the body of POST /v1/skills/{name}/invoke.
type InvokeRequest struct {
	ProjectID string
	// Inputs is a JSON object matching the skill's interface.inputs (nil: none); it is
	// written as /workspace/inputs/inputs.json.
	Inputs json.RawMessage
	// PolicyOverrides, TaskID, ConversationID and NoWait are those of ExecRequest.
	PolicyOverrides        json.RawMessage
	TaskID, ConversationID string
	NoWait                 bool
}

func (r *InvokeRequest) wire() bayapi.InvokeSkillRequest {
	return bayapi.InvokeSkillRequest{ProjectID: r.ProjectID, Inputs: r.Inputs, PolicyOverrides: r.PolicyOverrides,
		TaskRef: taskRef(r.TaskID, r.ConversationID), Wait: wait(r.NoWait)}
}

// CandidateRequest proposes a skill from executions of the caller. Optional text fields are
// not sent when "".
type CandidateRequest struct {
	SkillKey           string
	SourceExecutionIDs []string // at least one
	ScenarioKey        string
	PayloadRef         string
	Summary            string
	UsageNotes         string
	Preconditions      json.RawMessage
	Postconditions     json.RawMessage
}

func (r *CandidateRequest) wire() bayapi.CreateCandidateRequest {
	k := r.SkillKey
	return bayapi.CreateCandidateRequest{SkillKey: &k, SourceExecutionIDs: r.SourceExecutionIDs, ScenarioKey: optStr(r.ScenarioKey),
		PayloadRef: optStr(r.PayloadRef), Summary: optStr(r.Summary), UsageNotes: optStr(r.UsageNotes),
		Preconditions: r.Preconditions, Postconditions: r.Postconditions}
}

// EvaluateRequest records an evaluation of a candidate; a failing one rejects it.
type EvaluateRequest struct {
	Passed bool
	// Score is optional (nil: none); 0 is a score.
	Score       *float64
	BenchmarkID string
	Report      string
}

func (r *EvaluateRequest) wire() bayapi.EvaluateRequest {
	p := r.Passed
	return bayapi.EvaluateRequest{Passed: &p, Score: r.Score, BenchmarkID: optStr(r.BenchmarkID), Report: optStr(r.Report)}
}

// PromoteRequest releases a candidate. Stage is canary or stable ("" = canary).
type PromoteRequest struct {
	Stage              string
	UpgradeOfReleaseID string
	UpgradeReason      string
	ChangeSummary      string
}

func (r *PromoteRequest) wire() bayapi.PromoteRequest {
	return bayapi.PromoteRequest{Stage: optStr(r.Stage), UpgradeOfReleaseID: optStr(r.UpgradeOfReleaseID),
		UpgradeReason: optStr(r.UpgradeReason), ChangeSummary: optStr(r.ChangeSummary)}
}

// SkillRunRequest replays a released browser skill.
type SkillRunRequest struct {
	// Timeout is the budget of the whole replay, 1 s..600 s (whole seconds, rounded up); 0 =
	// bay's default (60 s).
	Timeout time.Duration
	// ContinueOnError runs the remaining steps after a failing one (bay's default stops).
	ContinueOnError bool
	IncludeTrace    bool
	Description     string
	Tags            string
}

func (r *SkillRunRequest) wire() bayapi.SkillRunRequest {
	w := bayapi.SkillRunRequest{Timeout: optSeconds(r.Timeout), IncludeTrace: r.IncludeTrace,
		Description: optStr(r.Description), Tags: optStr(r.Tags)}
	if r.ContinueOnError {
		f := false
		w.StopOnError = &f
	}
	return w
}
