package mcp

import (
	"log/slog"
	"os"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/version"
)

// Defaults of Options (the reference MCP server's).
const (
	DefaultTTL                  = 3600
	DefaultMaxToolTextChars     = 12000
	DefaultMaxWriteFileBytes    = 5 << 20
	DefaultMaxTransferFileBytes = 50 << 20
	DefaultCallTimeout          = 600 * time.Second
)

// Options configures the tools.
type Options struct {
	// DefaultProfile is create_sandbox's profile when none is given.
	DefaultProfile string
	// DefaultTTL is create_sandbox's ttl (seconds) when none is given; 0 = no expiry.
	DefaultTTL int
	// MaxToolTextChars bounds every text result (characters); longer texts are truncated.
	MaxToolTextChars int
	// MaxWriteFileBytes bounds write_file's content.
	MaxWriteFileBytes int64
	// MaxTransferFileBytes bounds upload_file and download_file.
	MaxTransferFileBytes int64
	// CallTimeout bounds one tool call.
	CallTimeout time.Duration
	// Version is reported as the server implementation version.
	Version string
	// Logger receives one line per tool failure; nil discards.
	Logger *slog.Logger
	// AllowedTools, when non-empty, are the only tools offered: names or globs (path.Match:
	// "skill.*", "execute_*"). A malformed glob allows nothing. Empty = every tool.
	AllowedTools []string
	// SkillProject is the project (workspace) of the skill tools' invocations.
	SkillProject string
	// SkillsPollInterval is how often the skill tools follow the library while the server has
	// sessions; 0 polls only on tools/list.
	SkillsPollInterval time.Duration
}

// DefaultOptions returns the reference's defaults.
func DefaultOptions() Options {
	return Options{
		DefaultProfile:       bayapi.DefaultProfile,
		DefaultTTL:           DefaultTTL,
		MaxToolTextChars:     DefaultMaxToolTextChars,
		MaxWriteFileBytes:    DefaultMaxWriteFileBytes,
		MaxTransferFileBytes: DefaultMaxTransferFileBytes,
		CallTimeout:          DefaultCallTimeout,
		Version:              version.Version,
		SkillProject:         DefaultSkillProject,
		SkillsPollInterval:   DefaultSkillsPollInterval,
	}
}

// OptionsFromEnv returns DefaultOptions overridden by the SHIPYARD_* variables; invalid
// values keep the default.
func OptionsFromEnv() Options {
	o := DefaultOptions()
	if v := strings.TrimSpace(os.Getenv("SHIPYARD_DEFAULT_PROFILE")); v != "" {
		o.DefaultProfile = v
	}
	if n, ok := envInt("SHIPYARD_DEFAULT_TTL"); ok && n >= 0 {
		o.DefaultTTL = int(n)
	}
	if n, ok := envInt("SHIPYARD_MAX_TOOL_TEXT_CHARS"); ok && n > 0 {
		o.MaxToolTextChars = int(n)
	}
	if n, ok := envInt("SHIPYARD_MAX_WRITE_FILE_BYTES"); ok && n > 0 {
		o.MaxWriteFileBytes = n
	}
	if n, ok := envInt("SHIPYARD_MAX_TRANSFER_FILE_BYTES"); ok && n > 0 {
		o.MaxTransferFileBytes = n
	}
	if v := strings.TrimSpace(os.Getenv(EnvAllowedTools)); v != "" {
		o.AllowedTools = splitList(v)
	}
	if v := strings.TrimSpace(os.Getenv(EnvSkillProject)); v != "" {
		o.SkillProject = v
	}
	if v := strings.TrimSpace(os.Getenv(EnvSkillsPollSeconds)); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 {
			o.SkillsPollInterval = time.Duration(f * float64(time.Second))
		}
	}
	if v := strings.TrimSpace(os.Getenv("SHIPYARD_SDK_CALL_TIMEOUT")); v != "" {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f > 0 {
			o.CallTimeout = time.Duration(f * float64(time.Second))
		}
	}
	return o
}

// EnvAllowedTools is the comma-separated allow-list of tools (Options.AllowedTools).
const EnvAllowedTools = "SHIPYARD_ALLOWED_TOOLS"

// EnvSkillProject (Options.SkillProject) and EnvSkillsPollSeconds (Options.SkillsPollInterval,
// in seconds; 0 = poll only on tools/list) configure the skill tools.
const (
	EnvSkillProject      = "SHIPYARD_SKILL_PROJECT_ID"
	EnvSkillsPollSeconds = "SHIPYARD_SKILLS_POLL_SECONDS"
)

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// toolAllowed reports whether the allow-list offers the tool.
func (o Options) toolAllowed(name string) bool {
	if len(o.AllowedTools) == 0 {
		return true
	}
	for _, pat := range o.AllowedTools {
		if ok, err := path.Match(pat, name); err == nil && ok {
			return true
		}
	}
	return false
}

func envInt(name string) (int64, bool) {
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	return n, err == nil
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.DefaultProfile == "" {
		o.DefaultProfile = d.DefaultProfile
	}
	if o.DefaultTTL < 0 {
		o.DefaultTTL = d.DefaultTTL
	}
	if o.MaxToolTextChars <= 0 {
		o.MaxToolTextChars = d.MaxToolTextChars
	}
	if o.MaxWriteFileBytes <= 0 {
		o.MaxWriteFileBytes = d.MaxWriteFileBytes
	}
	if o.MaxTransferFileBytes <= 0 {
		o.MaxTransferFileBytes = d.MaxTransferFileBytes
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = d.CallTimeout
	}
	if o.Version == "" {
		o.Version = d.Version
	}
	if o.SkillProject == "" {
		o.SkillProject = d.SkillProject
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}
