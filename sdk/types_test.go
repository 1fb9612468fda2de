package sdk_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/api/shipapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// The result types render as the wire object they were decoded from: the CLI's JSON output
// and the MCP server's structured content print them, and must stay what bay sent. Each case
// is a wire value with every optional field set, and one with every optional field null.
func TestResultTypesRoundTripTheWire(t *testing.T) {
	ts := bayapi.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 123456000, time.UTC))
	std := time.Date(2026, 3, 1, 10, 0, 1, 500000000, time.UTC)
	s := func(v string) *string { return &v }
	i := func(v int) *int { return &v }
	b := func(v bool) *bool { return &v }
	f := func(v float64) *float64 { return &v }
	i64 := func(v int64) *int64 { return &v }
	tp := &ts
	size := int64(7)
	exec := bayapi.ExecResponse{ExecID: "sbx-exec-1", Status: "succeeded", ExitCode: i(0), ErrorReason: "r", ProjectID: "p",
		TaskID: "t", ConversationID: "c", SkillID: "s", SkillVersion: "v", Image: "ship:latest", Kind: "shell", Cmd: "bash",
		Args: []string{"-lc", "true"}, Cwd: "/workspace/work", EnvKeys: []string{"A"}, PolicySnapshot: json.RawMessage(`{"timeout_ms":5}`),
		ArtifactsDir: "a", StdoutPath: "a/stdout.txt", StderrPath: "a/stderr.txt", StdoutTruncated: true, CreatedAt: std,
		StartedAt: &std, EndedAt: &std, DurationMS: 1500}
	summary := bayapi.SkillSummary{Name: "a", Description: "d", Version: "v", Kind: "invocable", HasScripts: true,
		Manifest: &bayapi.ManifestSummary{ID: "a", Name: "A", Inputs: map[string]any{"type": "object"}}, SizeBytes: 9,
		CreatedAt: ts, UploadedBy: "admin", MountPath: "/skills/a", FileCount: 2, ManifestSHA256: "ab"}
	step := bayapi.BrowserStep{Cmd: "get title", Stdout: "T", Stderr: "e", ExitCode: 1, StepIndex: 2, DurationMS: 12}

	cases := []struct {
		name string
		wire any
		into any
	}{
		{"sandbox", bayapi.SandboxResponse{ID: "sandbox-1", Status: "ready", Profile: "p", CargoID: "c", Capabilities: []string{"python"},
			CreatedAt: ts, ExpiresAt: tp, IdleExpiresAt: tp, Network: &bayapi.NetworkPolicy{Mode: "allowlist", Allow: []string{"a.test"}, Deny: []string{}},
			Containers: []bayapi.ContainerRuntime{{Name: "ship", RuntimeType: "ship", Status: "running", Version: s("1"), Capabilities: []string{}, Healthy: b(false)}}},
			new(sdk.Sandbox)},
		{"sandbox, nulls", bayapi.SandboxResponse{ID: "sandbox-1", CreatedAt: ts}, new(sdk.Sandbox)},
		{"sandbox list", bayapi.SandboxList{Items: []bayapi.SandboxResponse{{ID: "a", CreatedAt: ts}}, NextCursor: s("a")}, new(sdk.SandboxList)},
		{"sandbox list, empty", bayapi.SandboxList{Items: []bayapi.SandboxResponse{}}, new(sdk.SandboxList)},
		{"python", bayapi.PythonExecResponse{Success: false, Output: "o", Stdout: "so", Stderr: "se", Error: s("Traceback"),
			Data:        bayapi.PythonExecData{ExecutionCount: i(3), Output: shipapi.PythonOutput{Text: "o", Images: []map[string]string{{"image/png": "AA=="}}}},
			ExecutionID: "exec-1", ExecutionTimeMS: 42, Code: s("1/0"), KernelRestarted: true, KernelNotice: "k", OutputTruncated: true,
			ImagesTruncated: true, ErrorTruncated: true, Notice: "n", TimedOut: true}, new(sdk.PythonResult)},
		{"python, nulls", bayapi.PythonExecResponse{Success: true, Data: bayapi.PythonExecData{Output: shipapi.PythonOutput{Images: []map[string]string{}}}},
			new(sdk.PythonResult)},
		{"shell", bayapi.ShellExecResponse{Success: false, Output: "o", Error: s("e"), ExitCode: -1, ExecutionID: "exec-1", ExecutionTimeMS: 5,
			Command: s("ls"), StdoutTruncated: true, StderrTruncated: true, Notice: "n", TimedOut: true}, new(sdk.ShellResult)},
		{"shell, nulls", bayapi.ShellExecResponse{Success: true}, new(sdk.ShellResult)},
		{"browser", bayapi.BrowserExecResponse{Output: "o", Error: s("e"), ExitCode: 1, ExecutionID: "x", ExecutionTimeMS: 3, TraceRef: s("blob:a")},
			new(sdk.BrowserResult)},
		{"browser, nulls", bayapi.BrowserExecResponse{Success: true}, new(sdk.BrowserResult)},
		{"browser batch", bayapi.BrowserBatchResponse{Results: []bayapi.BrowserStep{step}, TotalSteps: 2, CompletedSteps: 1, DurationMS: 9,
			ExecutionID: "x", ExecutionTimeMS: 10, TraceRef: s("blob:b")}, new(sdk.BrowserBatchResult)},
		{"browser batch, nulls", bayapi.BrowserBatchResponse{Results: []bayapi.BrowserStep{}}, new(sdk.BrowserBatchResult)},
		{"file", shipapi.FileInfo{Name: "a", Path: "/workspace/a", IsFile: true, Size: &size,
			ModifiedTime: float64(time.Date(2026, 3, 1, 10, 0, 0, 987654321, time.UTC).UnixNano()) / 1e9}, new(sdk.FileInfo)},
		{"directory", shipapi.FileInfo{Name: "d", Path: "/workspace/d", IsDir: true, ModifiedTime: 1772359200.25}, new(sdk.FileInfo)},
		{"upload", bayapi.UploadResponse{Status: "ok", Path: "a", Size: 3}, new(sdk.UploadResult)},
		{"history entry", bayapi.ExecutionHistoryEntry{ID: "exec-1", SessionID: s("sess"), ExecType: "python", Code: "1", Success: true,
			ExecutionTimeMS: 4, Output: s(""), Error: s("e"), PayloadRef: s("blob:p"), Description: s("d"), Tags: s("a,b"), Notes: s("n"),
			LearnEnabled: true, LearnStatus: s("pending"), LearnError: s("le"), LearnProcessedAt: tp, CreatedAt: ts,
			Images: []map[string]string{{"image/png": "AA=="}}, ImageCount: 1}, new(sdk.HistoryEntry)},
		{"history entry, nulls", bayapi.ExecutionHistoryEntry{ID: "exec-1", ExecType: "shell", CreatedAt: ts}, new(sdk.HistoryEntry)},
		{"history", bayapi.ExecutionHistoryList{Entries: []bayapi.ExecutionHistoryEntry{{ID: "a", CreatedAt: ts, Output: s("x")}}, Total: 3}, new(sdk.History)},
		{"history, empty", bayapi.ExecutionHistoryList{Entries: []bayapi.ExecutionHistoryEntry{}}, new(sdk.History)},
		{"cargo", bayapi.CargoResponse{ID: "cargo-1", Managed: true, ManagedBySandboxID: s("sandbox-1"), Backend: "docker_volume", SizeLimitMB: 1024,
			CreatedAt: ts, LastAccessedAt: ts, SizeLimitEnforced: b(true), SizeUsedBytes: i64(0)}, new(sdk.Cargo)},
		{"cargo, usage unknown", bayapi.CargoResponse{ID: "cargo-1", CreatedAt: ts, LastAccessedAt: ts, SizeLimitEnforced: b(false)}, new(sdk.Cargo)},
		{"cargo, nulls", bayapi.CargoResponse{ID: "cargo-1", CreatedAt: ts, LastAccessedAt: ts}, new(sdk.Cargo)},
		{"cargo list", bayapi.CargoList{Items: []bayapi.CargoResponse{{ID: "c", CreatedAt: ts, LastAccessedAt: ts}}, NextCursor: s("c")}, new(sdk.CargoList)},
		{"profiles", bayapi.ProfileList{Items: []bayapi.ProfileResponse{{ID: "p", Image: "ship", Resources: bayapi.Resources{CPUs: 1.5, Memory: "1g"},
			Capabilities: []string{}, IdleTimeout: 1800, Description: s("d"),
			Containers: []bayapi.ProfileContainer{{Name: "ship", RuntimeType: "ship", Capabilities: []string{"python"}}}}, {ID: "q"}}}, new(sdk.ProfileList)},
		{"gc run", bayapi.GCRunResponse{Results: []bayapi.GCTaskResult{{TaskName: "idle_session", CleanedCount: 1, Errors: []string{},
			WouldClean: []string{"x"}}}, TotalCleaned: 1, DurationMS: 30}, new(sdk.GCResult)},
		{"gc status", bayapi.GCStatusResponse{Enabled: true, InstanceID: "i", IntervalSeconds: 300,
			Tasks: map[string]bayapi.GCTaskStatus{"orphan_cargo": {Enabled: true}}, LastRunAt: tp}, new(sdk.GCStatus)},
		{"gc status, nulls", bayapi.GCStatusResponse{}, new(sdk.GCStatus)},
		{"metrics", bayapi.SandboxMetrics{SandboxID: "s", Status: "ready", Containers: []bayapi.ContainerMetrics{{Name: "ship", CPUSeconds: 1.25,
			CPULimitCores: f(2), MemoryBytes: 3, MemoryLimitBytes: i64(4), Pids: 5, PidsLimit: i64(6)}, {Name: "gull"}},
			Disk: bayapi.DiskMetrics{UsedBytes: i64(0), LimitBytes: 9}}, new(sdk.SandboxMetrics)},
		{"metrics, idle", bayapi.SandboxMetrics{SandboxID: "s", Status: "idle", Containers: []bayapi.ContainerMetrics{}}, new(sdk.SandboxMetrics)},
		{"job", bayapi.JobResponse{JobID: "job-1", SandboxID: "s", Kind: "shell", Command: "sleep 1", Cwd: s("sub"), Status: "failed",
			ExitCode: i(0), Reason: s("r"), TimeoutSeconds: 60, Description: s("d"), Tags: s("t"), CreatedAt: ts, StartedAt: tp, EndedAt: tp,
			Stdout: bayapi.JobStream{Bytes: 3, Truncated: true}, CreatedArtifacts: []bayapi.Artifact{{Path: "a", Size: 1, SHA256: "ab", Change: "created"}},
			ArtifactsNote: s("n")}, new(sdk.Job)},
		{"job, nulls", bayapi.JobResponse{JobID: "job-1", Status: "running", CreatedAt: ts}, new(sdk.Job)},
		{"job list", bayapi.JobList{Items: []bayapi.JobResponse{{JobID: "j", CreatedAt: ts, CreatedArtifacts: []bayapi.Artifact{}}}, Total: 1}, new(sdk.JobList)},
		{"job output", bayapi.JobOutputResponse{Job: bayapi.JobResponse{JobID: "j", CreatedAt: ts}, Stdout: bayapi.JobChunk{Offset: 1, Next: 2, Data: "x"}},
			new(sdk.JobOutput)},
		{"exec", exec, new(sdk.Exec)},
		{"exec, nulls", bayapi.ExecResponse{ExecID: "x", Status: "queued", CreatedAt: std}, new(sdk.Exec)},
		{"exec list", bayapi.ExecList{Items: []bayapi.ExecResponse{exec}, Total: 1, Limit: 50}, new(sdk.ExecList)},
		{"artifacts", bayapi.ArtifactList{ExecID: "x", Files: []bayapi.ArtifactEntry{{Path: "a", Size: 1, SHA256: "ab"}}, TotalBytes: 1,
			Dropped: []bayapi.ArtifactEntry{{Path: "b"}}, DropReason: "cap", Skipped: []string{"l"}}, new(sdk.Artifacts)},
		{"invoke", bayapi.InvokeSkillResponse{Exec: exec, Outputs: map[string]any{"y": "z"}, OutputsSource: "exec", OutputsValid: b(false),
			OutputsErrors: []bayapi.SchemaViolation{{Pointer: "/y", Message: "m"}}}, new(sdk.InvokeResult)},
		{"invoke, queued", bayapi.InvokeSkillResponse{Exec: bayapi.ExecResponse{ExecID: "x", CreatedAt: std}}, new(sdk.InvokeResult)},
		{"skill list", bayapi.SkillList{Items: []bayapi.SkillSummary{summary, {Name: "k", CreatedAt: ts}}}, new(sdk.SkillList)},
		{"skill detail", bayapi.SkillDetail{SkillSummary: summary, SkillMD: "# a", Manifest: map[string]any{"id": "a"},
			Files: []bayapi.SkillFile{{Path: "SKILL.md", Size: 3, SHA256: "ab", Executable: true, Link: "x"}}}, new(sdk.SkillDetail)},
		{"skill validation", bayapi.SkillValidation{Valid: false, Name: "a", Errors: []bayapi.SkillProblem{{File: "SKILL.md", Field: "name", Message: "m"}},
			Warnings: []bayapi.SkillProblem{}}, new(sdk.SkillValidation)},
		{"skill upload", bayapi.SkillUploadResponse{Skill: summary, Created: true, Warnings: []bayapi.SkillProblem{}}, new(sdk.SkillUpload)},
		{"payload ref", bayapi.PayloadCreated{PayloadRef: "blob:a", Kind: "generic"}, new(sdk.SkillPayloadRef)},
		{"payload", bayapi.PayloadResponse{PayloadRef: "blob:a", Kind: "generic", Payload: json.RawMessage(`{"a":[1]}`)}, new(sdk.SkillPayload)},
		{"candidate", bayapi.SkillCandidateResponse{ID: "sc-1", SkillKey: "k", ScenarioKey: s("sk"), PayloadRef: s("blob:a"), SkillType: "browser",
			AutoReleaseEligible: true, AutoReleaseReason: s("r"), Summary: s("s"), UsageNotes: s("u"), Preconditions: json.RawMessage(`{}`),
			Postconditions: json.RawMessage(`{"b":1}`), SourceExecutionIDs: []string{"exec-1"}, Status: "evaluated", LatestScore: f(0),
			LatestPass: b(true), LastEvaluatedAt: tp, PromotionReleaseID: s("sr-1"), CreatedBy: s("o"), CreatedAt: ts, UpdatedAt: ts,
			IsDeleted: true, DeletedAt: tp, DeletedBy: s("o"), DeleteReason: s("why")}, new(sdk.SkillCandidate)},
		{"candidate, nulls", bayapi.SkillCandidateResponse{ID: "sc-1", SourceExecutionIDs: []string{}, CreatedAt: ts, UpdatedAt: ts,
			Preconditions: json.RawMessage(`null`), Postconditions: json.RawMessage(`null`)}, new(sdk.SkillCandidate)},
		{"candidate list", bayapi.SkillCandidateList{Items: []bayapi.SkillCandidateResponse{}, Total: 0}, new(sdk.SkillCandidateList)},
		{"evaluation", bayapi.SkillEvaluationResponse{ID: "se-1", CandidateID: "sc-1", BenchmarkID: s("b"), Score: f(0.5), Passed: true,
			Report: s("r"), EvaluatedBy: s("o"), CreatedAt: ts}, new(sdk.SkillEvaluation)},
		{"evaluation, nulls", bayapi.SkillEvaluationResponse{ID: "se-1", CreatedAt: ts}, new(sdk.SkillEvaluation)},
		{"release", bayapi.SkillReleaseResponse{ID: "sr-1", SkillKey: "k", CandidateID: "sc-1", Version: 2, Stage: "canary", IsActive: true,
			ReleaseMode: "manual", PromotedBy: s("o"), PromotedAt: ts, RollbackOf: s("sr-0"), AutoPromotedFrom: s("sr-a"), HealthWindowEndAt: tp,
			UpgradeOfReleaseID: s("sr-0"), UpgradeReason: s("u"), ChangeSummary: s("c"), IsDeleted: true, DeletedAt: tp, DeletedBy: s("o"),
			DeleteReason: s("why")}, new(sdk.SkillRelease)},
		{"release list", bayapi.SkillReleaseList{Items: []bayapi.SkillReleaseResponse{{ID: "sr-1", PromotedAt: ts}}, Total: 1}, new(sdk.SkillReleaseList)},
		{"deleted", bayapi.DeletedResponse{ID: "sr-1", DeletedAt: tp, DeletedBy: s("o"), DeleteReason: s("r")}, new(sdk.Deleted)},
		{"deleted, nulls", bayapi.DeletedResponse{ID: "sr-1"}, new(sdk.Deleted)},
		{"release health", bayapi.ReleaseHealthResponse{ReleaseID: "sr-1", SkillKey: "k", Stage: "canary", WindowStartAt: ts, WindowEndAt: ts,
			WindowComplete: true, Samples: 3, SuccessRate: 0.5, ErrorRate: 0.5, P95Duration: 250, BaselineSuccessRate: 1, BaselineSamples: 2,
			SuccessDrop: 0.5, ErrorRateMultiplier: 2, ShouldRollback: true, RollbackReasons: []string{"x"},
			Thresholds: bayapi.HealthThresholds{SuccessDrop: 0.2, ErrorRateMultiplier: 2}}, new(sdk.ReleaseHealth)},
		{"trace", bayapi.BrowserTraceResponse{TraceRef: "blob:t", Trace: json.RawMessage(`{"steps":[]}`)}, new(sdk.BrowserTrace)},
		{"skill run", bayapi.SkillRunResponse{SkillKey: "k", ReleaseID: "sr-1", ExecutionID: "x", ExecutionTimeMS: 7, TraceRef: s("blob:t"),
			Results: []bayapi.BrowserStep{step}, TotalSteps: 1, CompletedSteps: 1, Success: true, DurationMS: 6}, new(sdk.SkillRunResult)},
		{"health", bayapi.HealthResponse{Status: "ok", Version: "1"}, new(sdk.Health)},
		{"job chunk", bayapi.JobChunk{Offset: 1, Next: 3, Data: "ab"}, new(sdk.JobChunk)},
		{"display", bayapi.ExecDisplayEvent{Type: "display_data", Data: map[string]string{"text/plain": "1"}}, new(sdk.Display)},
	}
	for _, tc := range cases {
		want, err := json.Marshal(tc.wire)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, tc.into); err != nil {
			t.Errorf("%s: decode: %v", tc.name, err)
			continue
		}
		got, err := json.Marshal(tc.into)
		if err != nil {
			t.Errorf("%s: encode: %v", tc.name, err)
			continue
		}
		if string(got) != string(want) {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, want)
		}
	}
}

