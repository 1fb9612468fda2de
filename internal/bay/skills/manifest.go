package skills

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	bundledskills "github.com/shipyard-dev/shipyard/skills"
)

// MaxManifestBytes bounds manifest.json.
const MaxManifestBytes = 256 << 10

var (
	schemaOnce sync.Once
	schema     *jsonschema.Schema
	schemaErr  error
)

// manifestSchema compiles the repository's skills/_schema/manifest.schema.json once.
func manifestSchema() (*jsonschema.Schema, error) {
	schemaOnce.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(bundledskills.ManifestSchema))
		if err != nil {
			schemaErr = fmt.Errorf("manifest schema: %w", err)
			return
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("manifest.schema.json", doc); err != nil {
			schemaErr = fmt.Errorf("manifest schema: %w", err)
			return
		}
		schema, schemaErr = c.Compile("manifest.schema.json")
	})
	return schema, schemaErr
}

// validateManifest checks manifest.json: JSON, the manifest schema (each violation named by
// its JSON pointer), and that interface.inputs and interface.outputs compile as JSON Schemas.
func validateManifest(res *Result, data []byte) {
	if len(data) > MaxManifestBytes {
		res.errorf(ManifestFile, "", "manifest.json is %d bytes, more than %d", len(data), MaxManifestBytes)
		return
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		res.errorf(ManifestFile, "", "not valid JSON: %v", err)
		return
	}
	sch, err := manifestSchema()
	if err != nil {
		res.errorf(ManifestFile, "", "the manifest schema does not compile: %v", err)
		return
	}
	if err := sch.Validate(inst); err != nil {
		var ve *jsonschema.ValidationError
		if !errors.As(err, &ve) {
			res.errorf(ManifestFile, "", "%v", err)
			return
		}
		for _, p := range schemaProblems(ve) {
			res.errorf(ManifestFile, p.pointer, "%s", p.message)
		}
		return
	}
	obj, _ := inst.(map[string]any)
	iface, _ := obj["interface"].(map[string]any)
	for _, k := range []string{"inputs", "outputs"} {
		if _, err := CompileSchema(iface[k]); err != nil {
			res.errorf(ManifestFile, "/interface/"+k, "not a valid JSON Schema: %s", firstLine(err.Error()))
		}
	}
}

type schemaProblem struct{ pointer, message string }

// schemaProblems flattens a validation error to its leaves: one problem per failing keyword,
// named by the instance's JSON pointer ("" is the document), sorted and deduplicated.
func schemaProblems(ve *jsonschema.ValidationError) []schemaProblem {
	var out []schemaProblem
	seen := map[schemaProblem]bool{}
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if len(u.Errors) == 0 && u.Error != nil {
			p := schemaProblem{pointer: u.InstanceLocation, message: u.Error.String()}
			if p.pointer == "" {
				p.pointer = "/"
			}
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(ve.DetailedOutput())
	sort.Slice(out, func(i, j int) bool {
		if out[i].pointer != out[j].pointer {
			return out[i].pointer < out[j].pointer
		}
		return out[i].message < out[j].message
	})
	return out
}

// CompileSchema compiles a JSON Schema given as decoded JSON (an interface's inputs, for
// example), offline: references to other documents are refused.
func CompileSchema(doc any) (*jsonschema.Schema, error) {
	if doc == nil {
		return nil, errors.New("missing")
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	if err := c.AddResource("inline.json", doc); err != nil {
		return nil, err
	}
	return c.Compile("inline.json")
}

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %s is not loaded", url)
}

// ManifestFields decodes the parts of a validated manifest that bay's API reports.
func ManifestFields(data []byte) (map[string]any, error) {
	var m map[string]any
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		return nil, fmt.Errorf("decode manifest: %w", err)
	}
	return m, nil
}
