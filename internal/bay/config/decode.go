package config

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// decoder walks a YAML node tree onto a Go value using the yaml struct tags, reporting every
// unknown key and every badly typed value with its dotted path instead of stopping at the
// first. null leaves a value as it was (its default), except pointers, which become nil.
type decoder struct {
	source string // "config.yaml", "environment"
	errs   []string
}

type defaulter interface{ applyDefaults() }

var durationType = reflect.TypeFor[time.Duration]()

func (d *decoder) errorf(path string, n *yaml.Node, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	loc := d.source
	if n != nil && n.Line > 0 && d.source != "environment" {
		loc = fmt.Sprintf("%s:%d", d.source, n.Line)
	}
	if path != "" {
		d.errs = append(d.errs, fmt.Sprintf("%s: %s: %s", loc, path, msg))
	} else {
		d.errs = append(d.errs, fmt.Sprintf("%s: %s", loc, msg))
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// newElem returns a new addressable value of type t with its defaults applied.
func newElem(t reflect.Type) reflect.Value {
	v := reflect.New(t).Elem()
	if df, ok := v.Addr().Interface().(defaulter); ok {
		df.applyDefaults()
	}
	return v
}

// decode decodes n into v (addressable).
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if isNull(n) {
		if v.Kind() == reflect.Pointer {
			v.Set(reflect.Zero(v.Type()))
		}
		return
	}
	if u, ok := v.Addr().Interface().(yaml.Unmarshaler); ok {
		if err := u.UnmarshalYAML(n); err != nil {
			d.errorf(path, n, "%v", err)
		}
		return
	}
	if v.Type() == durationType {
		dur, err := parseSeconds(n)
		if err != nil {
			d.errorf(path, n, "%v", err)
			return
		}
		v.SetInt(int64(dur))
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := newElem(v.Type().Elem())
		if !v.IsNil() {
			elem.Set(v.Elem())
		}
		d.decode(n, elem, path)
		v.Set(elem.Addr())
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.errorf(path, n, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			e := newElem(v.Type().Elem())
			d.decode(item, e, fmt.Sprintf("%s[%d]", path, i))
			s.Index(i).Set(e)
		}
		v.Set(s)
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			d.errorf(path, n, "expected a mapping, got %s", describe(n))
			return
		}
		if v.Type().Key().Kind() != reflect.String {
			panic("config: only string-keyed maps are supported")
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				d.errorf(path, k, "map keys must be scalars")
				continue
			}
			e := newElem(v.Type().Elem())
			d.decode(val, e, joinPath(path, k.Value))
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), e)
		}
		v.Set(m)
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			d.errorf(path, n, "expected a string, got %s", describe(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		b, err := parseBool(n)
		if err != nil {
			d.errorf(path, n, "%v", err)
			return
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		i, err := parseInt(n)
		if err == nil && v.OverflowInt(i) {
			err = fmt.Errorf("%d is out of range", i)
		}
		if err != nil {
			d.errorf(path, n, "%v", err)
			return
		}
		v.SetInt(i)
	case reflect.Float32, reflect.Float64:
		f, err := parseFloat(n)
		if err != nil {
			d.errorf(path, n, "%v", err)
			return
		}
		v.SetFloat(f)
	default:
		panic(fmt.Sprintf("config: unsupported field kind %s at %s", v.Kind(), path))
	}
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.errorf(path, n, "expected a mapping, got %s", describe(n))
		return
	}
	fields := structFields(v.Type())
	// Merge keys (<<) first, so that the mapping's own keys win over merged ones.
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Kind == yaml.ScalarNode && k.Value == "<<" {
			d.decodeMerge(n.Content[i+1], v, path)
		}
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.errorf(path, k, "keys must be scalars")
			continue
		}
		key := k.Value
		if key == "<<" {
			continue
		}
		idx, ok := fields[key]
		if !ok {
			d.errorf("", k, "unknown key %q%s", joinPath(path, key), suggest(path, key, fields))
			continue
		}
		if seen[key] {
			d.errorf("", k, "key %q is set twice", joinPath(path, key))
			continue
		}
		seen[key] = true
		d.decode(val, v.Field(idx), joinPath(path, key))
	}
}

func (d *decoder) decodeMerge(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	switch n.Kind {
	case yaml.MappingNode:
		d.decodeStruct(n, v, path)
	case yaml.SequenceNode:
		for _, m := range n.Content {
			d.decodeMerge(m, v, path)
		}
	default:
		d.errorf(path, n, "merge key (<<) needs a mapping")
	}
}

// structFields maps a struct type's yaml keys to field indexes (fields tagged "-" excluded).
func structFields(t reflect.Type) map[string]int {
	m := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || name == "" {
			continue
		}
		m[name] = i
	}
	return m
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	default:
		return strconv.Quote(n.Value)
	}
}

// suggest returns ` (did you mean "x.y"?)` for the closest known key, or "".
func suggest(path, key string, fields map[string]int) string {
	best, bestDist := "", math.MaxInt
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	sort.Strings(names)
	lk := strings.ToLower(key)
	for _, name := range names {
		dist := levenshtein(lk, name)
		if strings.EqualFold(strings.ReplaceAll(lk, "-", "_"), name) {
			dist = 0
		}
		if dist < bestDist {
			best, bestDist = name, dist
		}
	}
	if best == "" || bestDist > max(2, len(key)/3) {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", joinPath(path, best))
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

func scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("expected %s, got %s", what, describe(n))
	}
	return strings.TrimSpace(n.Value), nil
}

func parseBool(n *yaml.Node) (bool, error) {
	s, err := scalar(n, "a boolean")
	if err != nil {
		return false, err
	}
	switch strings.ToLower(s) {
	case "true", "yes", "on", "1":
		return true, nil
	case "false", "no", "off", "0":
		return false, nil
	}
	return false, fmt.Errorf("expected a boolean (true/false), got %q", s)
}

func parseInt(n *yaml.Node) (int64, error) {
	s, err := scalar(n, "an integer")
	if err != nil {
		return 0, err
	}
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		return int64(f), nil
	}
	return 0, fmt.Errorf("expected an integer, got %q", s)
}

func parseFloat(n *yaml.Node) (float64, error) {
	s, err := scalar(n, "a number")
	if err != nil {
		return 0, err
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("expected a number, got %q", s)
	}
	return f, nil
}

// parseSeconds reads a duration: a number of seconds (300, 1.5) or a Go duration ("5m").
func parseSeconds(n *yaml.Node) (time.Duration, error) {
	s, err := scalar(n, "a duration")
	if err != nil {
		return 0, err
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) {
		if math.Abs(f) > float64(math.MaxInt64/int64(time.Second)) {
			return 0, fmt.Errorf("duration %q is out of range", s)
		}
		return time.Duration(f * float64(time.Second)), nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return d, nil
	}
	return 0, fmt.Errorf("expected a duration in seconds (e.g. 300) or with a unit (e.g. \"5m\"), got %q", s)
}
