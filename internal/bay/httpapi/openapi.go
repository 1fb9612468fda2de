package httpapi

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
)

var (
	timeType = reflect.TypeFor[bayapi.Time]()
	// stdTimeType is RFC 3339 with an offset (the audited executions' own wire format).
	stdTimeType = reflect.TypeFor[time.Time]()
	rawJSONType = reflect.TypeFor[json.RawMessage]()
	anyType     = reflect.TypeFor[any]()
)

// buildOpenAPI renders the OpenAPI 3.1 document from the route table: every registered route
// is an operation, and schemas are derived from the Go wire types of api/bayapi by reflection
// (json tags; pointers and slices are nullable; bayapi.Time is a date-time string without an
// offset; bayapi.Int is an integer that also accepts numeric strings; the struct tags doc,
// minimum, maximum and maxLength of a field become its description and bounds).
func (s *Server) buildOpenAPI() []byte {
	g := &schemaGen{defs: map[string]any{}}
	paths := map[string]map[string]any{}
	for _, rt := range s.routes {
		op := map[string]any{
			"operationId": rt.doc.id,
			"summary":     rt.doc.summary,
			"tags":        []string{rt.doc.tag},
		}
		var params []any
		for _, name := range pathParams(rt.pattern) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]any{"type": "string"}})
		}
		for _, q := range rt.doc.query {
			sch := map[string]any{"type": q.typ}
			if len(q.enum) > 0 {
				sch["enum"] = q.enum
			}
			p := map[string]any{"name": q.name, "in": "query", "required": q.required, "schema": sch}
			if q.desc != "" {
				p["description"] = q.desc
			}
			params = append(params, p)
		}
		if rt.doc.idempotent {
			params = append(params, map[string]any{"name": bayapi.HeaderIdempotencyKey, "in": "header", "required": false,
				"description": "1-128 characters of A-Z a-z 0-9 _ -; scoped to owner, method and path",
				"schema":      map[string]any{"type": "string", "pattern": "^[A-Za-z0-9_-]{1,128}$"}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		switch {
		case rt.doc.multipart:
			op["requestBody"] = map[string]any{"required": true, "content": map[string]any{"multipart/form-data": map[string]any{
				"schema": map[string]any{"type": "object", "required": []string{"file"}, "properties": map[string]any{
					"path": map[string]any{"type": "string"}, "file": map[string]any{"type": "string", "contentMediaType": "application/octet-stream"},
				}},
			}}}
		case rt.doc.request != nil:
			op["requestBody"] = map[string]any{"required": !rt.doc.optionalReq, "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.doc.request))},
			}}
		}
		responses := map[string]any{}
		code := itoa(rt.doc.status)
		switch {
		case rt.doc.websocket:
			responses[code] = map[string]any{"description": "Switching protocols to a WebSocket proxied to the sandbox terminal"}
		case rt.doc.binary:
			responses[code] = map[string]any{"description": "File content", "content": map[string]any{
				"application/octet-stream": map[string]any{"schema": map[string]any{"type": "string", "contentMediaType": "application/octet-stream"}}}}
		case rt.doc.response != nil:
			responses[code] = map[string]any{"description": "Success", "content": map[string]any{
				"application/json": map[string]any{"schema": g.schema(reflect.TypeOf(rt.doc.response))}}}
			if rt.doc.events != "" {
				r := responses[code].(map[string]any)
				r["description"] = "Success; with Accept: text/event-stream, Server-Sent Events: " + rt.doc.events
				r["content"].(map[string]any)["text/event-stream"] = map[string]any{"schema": map[string]any{"type": "string"}}
			}
			for _, st := range rt.doc.also {
				responses[itoa(st)] = responses[code]
			}
		default:
			responses[code] = map[string]any{"description": "Success (no content)"}
		}
		envelope := g.schema(reflect.TypeFor[bayapi.ErrorEnvelope]())
		for status, codes := range errorCodes(rt) {
			responses[itoa(status)] = errorResponse(status, codes, envelope)
		}
		op["responses"] = responses
		if rt.auth {
			op["security"] = []any{map[string]any{"bearer": []string{}}}
		} else {
			op["security"] = []any{}
		}
		key := openAPIPath(rt.pattern)
		if paths[key] == nil {
			paths[key] = map[string]any{}
		}
		paths[key][strings.ToLower(rt.method)] = op
	}
	s.documentLimits(g.defs)
	if _, ok := s.mounted[bayapi.PathMCP]; ok {
		paths[bayapi.PathMCP] = mcpPath(bayapi.PathMCP)
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info": map[string]any{
			"title":       "Bay API",
			"version":     s.opts.Version,
			"description": "Shipyard control plane, API v1 (wire-compatible with Shipyard Neo).",
		},
		"paths": paths,
		"components": map[string]any{
			"schemas":         g.defs,
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer"}},
		},
	}
	b, err := json.Marshal(doc)
	if err != nil {
		panic("httpapi: openapi document: " + err.Error())
	}
	return b
}

var pathParamRE = regexp.MustCompile(`\{([a-z_]+)(?:\.\.\.)?\}`)

