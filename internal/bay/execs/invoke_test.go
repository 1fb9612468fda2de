package execs

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/fake"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
)

// TestInvokeRefusals: inputs that fail interface.inputs are refused with every violation and
// its JSON pointer, as are inputs that are not an object and knowledge skills; nothing is
// written and nothing runs.
func TestInvokeRefusals(t *testing.T) {
	sp := &specs{}
	svc, _, root := newSkillService(t, sp)
	var e *bay.Error
	_, err := svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "tight.one", ProjectID: "p", Wait: true,
		Inputs: json.RawMessage(`{"n": 0, "tag": "too long", "extra": true}`)})
	if !errors.As(err, &e) || e.Code != bay.CodeValidation {
		t.Fatalf("bad inputs: %v", err)
	}
	vs, _ := e.Details["errors"].([]skills.Violation)
	var pointers []string
	for _, v := range vs {
		pointers = append(pointers, v.Pointer)
		if v.Message == "" {
			t.Errorf("violation without a message: %+v", v)
		}
	}
	for _, want := range []string{"/", "/n", "/tag"} {
		if !slices.Contains(pointers, want) {
			t.Errorf("no violation at %s: %+v", want, vs)
		}
	}
	cases := map[string]InvokeRequest{
		"missing required": {SkillID: "tight.one", ProjectID: "p"},
		"not an object":    {SkillID: "tight.one", ProjectID: "p", Inputs: json.RawMessage(`[1]`)},
		"malformed":        {SkillID: "tight.one", ProjectID: "p", Inputs: json.RawMessage(`{"n": `)},
		"knowledge skill":  {SkillID: "csv-report", ProjectID: "p", Inputs: json.RawMessage(`{}`)},
		"bad project":      {SkillID: "tight.one", ProjectID: "../p", Inputs: json.RawMessage(`{"n": 1}`)},
	}
	for name, req := range cases {
		if _, err := svc.Invoke(t.Context(), "alice", req); bay.ErrorCode(err) != bay.CodeValidation {
			t.Errorf("%s: %v, want validation_error", name, err)
		}
	}
	if _, err := svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "no.such", ProjectID: "p"}); bay.ErrorCode(err) != bay.CodeNotFound {
		t.Errorf("unknown skill: %v", err)
	}
	if len(sp.all) != 0 {
		t.Fatalf("%d containers ran", len(sp.all))
	}
	if list, total, err := svc.List(t.Context(), "alice", bay.ExecQuery{}); err != nil || total != 0 || len(list) != 0 {
		t.Fatalf("records written: %d, %v", total, err)
	}
	if _, err := os.Stat(filepath.Join(root, "projects")); !os.IsNotExist(err) {
		t.Fatalf("the workspace was written: %v", err)
	}
}

// TestInvokeOutputsRule: without outputs.json the outputs are the exec's exit code and output
// restricted to what interface.outputs declares; outputs.json, when written, is the outputs;
// either is validated and a mismatch is reported with the outputs. The inputs are written as
// inputs.json into the invocation's own inputs directory and the entrypoint is the command.
func TestInvokeOutputsRule(t *testing.T) {
	sp := &specs{out: fake.OneShotResult{Stdout: "hi\n", Stderr: "warn\n"}}
	svc, lib, root := newSkillService(t, sp)
	sk, err := lib.Get(t.Context(), "tight.one")
	if err != nil {
		t.Fatal(err)
	}
	inv, err := svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "tight.one", ProjectID: "p", Wait: true,
		Inputs: json.RawMessage(` {"n": 2,  "tag": "ab"} `)})
	if err != nil {
		t.Fatal(err)
	}
	rec := inv.Record
	if rec.Status != bay.ExecSucceeded || rec.Kind != KindSkill || rec.SkillVersion != sk.Version || rec.Image != "skill-img" ||
		rec.Cmd != "bash" || !slices.Equal(rec.Args, []string{"/skills/tight.one/run.sh", "x"}) {
		t.Fatalf("record: %+v", rec)
	}
	want := map[string]any{"exit_code": 0, "stdout": "hi\n"} // stderr is not declared
	if inv.OutputsSource != OutputsFromExec || len(inv.OutputsErrors) != 0 || len(inv.Outputs) != 2 ||
		inv.Outputs["exit_code"] != want["exit_code"] || inv.Outputs["stdout"] != want["stdout"] {
		t.Fatalf("outputs from the exec: %+v", inv)
	}
	dir := filepath.Join(root, InputsDir("alice", "p", rec.ID, true))
	if b, err := os.ReadFile(filepath.Join(dir, InputsFile)); err != nil || string(b) != `{"n":2,"tag":"ab"}`+"\n" {
		t.Fatalf("inputs.json: %q, %v", b, err)
	}
	var inputsMount *bay.Mount
	for _, m := range sp.last().Mounts {
		if m.Target == MountInputs {
			inputsMount = &m
		}
	}
	if inputsMount == nil || inputsMount.Source != dir || !inputsMount.ReadOnly {
		t.Fatalf("inputs mount: %+v", sp.last().Mounts)
	}

	sp.files = map[string]string{OutputsFile: `{"exit_code": "seven", "extra": [1]}`}
	inv, err = svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "tight.one", ProjectID: "p", Wait: true, Inputs: json.RawMessage(`{"n": 1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if inv.OutputsSource != OutputsFromFile || inv.Outputs["exit_code"] != "seven" || len(inv.OutputsErrors) == 0 || inv.OutputsErrors[0].Pointer != "/exit_code" {
		t.Fatalf("outputs.json failing interface.outputs: %+v", inv)
	}
	again, err := svc.InvocationOf(t.Context(), "alice", inv.Record.ID)
	if err != nil || again.OutputsSource != OutputsFromFile || len(again.OutputsErrors) != len(inv.OutputsErrors) {
		t.Fatalf("the invocation read again: %+v, %v", again, err)
	}

	sp.files = map[string]string{OutputsFile: `[1, 2]`}
	inv, err = svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "tight.one", ProjectID: "p", Wait: true, Inputs: json.RawMessage(`{"n": 1}`)})
	if err != nil || inv.Outputs != nil || len(inv.OutputsErrors) != 1 || inv.OutputsSource != OutputsFromFile {
		t.Fatalf("outputs.json not an object: %+v, %v", inv, err)
	}

	sp.files = nil
	inv, err = svc.Invoke(t.Context(), "alice", InvokeRequest{SkillID: "tight.one", ProjectID: "p", Inputs: json.RawMessage(`{"n": 1}`)})
	if err != nil || inv.Outputs != nil || inv.OutputsSource != "" || inv.Record.Status.Final() {
		t.Fatalf("wait false answers before the outputs: %+v, %v", inv, err)
	}
	waitFinal(t, svc, "alice", inv.Record.ID)
	if _, err := svc.InvocationOf(t.Context(), "bob", inv.Record.ID); bay.ErrorCode(err) != bay.CodeNotFound {
		t.Fatalf("another owner's invocation: %v", err)
	}
}
