package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Environment variables bay reads itself (not configuration keys).
const (
	EnvConfigFile = "BAY_CONFIG_FILE" // the config file; naming a missing file is an error
	EnvAPIKey     = "BAY_API_KEY"     // plaintext API key for owner "default", beats security.api_key
	EnvDataDir    = "BAY_DATA_DIR"    // directory of credentials.json (default ".")
)

// DefaultSearchPaths are tried in order when neither LoadOptions.File nor BAY_CONFIG_FILE is set.
var DefaultSearchPaths = []string{"config.yaml", "/etc/bay/config.yaml"}

// LoadOptions controls Load.
type LoadOptions struct {
	// File, when set (e.g. from a --config flag), is the config file; it must exist.
	File string
	// Env is the process environment as "KEY=value" entries; nil means os.Environ().
	Env []string
	// SearchPaths replaces DefaultSearchPaths (tests); nil means DefaultSearchPaths.
	SearchPaths []string
	// IgnoreEnv names further BAY_* variables that the caller reads itself, so that they are
	// not reported as unknown keys.
	IgnoreEnv []string
}

// Load builds the configuration: DefaultConfig(), then the YAML file (the first existing of
// opts.File, $BAY_CONFIG_FILE, ./config.yaml, /etc/bay/config.yaml; an empty file means
// defaults), then BAY_* environment variables, then Validate. Every problem found (unknown
// keys with suggestions, badly typed values, invalid values) is reported in one error.
func Load(opts LoadOptions) (*Config, error) {
	env := opts.Env
	if env == nil {
		env = os.Environ()
	}
	cfg := DefaultConfig()
	cfg.Hostname = lookupEnv(env, "HOSTNAME")

	file, err := findFile(opts, env)
	if err != nil {
		return nil, err
	}
	var errs []string
	if file != "" {
		cfg.File = file
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("config: read %s: %w", file, err)
		}
		errs = append(errs, decodeFile(cfg, filepath.Clean(file), data)...)
	}
	errs = append(errs, applyEnv(cfg, env, opts.IgnoreEnv)...)
	if len(errs) > 0 {
		return nil, &LoadError{Problems: errs}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// LoadError lists every problem found while reading the file and the environment.
type LoadError struct{ Problems []string }

func (e *LoadError) Error() string {
	if len(e.Problems) == 1 {
		return "config: " + e.Problems[0]
	}
	return "config: " + fmt.Sprint(len(e.Problems)) + " problems:\n  " + strings.Join(e.Problems, "\n  ")
}

func findFile(opts LoadOptions, env []string) (string, error) {
	if opts.File != "" {
		if _, err := os.Stat(opts.File); err != nil {
			return "", fmt.Errorf("config: config file %s: %w", opts.File, err)
		}
		return opts.File, nil
	}
	if f, ok := lookupEnvOK(env, EnvConfigFile); ok && f != "" {
		if _, err := os.Stat(f); err != nil {
			return "", fmt.Errorf("config: %s=%s: %w", EnvConfigFile, f, err)
		}
		return f, nil
	}
	paths := opts.SearchPaths
	if paths == nil {
		paths = DefaultSearchPaths
	}
	for _, p := range paths {
		st, err := os.Stat(p)
		if err == nil && !st.IsDir() {
			return p, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("config: %s: %w", p, err)
		}
	}
	return "", nil
}

func decodeFile(cfg *Config, name string, data []byte) []string {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return []string{fmt.Sprintf("%s: %v", name, err)}
	}
	if root.Kind == 0 || (root.Kind == yaml.DocumentNode && len(root.Content) == 0) {
		return nil // empty file: defaults
	}
	d := &decoder{source: name}
	doc := &root
	if doc.Kind == yaml.DocumentNode {
		doc = doc.Content[0]
	}
	if isNull(doc) {
		return nil
	}
	d.decode(doc, reflect.ValueOf(cfg).Elem(), "")
	return d.errs
}

type envVar struct {
	name  string
	path  []string // lower-cased segments
	value string
}

// applyEnv applies BAY_<SECTION>__<KEY>=value variables: shallower paths first, so that
// BAY_GC__ENABLED wins over a BAY_GC='{...}' JSON block.
func applyEnv(cfg *Config, env []string, ignore []string) []string {
	skip := map[string]bool{EnvConfigFile: true, EnvAPIKey: true, EnvDataDir: true}
	for _, n := range ignore {
		skip[strings.ToUpper(n)] = true
	}
	var vars []envVar
	for _, kv := range env {
		name, value, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		up := strings.ToUpper(name)
		if !strings.HasPrefix(up, "BAY_") || skip[up] {
			continue
		}
		vars = append(vars, envVar{name: name, path: strings.Split(strings.ToLower(name[4:]), "__"), value: value})
	}
	sort.SliceStable(vars, func(i, j int) bool {
		if len(vars[i].path) != len(vars[j].path) {
			return len(vars[i].path) < len(vars[j].path)
		}
		return vars[i].name < vars[j].name
	})
	d := &decoder{source: "environment"}
	for _, ev := range vars {
		setEnv(d, reflect.ValueOf(cfg).Elem(), ev)
	}
	return d.errs
}

func setEnv(d *decoder, v reflect.Value, ev envVar) {
	path := ""
	for i, seg := range ev.path {
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				v.Set(newElem(v.Type().Elem()).Addr())
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct || v.Type() == durationType {
			d.errs = append(d.errs, fmt.Sprintf("environment: %s: %q is not a section, so %q cannot be set",
				ev.name, path, joinPath(path, strings.Join(ev.path[i:], "."))))
			return
		}
		fields := structFields(v.Type())
		idx, ok := fields[seg]
		if !ok {
			d.errs = append(d.errs, fmt.Sprintf("environment: %s: unknown key %q%s",
				ev.name, joinPath(path, strings.Join(ev.path[i:], ".")), suggest(path, seg, fields)))
			return
		}
		path = joinPath(path, seg)
		v = v.Field(idx)
	}
	label := ev.name + " (" + path + ")"
	if v.Kind() == reflect.String {
		v.SetString(ev.value)
		return
	}
	if strings.TrimSpace(ev.value) == "" {
		if v.Kind() == reflect.Pointer || v.Kind() == reflect.Slice || v.Kind() == reflect.Map {
			v.Set(reflect.Zero(v.Type()))
			return
		}
		d.errs = append(d.errs, fmt.Sprintf("environment: %s: empty value", label))
		return
	}
	var n yaml.Node
	if err := yaml.Unmarshal([]byte(ev.value), &n); err != nil {
		d.errs = append(d.errs, fmt.Sprintf("environment: %s: cannot parse value (lists and mappings are JSON): %v", label, err))
		return
	}
	sub := &decoder{source: "environment"}
	sub.decode(&n, v, path)
	for _, e := range sub.errs {
		d.errs = append(d.errs, strings.Replace(e, "environment: ", "environment: "+ev.name+": ", 1))
	}
}

func lookupEnvOK(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- { // last wins, like os.Getenv with duplicates
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v, true
		}
	}
	return "", false
}

func lookupEnv(env []string, key string) string {
	v, _ := lookupEnvOK(env, key)
	return v
}

// LookupEnv returns the value of key in env ("KEY=value" entries; the last one wins).
func LookupEnv(env []string, key string) string { return lookupEnv(env, key) }
