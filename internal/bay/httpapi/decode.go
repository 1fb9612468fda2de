package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
)

// maxJSONBody bounds a JSON request body (file content of PUT filesystem/files included).
const maxJSONBody = 64 << 20

var intType = reflect.TypeFor[bayapi.Int]()

// decodeBody decodes a required JSON object body into dst (a pointer to a bayapi request
// struct) field by field, like the reference's pydantic lax mode: unknown fields are ignored,
// integers may be integral floats or numeric strings (bayapi.Int), and every problem is
// reported as a FastAPI-style issue with its location (422). required lists JSON names that
// must be present and non-null.
func decodeBody(w http.ResponseWriter, r *http.Request, dst any, required ...string) error {
	return decodeBodyMax(w, r, maxJSONBody, "", dst, required...)
}

// decodeBodyMax is decodeBody for a body of at most max bytes; setting names where max comes
// from in the 413 ("" = bay's own bound of JSON bodies).
func decodeBodyMax(w http.ResponseWriter, r *http.Request, max int64, setting string, dst any, required ...string) error {
	raw, err := readBody(w, r, max, setting)
	if err != nil {
		return err
	}
	var is issues
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		is.missing("body")
		return is.err()
	}
	if !json.Valid(raw) {
		var off int64
		var se *json.SyntaxError
		if err := json.Unmarshal(raw, new(any)); errors.As(err, &se) {
			off = se.Offset
		}
		msg := "JSON decode error"
		is.add("json_invalid", []any{"body", off}, msg, map[string]any{}, map[string]any{"error": "Invalid JSON"})
		return is.err()
	}
	var fields map[string]json.RawMessage
	if raw[0] != '{' || json.Unmarshal(raw, &fields) != nil {
		var in any
		_ = json.Unmarshal(raw, &in)
		is.add("model_attributes_type", []any{"body"}, "Input should be a valid dictionary or object to extract fields from", in, nil)
		return is.err()
	}
	v := reflect.ValueOf(dst).Elem()
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := strings.Split(f.Tag.Get("json"), ",")[0]
		if name == "" || name == "-" {
			continue
		}
		fr, ok := fields[name]
		if !ok {
			continue
		}
		fv := v.Field(i)
		if string(fr) == "null" {
			if fv.Kind() != reflect.Pointer && fv.Kind() != reflect.Slice && fv.Kind() != reflect.Map {
				typ, msg := typeIssue(f.Type)
				is.add(typ, []any{"body", name}, msg, nil, nil)
			}
			continue
		}
		if err := json.Unmarshal(fr, fv.Addr().Interface()); err != nil {
			typ, msg := typeIssue(f.Type)
			var in any
			_ = json.Unmarshal(fr, &in)
			is.add(typ, []any{"body", name}, msg, in, nil)
		}
	}
	for _, name := range required {
		if fr, ok := fields[name]; !ok || string(fr) == "null" {
			if !ok {
				is.missing("body", name)
			} else {
				is.add("missing", []any{"body", name}, "Field required", nil, nil)
			}
		}
	}
	return is.err()
}

// readBody reads a JSON request body of at most max bytes (413 beyond, naming setting when
// the bound is configured).
func readBody(w http.ResponseWriter, r *http.Request, max int64, setting string) ([]byte, error) {
	if setting != "" && r.ContentLength > max {
		return nil, bay.TooLarge("request body", r.ContentLength, max, setting)
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) && setting != "" {
			return nil, bay.TooLarge("request body", -1, max, setting)
		}
		if errors.As(err, &mbe) {
			return nil, bay.Errorf(bay.CodePayloadTooLarge, "Request body exceeds %d bytes", max)
		}
		return nil, bay.Errorf(bay.CodeValidation, "Request body could not be read").WithCause(err)
	}
	return raw, nil
}

// typeIssue returns the pydantic error type and message for a field of type t.
func typeIssue(t reflect.Type) (string, string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == intType:
		return "int_parsing", "Input should be a valid integer"
	case t.Kind() == reflect.String:
		return "string_type", "Input should be a valid string"
	case t.Kind() == reflect.Bool:
		return "bool_type", "Input should be a valid boolean"
	case t.Kind() == reflect.Slice:
		return "list_type", "Input should be a valid list"
	}
	return "value_error", "Input is not valid"
}

// queryInt parses an optional integer query parameter within lo..hi (def when absent).
func queryInt(r *http.Request, is *issues, name string, def, lo, hi int64) int64 {
	s, ok := r.URL.Query()[name]
	if !ok || len(s) == 0 {
		return def
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s[0]), 10, 64)
	if err != nil {
		is.add("int_parsing", []any{"query", name}, "Input should be a valid integer, unable to parse string as an integer", s[0], nil)
		return def
	}
	is.intRange(v, lo, hi, "query", name)
	return v
}

// validatePath validates a workspace-relative path and returns its normalised form ("." for
// the root): not empty, no NUL, relative, never above the workspace after resolving "..", and
// within the length limits of the file systems a workspace lives on (a longer path is the
// client's mistake, not the runtime's). field names the request field ("path" or "cwd") in the
// invalid_path error's details {field, reason}; reasons: empty_path, null_byte, absolute_path,
// path_traversal, path_too_long, name_too_long.
func validatePath(field, p string) (string, error) {
	bad := func(reason, format string, args ...any) error {
		return bay.Errorf(bay.CodeInvalidPath, format, args...).WithDetails(map[string]any{"field": field, "reason": reason})
	}
	if len(p) > bayapi.MaxPathLen {
		return "", bad("path_too_long", "%s is longer than %d bytes", field, bayapi.MaxPathLen)
	}
	for _, name := range strings.Split(p, "/") {
		if len(name) > bayapi.MaxNameLen {
			return "", bad("name_too_long", "%s has a name longer than %d bytes", field, bayapi.MaxNameLen)
		}
	}
	switch {
	case p == "":
		return "", bad("empty_path", "%s cannot be empty", field)
	case strings.ContainsRune(p, 0):
		return "", bad("null_byte", "%s contains invalid characters", field)
	case strings.HasPrefix(p, "/"):
		return "", bad("absolute_path", "%s must be a relative path", field)
	}
	var stack []string
	for _, c := range strings.Split(p, "/") {
		switch c {
		case "", ".":
		case "..":
			if len(stack) == 0 {
				return "", bad("path_traversal", "%s escapes workspace boundary", field)
			}
			stack = stack[:len(stack)-1]
		default:
			stack = append(stack, c)
		}
	}
	if len(stack) == 0 {
		return ".", nil
	}
	return strings.Join(stack, "/"), nil
}

// queryString reads an optional string query parameter of at most max bytes.
func queryString(r *http.Request, is *issues, name string, max int) string {
	v := r.URL.Query().Get(name)
	is.strLen(&v, max, "query", name)
	return v
}

// queryBool parses an optional boolean query parameter (pydantic's accepted spellings).
func queryBool(r *http.Request, is *issues, name string) *bool {
	s, ok := r.URL.Query()[name]
	if !ok || len(s) == 0 {
		return nil
	}
	var v bool
	switch strings.ToLower(strings.TrimSpace(s[0])) {
	case "1", "true", "t", "yes", "y", "on":
		v = true
	case "0", "false", "f", "no", "n", "off":
		v = false
	default:
		is.add("bool_parsing", []any{"query", name}, "Input should be a valid boolean, unable to interpret input", s[0], nil)
		return nil
	}
	return &v
}
