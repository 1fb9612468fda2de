package bayapi

import "encoding/json"

// PathSkillInvoke runs an invocable skill as an audited exec (ours).
const PathSkillInvoke = "/v1/skills/{name}/invoke"

// PathExecOutputs is an invocation read again: its record and, once final, its outputs.
const PathExecOutputs = "/v1/sandbox/execs/{exec_id}/outputs"

// InvokeSkillRequest is the body of POST /v1/skills/{name}/invoke. inputs must match the
// skill's interface.inputs; it is written as /workspace/inputs/inputs.json. policy_overrides
// are those of CreateExecRequest (tighten only); wait defaults to true.
type InvokeSkillRequest struct {
	ProjectID       string          `json:"project_id"`
	Inputs          json.RawMessage `json:"inputs,omitempty"`
	PolicyOverrides json.RawMessage `json:"policy_overrides,omitempty"`
	TaskRef         *TaskRef        `json:"task_ref,omitempty"`
	Wait            *bool           `json:"wait,omitempty"`
}

// SchemaViolation is one way a document fails a JSON Schema: the instance's JSON pointer
// ("/" is the whole document) and why.
type SchemaViolation struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// InvokeSkillResponse is an invocation: its exec record and, once the exec is final, the
// outputs (outputs_source "artifacts/outputs.json" when the skill wrote that file, else
// "exec": exit_code, stdout and stderr restricted to what interface.outputs declares), with
// how they fail interface.outputs (outputs_valid false and outputs_errors).
type InvokeSkillResponse struct {
	Exec          ExecResponse      `json:"exec"`
	Outputs       map[string]any    `json:"outputs,omitempty"` // absent until the exec is final
	OutputsSource string            `json:"outputs_source,omitempty"`
	OutputsValid  *bool             `json:"outputs_valid"`
	OutputsErrors []SchemaViolation `json:"outputs_errors,omitempty"`
}
