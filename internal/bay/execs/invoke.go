package execs

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
)

// Invocations of invocable skills: the inputs are checked against the manifest's
// interface.inputs and written as inputs.json into the invocation's own inputs directory
// (mounted at /workspace/inputs), then an audited exec runs the manifest's entrypoint in its
// image under the merged policy. Once it is final its outputs are read by one rule:
//
//   - the JSON object the skill wrote to /workspace/artifacts/outputs.json (at most
//     MaxOutputsJSONBytes), when that file exists;
//   - otherwise {exit_code, stdout, stderr} of the exec (stdout and stderr as text, cut at the
//     policy's caps), restricted to the properties interface.outputs declares.
//
// The outputs are then validated against interface.outputs; a mismatch is reported with the
// outputs (OutputsErrors), never hidden nor turned into a failed exec.

// Files of an invocation.
const (
	InputsFile          = "inputs.json"
	OutputsFile         = "outputs.json"
	MaxOutputsJSONBytes = 1 << 20
)

// Where the outputs came from.
const (
	OutputsFromFile = "artifacts/" + OutputsFile
	OutputsFromExec = "exec"
)

// InvokeRequest is one invocation of an invocable skill.
type InvokeRequest struct {
	SkillID        string
	ProjectID      string
	Inputs         json.RawMessage // a JSON object; empty or null = {}
	Overrides      bay.PolicyOverrides
	TaskID         string
	ConversationID string
	Wait           bool
}

// Invocation is an invocation's exec record and, once the exec is final, its outputs.
type Invocation struct {
	Record        *bay.ExecRecord
	Outputs       map[string]any     // nil while the exec is not final, or when outputs.json is unusable
	OutputsSource string             // OutputsFromFile or OutputsFromExec ("" while not final)
	OutputsErrors []skills.Violation // how the outputs fail interface.outputs (empty: they match)
}

// Invoke validates the inputs against the skill's interface (validation_error listing every
// violation with its JSON pointer; nothing is written) and runs the skill as an audited exec.
// With Wait it answers once the exec is final, with its outputs.
func (s *Service) Invoke(ctx context.Context, owner string, req InvokeRequest) (*Invocation, error) {
	sk, err := s.resolveSkill(ctx, req.SkillID)
	if err != nil {
		return nil, err
	}
	iface, err := skills.CompileInterface(sk.skill.Manifest)
	if err != nil {
		return nil, fmt.Errorf("skill %s@%s: %w", sk.skill.Name, sk.skill.Version, err)
	}
	raw := bytes.TrimSpace(req.Inputs)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, invalid("inputs must be a JSON object")
	}
	violations, err := skills.Check(iface.Inputs, raw)
	if err != nil {
		return nil, invalid("inputs: %v", err)
	}
	if len(violations) > 0 {
		return nil, bay.Errorf(bay.CodeValidation, "inputs do not match interface.inputs of skill %s: %d violation(s), listed in details.errors",
			sk.skill.Name, len(violations)).WithDetails(map[string]any{"errors": violations})
	}
	var doc bytes.Buffer
	if err := json.Compact(&doc, raw); err != nil {
		return nil, invalid("inputs: %v", err)
	}
	doc.WriteByte('\n')
	rec, err := s.Create(ctx, owner, Request{
		ProjectID: req.ProjectID, SkillID: sk.skill.Name, Inputs: []RawInput{{Path: InputsFile, Content: doc.Bytes()}},
		Overrides: req.Overrides, TaskID: req.TaskID, ConversationID: req.ConversationID, Wait: req.Wait, skill: sk,
	})
	if err != nil {
		return nil, err
	}
	inv := &Invocation{Record: rec}
	if rec.Status.Final() {
		s.outputs(ctx, inv, sk.manifest, iface)
	}
	return inv, nil
}