func pathParams(pattern string) []string {
	var out []string
	for _, m := range pathParamRE.FindAllStringSubmatch(pattern, -1) {
		out = append(out, m[1])
	}
	return out
}

type schemaGen struct{ defs map[string]any }

func (g *schemaGen) schema(t reflect.Type) map[string]any {
	nullable := false
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		nullable = true
	}
	var s map[string]any
	switch {
	case t == timeType:
		// Not format date-time: RFC 3339 requires an offset, the wire has none.
		s = map[string]any{"type": "string", "pattern": `^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{6})?$`,
			"description": "UTC, ISO-8601 without an offset, microseconds when non-zero (2026-03-01T10:00:00.123456)"}
	case t == rawJSONType:
		return g.schema(anyType)
	case t == stdTimeType:
		s = map[string]any{"type": "string", "format": "date-time"}
	case t == intType:
		s = map[string]any{"type": "integer"}
	case t == anyType:
		// Any JSON value, null included (a validator reads an empty schema as non-null).
		return map[string]any{"anyOf": []any{map[string]any{}, map[string]any{"type": "null"}}}
	}
	if s == nil {
		switch t.Kind() {
		case reflect.String:
			s = map[string]any{"type": "string"}
		case reflect.Bool:
			s = map[string]any{"type": "boolean"}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
			s = map[string]any{"type": "integer"}
		case reflect.Float32, reflect.Float64:
			s = map[string]any{"type": "number"}
		case reflect.Slice:
			s = map[string]any{"type": "array", "items": g.schema(t.Elem())}
			nullable = true
		case reflect.Map:
			s = map[string]any{"type": "object", "additionalProperties": g.schema(t.Elem())}
			// A nil map marshals as null, whatever its values.
			nullable = true
		case reflect.Struct:
			name := t.Name()
			if _, ok := g.defs[name]; !ok {
				g.defs[name] = map[string]any{} // break cycles
				g.defs[name] = g.structSchema(t)
			}
			s = map[string]any{"$ref": "#/components/schemas/" + name}
		default:
			s = map[string]any{}
		}
	}
	if nullable {
		if ref, ok := s["$ref"]; ok {
			return map[string]any{"anyOf": []any{map[string]any{"$ref": ref}, map[string]any{"type": "null"}}}
		}
		if typ, ok := s["type"].(string); ok {
			s["type"] = []string{typ, "null"}
		}
	}
	return s
}

func (g *schemaGen) structSchema(t reflect.Type) map[string]any {
	props := map[string]any{}
	var required []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("json"), ",")
		name := tag[0]
		if name == "-" {
			continue
		}
		if name == "" && f.Anonymous && f.Type.Kind() == reflect.Struct {
			// An embedded struct's fields are the outer object's, as encoding/json writes them.
			inner := g.structSchema(f.Type)
			for k, v := range inner["properties"].(map[string]any) {
				props[k] = v
			}
			if r, ok := inner["required"].([]string); ok {
				required = append(required, r...)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		ps := g.schema(f.Type)
		if d := f.Tag.Get("doc"); d != "" {
			ps["description"] = d
		}
		for _, k := range []string{"minimum", "maximum", "maxLength"} {
			if v := f.Tag.Get(k); v != "" {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					panic("httpapi: openapi: " + t.Name() + "." + f.Name + ": bad " + k + " tag " + v)
				}
				ps[k] = n
			}
		}
		props[name] = ps
		omitempty := len(tag) > 1 && strings.Contains(f.Tag.Get("json"), "omitempty")
		if f.Type.Kind() != reflect.Pointer && !omitempty {
			required = append(required, name)
		}
	}
	sort.Strings(required)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// Routes lists the registered API routes as "METHOD path", the path as OpenAPI writes it
// (used by tests and tooling).
func (s *Server) Routes() []string {
	out := make([]string, 0, len(s.routes))
	for _, rt := range s.routes {
		out = append(out, rt.method+" "+openAPIPath(rt.pattern))
	}
	return out
}

// openAPIPath is a mux pattern as OpenAPI writes it: a rest-of-path wildcard {path...} is
// the parameter {path}.
func openAPIPath(pattern string) string { return strings.ReplaceAll(pattern, "...}", "}") }

// OpenAPI returns the served OpenAPI document.
func (s *Server) OpenAPI() []byte { return s.openAPIDoc() }

// documentLimits states the configured bounds of the python and shell exec timeout in their
// request schemas (the struct tags hold the contract's defaults).
func (s *Server) documentLimits(defs map[string]any) {
	if s.caps == nil {
		return
	}
	l := s.caps.Limits()
	for _, name := range []string{"PythonExecRequest", "ShellExecRequest"} {
		def, _ := defs[name].(map[string]any)
		props, _ := def["properties"].(map[string]any)
		if t, ok := props["timeout"].(map[string]any); ok {
			t["minimum"], t["maximum"], t["default"] = 1, l.MaxTimeout, l.DefaultTimeout
			t["description"] = fmt.Sprintf("seconds, default %d (limits.timeout_sec_default), at most %d (limits.timeout_sec_max)", l.DefaultTimeout, l.MaxTimeout)
		}
	}
}
