package execs

import (
	"context"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// Request is one exec as a caller asks it (the HTTP layer decodes it; Create validates it).
type Request struct {
	ProjectID      string
	SkillID        string
	Kind           string // shell | python
	Command        string // "" = the kind's (bash, python3)
	Args           []string
	Cwd            string            // "" = /workspace/work
	Env            map[string]string // values never stored
	Inputs         []RawInput
	Overrides      bay.PolicyOverrides
	TaskID         string
	ConversationID string
	Wait           bool

	// skill is set by Invoke: the resolved skill whose entrypoint is the command (Kind,
	// Command and Args are ignored).
	skill *resolvedSkill
}

// RawInput is an input as posted: a path relative to inputs/ and its bytes.
type RawInput struct {
	Path    string
	Content []byte
}

// Bounds on a request beyond the policy's.
const (
	MaxArgs      = 256
	MaxArgBytes  = 256 << 10
	MaxArgsBytes = 1 << 20
	MaxEnv       = 128
	MaxEnvBytes  = 64 << 10
	MaxInputs    = 1000
	MaxRefBytes  = 256
	defaultCwd   = MountWork
	kindShell    = "shell"
	kindPython   = "python"
)

// The length bounds are checked apart from the patterns: a bounded repetition ({0,127})
// compiles into a copy of its class per repetition, kept in memory all of bay's life.
var (
	envKeyRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) // and at most 128 bytes
	refRE    = regexp.MustCompile(`^[\x21-\x7e]+$`)           // and at most 256 bytes
)

// kindCommands are the commands each kind runs: shell is bash; python is python or python3.
var kindCommands = map[string][]string{kindShell: {"bash"}, kindPython: {"python3", "python"}}

// plan is a validated request: the queued record, the inputs to write, the env values.
type plan struct {
	rec    *bay.ExecRecord
	inputs []Input
	env    map[string]string
}

func invalid(format string, args ...any) error {
	return bay.Errorf(bay.CodeValidation, format, args...)
}

// plan validates req and merges its policy; nothing is written. Every refusal is a 4xx.
func (s *Service) plan(ctx context.Context, owner string, req Request) (plan, error) {
	if !ValidProjectID(req.ProjectID) {
		return plan{}, invalid("project_id must be 1-128 letters, digits, '.', '_' or '-', starting with a letter or digit")
	}
	for name, v := range map[string]string{"task_ref.task_id": req.TaskID, "task_ref.conversation_id": req.ConversationID} {
		if v != "" && (len(v) > 256 || !refRE.MatchString(v)) {
			return plan{}, invalid("%s must be 1-256 printable ASCII characters without spaces", name)
		}
	}
	kind, cmd, reqArgs := req.Kind, req.Command, req.Args
	if req.skill != nil {
		// An invocation: the command is the manifest's entrypoint.
		ep := req.skill.manifest.Runtime.Entrypoint
		kind, cmd, reqArgs = KindSkill, ep[0], ep[1:]
	} else {
		cmds, ok := kindCommands[req.Kind]
		if !ok {
			return plan{}, invalid("exec.kind must be shell or python, got %q", req.Kind)
		}
		if cmd == "" {
			cmd = cmds[0]
		}
		if !slices.Contains(cmds, cmd) {
			return plan{}, invalid("exec.command %q does not match exec.kind %s (want one of %s)", cmd, req.Kind, strings.Join(cmds, ", "))
		}
	}
	if len(reqArgs) > MaxArgs {
		return plan{}, invalid("exec.args has %d items, at most %d", len(reqArgs), MaxArgs)
	}
	total := 0
	for i, a := range reqArgs {
		total += len(a)
		switch {
		case strings.ContainsRune(a, 0):
			return plan{}, invalid("exec.args[%d] contains NUL", i)
		case len(a) > MaxArgBytes:
			return plan{}, invalid("exec.args[%d] is longer than %d bytes", i, MaxArgBytes)
		}
	}
	if total > MaxArgsBytes {
		return plan{}, invalid("exec.args total %d bytes, at most %d", total, MaxArgsBytes)
	}
	cwd := req.Cwd
	if cwd == "" {
		cwd = defaultCwd
	}
	if err := checkCwd(cwd); err != nil {
		return plan{}, err
	}
	if len(req.Env) > MaxEnv {
		return plan{}, invalid("exec.env has %d keys, at most %d", len(req.Env), MaxEnv)
	}
	var keys []string
	for k, v := range req.Env {
		switch {
		case len(k) > 128 || !envKeyRE.MatchString(k):
			return plan{}, invalid("exec.env key %q is not a valid variable name", k)
		case len(v) > MaxEnvBytes || strings.ContainsRune(v, 0):
			return plan{}, invalid("exec.env %s: value longer than %d bytes or containing NUL", k, MaxEnvBytes)
		}
		keys = append(keys, k)
	}
	slices.Sort(keys)

	image := s.cfg.Image
	var manifest bay.PolicyOverrides
	skill := req.skill
	if req.SkillID != "" && skill == nil {
		var err error
		if skill, err = s.resolveSkill(ctx, req.SkillID); err != nil {
			return plan{}, err
		}
	}
	if skill != nil {
		manifest = skill.manifest.policy()
		image = skill.manifest.Runtime.Image
	}
	pol, err := bay.MergeExecPolicy(bay.DefaultExecPolicy(), s.cfg.Settings, manifest, req.Overrides)
	if err != nil {
		return plan{}, err
	}
	if pol.NetMode != bay.NetNone {
		return plan{}, bay.Errorf(bay.CodeCapabilityNotSupported, "net_mode %s is not supported for execs yet: only none", pol.NetMode)
	}
	inputs, err := checkInputs(req.Inputs, pol)
	if err != nil {
		return plan{}, err
	}
	if err := s.checkRuntime(ctx); err != nil {
		return plan{}, err
	}
	id := bay.NewID(bay.PrefixExec)
	rec := &bay.ExecRecord{
		ID: id, Owner: owner, ProjectID: req.ProjectID, TaskID: req.TaskID, ConversationID: req.ConversationID,
		SkillID: req.SkillID, Image: image, Kind: kind, Cmd: cmd, Args: slices.Clone(reqArgs), Cwd: cwd,
		EnvKeys: keys, Policy: pol, Status: bay.ExecQueued, ArtifactsPath: ArtifactsDir(owner, req.ProjectID, id),
		Instance: bay.ExecInstancePrefix + id, BayInstance: s.cfg.InstanceID, CreatedAt: s.clock.Now().UTC(),
	}
	if skill != nil {
		rec.SkillVersion = skill.skill.Version
	}
	if rec.Args == nil {
		rec.Args = []string{}
	}
	if rec.EnvKeys == nil {
		rec.EnvKeys = []string{}
	}
	return plan{rec: rec, inputs: inputs, env: req.Env}, nil
}