// The plain fields carry the wire's values: times parsed from the offset-less format in UTC,
// milliseconds and seconds as durations, nulls as zero values.
func TestResultTypesPlainFields(t *testing.T) {
	var sb sdk.Sandbox
	if err := json.Unmarshal([]byte(`{"id":"sandbox-1","created_at":"2026-03-01T10:00:00.5","expires_at":null,`+
		`"idle_expires_at":"2026-03-01T11:00:00Z","containers":[{"name":"ship","version":null,"healthy":true}]}`), &sb); err != nil {
		t.Fatal(err)
	}
	if !sb.CreatedAt.Equal(time.Date(2026, 3, 1, 10, 0, 0, 5e8, time.UTC)) || sb.CreatedAt.Location() != time.UTC ||
		!sb.ExpiresAt.IsZero() || sb.IdleExpiresAt.Hour() != 11 || len(sb.Containers) != 1 || sb.Containers[0].Version != "" ||
		sb.Containers[0].Healthy == nil || !*sb.Containers[0].Healthy || sb.Network.Mode != "" {
		t.Errorf("sandbox %+v", sb)
	}
	var py sdk.PythonResult
	if err := json.Unmarshal([]byte(`{"success":false,"error":"boom","execution_time_ms":1500,"data":{"execution_count":null,"output":{"text":"t"}}}`), &py); err != nil {
		t.Fatal(err)
	}
	if py.Error != "boom" || py.ExecutionTime != 1500*time.Millisecond || py.Data.ExecutionCount != 0 || py.Data.Text != "t" || py.Code != "" {
		t.Errorf("python %+v", py)
	}
	var j sdk.Job
	if err := json.Unmarshal([]byte(`{"job_id":"j","status":"running","exit_code":null,"timeout":60,"created_at":"2026-03-01T10:00:00"}`), &j); err != nil {
		t.Fatal(err)
	}
	if j.Exited || j.ExitCode != 0 || j.Timeout != time.Minute || !j.StartedAt.IsZero() || j.CreatedArtifacts != nil {
		t.Errorf("job %+v", j)
	}
	var f sdk.FileInfo
	if err := json.Unmarshal([]byte(`{"name":"d","is_dir":true,"size":null,"modified_time":1772359200.25}`), &f); err != nil {
		t.Fatal(err)
	}
	if f.Size != 0 || !f.Modified.Equal(time.Unix(1772359200, 25e7)) {
		t.Errorf("file %+v", f)
	}
	var p sdk.ProfileList
	if err := json.Unmarshal([]byte(`{"items":[{"id":"p","idle_timeout":1800,"description":null}]}`), &p); err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 1 || p.Items[0].IdleTimeout != 30*time.Minute || p.Items[0].Description != "" {
		t.Errorf("profiles %+v", p)
	}
}