// InvocationOf returns the owner's exec as an invocation: its record and, once a skill
// invocation is final, its outputs, read again by the rule against the manifest of the version
// it ran (versions stay in the library's directory after a re-upload or a delete).
func (s *Service) InvocationOf(ctx context.Context, owner, id string) (*Invocation, error) {
	rec, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	inv := &Invocation{Record: rec}
	if rec.Kind != KindSkill || !rec.Status.Final() || rec.SkillVersion == "" || s.cfg.Library == nil {
		return inv, nil
	}
	dir, err := s.cfg.Library.Dir(ctx, rec.SkillVersion)
	if err != nil {
		return nil, fmt.Errorf("skill %s: %w", rec.SkillID, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		return nil, fmt.Errorf("read the manifest of skill %s@%s: %w", rec.SkillID, rec.SkillVersion, err)
	}
	var m skillManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("decode the manifest of skill %s@%s: %w", rec.SkillID, rec.SkillVersion, err)
	}
	iface, err := skills.CompileInterface(data)
	if err != nil {
		return nil, fmt.Errorf("skill %s@%s: %w", rec.SkillID, rec.SkillVersion, err)
	}
	s.outputs(ctx, inv, m, iface)
	return inv, nil
}

// outputs applies the outputs rule to a final invocation and validates the result.
func (s *Service) outputs(ctx context.Context, inv *Invocation, m skillManifest, iface *skills.Interface) {
	rec := inv.Record
	problem := func(format string, a ...any) {
		inv.OutputsErrors = append(inv.OutputsErrors, skills.Violation{Pointer: "/", Message: fmt.Sprintf(format, a...)})
	}
	data, found, err := s.readArtifact(rec, OutputsFile, MaxOutputsJSONBytes)
	switch {
	case err != nil:
		inv.OutputsSource = OutputsFromFile
		problem("%s: %v", OutputsFromFile, err)
		return
	case found:
		inv.OutputsSource = OutputsFromFile
		var out map[string]any
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil || out == nil {
			problem("%s is not a JSON object", OutputsFromFile)
			return
		}
		inv.Outputs = out
	default:
		inv.OutputsSource = OutputsFromExec
		out := map[string]any{}
		if rec.ExitCode != nil {
			out["exit_code"] = *rec.ExitCode
		}
		for key, name := range map[string]string{"stdout": StdoutFile, "stderr": StderrFile} {
			b, _, err := s.readArtifact(rec, name, max(rec.Policy.MaxStdoutBytes, rec.Policy.MaxStderrBytes))
			if err != nil {
				s.log.ErrorContext(ctx, "invocation: read the output", "exec_id", rec.ID, "file", name, "err", err)
			}
			out[key] = strings.ToValidUTF8(string(b), "\uFFFD")
		}
		declared := declaredProperties(m.Interface.Outputs)
		maps.DeleteFunc(out, func(k string, _ any) bool { return !declared[k] })
		inv.Outputs = out
	}
	doc, err := json.Marshal(inv.Outputs)
	if err != nil {
		problem("encode the outputs: %v", err)
		return
	}
	violations, err := skills.Check(iface.Outputs, doc)
	if err != nil {
		problem("%v", err)
		return
	}
	inv.OutputsErrors = append(inv.OutputsErrors, violations...)
}

// readArtifact reads one file of rec's artifacts up to limit bytes; a missing file is not
// found, a larger one an error.
func (s *Service) readArtifact(rec *bay.ExecRecord, name string, limit int64) ([]byte, bool, error) {
	f, size, err := s.cfg.Workspace.OpenArtifact(rec.Owner, rec.ProjectID, rec.ID, name)
	if bay.ErrorCode(err) == bay.CodeFileNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	if size > limit {
		return nil, true, fmt.Errorf("%d bytes, more than %d", size, limit)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit))
	return b, true, err
}

// declaredProperties are the property names of an object schema.
func declaredProperties(schema json.RawMessage) map[string]bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(schema, &s)
	out := map[string]bool{}
	for k := range s.Properties {
		out[k] = true
	}
	return out
}