// checkCwd: absolute, clean, inside one of the three mounts.
func checkCwd(cwd string) error {
	if strings.ContainsRune(cwd, 0) || !path.IsAbs(cwd) || path.Clean(cwd) != cwd || len(cwd) > 512 {
		return invalid("exec.cwd must be a clean absolute path, got %q", cwd)
	}
	for _, m := range []string{MountInputs, MountWork, MountArtifacts} {
		if cwd == m || strings.HasPrefix(cwd, m+"/") {
			return nil
		}
	}
	return invalid("exec.cwd must lie in %s, %s or %s", MountWork, MountInputs, MountArtifacts)
}

// checkInputs validates every input's path (400 invalid_path) and size (413), before anything
// is written.
func checkInputs(raw []RawInput, pol bay.ExecPolicy) ([]Input, error) {
	if len(raw) > MaxInputs {
		return nil, invalid("inputs has %d items, at most %d", len(raw), MaxInputs)
	}
	out := make([]Input, 0, len(raw))
	seen := map[string]bool{}
	var total int64
	for i, in := range raw {
		p, err := CleanInputPath(in.Path)
		if err != nil {
			return nil, bay.Errorf(bay.CodeInvalidPath, "inputs[%d].path %q: %v", i, in.Path, err)
		}
		if seen[p] {
			return nil, bay.Errorf(bay.CodeInvalidPath, "inputs[%d].path %q is given twice", i, p)
		}
		seen[p] = true
		size := int64(len(in.Content))
		if size > pol.MaxInputBytes {
			return nil, bay.Errorf(bay.CodePayloadTooLarge, "inputs[%d] is %d bytes, more than max_input_bytes (%d)", i, size, pol.MaxInputBytes)
		}
		total += size
		if total > pol.MaxInputsBytesTotal {
			return nil, bay.Errorf(bay.CodePayloadTooLarge, "inputs total more than max_inputs_bytes_total (%d)", pol.MaxInputsBytesTotal)
		}
		out = append(out, Input{Path: p, Content: in.Content})
	}
	// A file may not be the parent of another one.
	for p := range seen {
		for q := path.Dir(p); q != "."; q = path.Dir(q) {
			if seen[q] {
				return nil, bay.Errorf(bay.CodeInvalidPath, "inputs path %q lies under the file %q", p, q)
			}
		}
	}
	return out, nil
}

// runtimeCheckTimeout bounds the container runtime check of an admission.
const runtimeCheckTimeout = 5 * time.Second

// checkRuntime refuses execs while the platform lacks the configured container runtime
// (bay.RuntimeMissing, 400) rather than failing each at its start. A driver without
// bay.RuntimeChecker, or a platform that cannot say, lets the exec through (its start then
// says).
func (s *Service) checkRuntime(ctx context.Context) error {
	rc, ok := bay.DriverPort[bay.RuntimeChecker](s.drv)
	if !ok || s.cfg.ContainerRuntime == bay.ContainerRuntimeDefault {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, runtimeCheckTimeout)
	defer cancel()
	err := rc.CheckRuntime(cctx, s.cfg.ContainerRuntime)
	if err == nil || bay.IsRuntimeMissing(err) {
		return err
	}
	s.log.WarnContext(ctx, "exec: runtime check failed; admitting anyway", "runtime", s.cfg.ContainerRuntime, "err", err)
	return nil
}
