package skills

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Violation is one way a JSON document fails a skill's interface schema: the instance's JSON
// pointer ("/" is the document) and why.
type Violation struct {
	Pointer string `json:"pointer"`
	Message string `json:"message"`
}

// Interface is an invocable skill's interface.inputs and interface.outputs, compiled.
type Interface struct {
	Inputs, Outputs *jsonschema.Schema
}

// CompileInterface compiles the interface of a stored manifest (validated at upload).
func CompileInterface(manifest []byte) (*Interface, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(manifest))
	if err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	obj, _ := doc.(map[string]any)
	iface, _ := obj["interface"].(map[string]any)
	in, err := CompileSchema(iface["inputs"])
	if err != nil {
		return nil, fmt.Errorf("interface.inputs: %w", err)
	}
	out, err := CompileSchema(iface["outputs"])
	if err != nil {
		return nil, fmt.Errorf("interface.outputs: %w", err)
	}
	return &Interface{Inputs: in, Outputs: out}, nil
}

// Check validates a JSON document against sch and lists every violation (none: valid). The
// document must not be malformed JSON (that is the caller's 400).
func Check(sch *jsonschema.Schema, doc []byte) ([]Violation, error) {
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	err = sch.Validate(inst)
	if err == nil {
		return nil, nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return nil, err
	}
	var out []Violation
	for _, p := range schemaProblems(ve) {
		out = append(out, Violation{Pointer: p.pointer, Message: p.message})
	}
	return out, nil
}
