package execs

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// Runtime is where bay and the engine it talks to run, as far as host paths go: a Linux host,
// Docker Desktop driven from Windows, or Docker Desktop driven from a WSL2 distribution.
type Runtime string

const (
	RuntimeAuto    Runtime = "auto"
	RuntimeLinux   Runtime = "linux"
	RuntimeWindows Runtime = "windows"
	RuntimeWSL     Runtime = "wsl"
)

// DetectRuntime resolves auto from the operating system bay runs on (GOOS) and, on Linux, the
// kernel's /proc/version text (WSL2 kernels name Microsoft). Any other mode is returned as is.
func DetectRuntime(mode Runtime, goos, procVersion string) Runtime {
	if mode != RuntimeAuto && mode != "" {
		return mode
	}
	switch {
	case goos == "windows":
		return RuntimeWindows
	case strings.Contains(strings.ToLower(procVersion), "microsoft"):
		return RuntimeWSL
	default:
		return RuntimeLinux
	}
}

// WorkspacePaths are the workspace root as bay reads and writes it (Native) and as the engine
// must be given it in a bind mount (Mount).
type WorkspacePaths struct {
	Native string
	Mount  string
}

var (
	winPathRE  = regexp.MustCompile(`^([A-Za-z]):[\\/](.*)$`)
	wslMountRE = regexp.MustCompile(`^/mnt/([a-z])(/.*)?$`)
)

// AdaptPaths turns the configured roots into the workspace paths of runtime rt (already
// detected): linuxRoot for Linux; workspace_root_win (D:\x) for Windows, or the Windows form
// of a /mnt/<drive> workspace_root_wsl; workspace_root_wsl (/mnt/d/x or any absolute path) for
// WSL, or the /mnt form of workspace_root_win. It never gives a Windows engine a /mnt path nor
// a WSL one a drive path, and says which setting is missing or malformed.
func AdaptPaths(rt Runtime, linuxRoot, winRoot, wslRoot string) (WorkspacePaths, error) {
	switch rt {
	case RuntimeLinux:
		if !path.IsAbs(linuxRoot) || strings.ContainsRune(linuxRoot, 0) {
			return WorkspacePaths{}, fmt.Errorf("workspace_root must be an absolute path on Linux, got %q", linuxRoot)
		}
		p := path.Clean(linuxRoot)
		return WorkspacePaths{Native: p, Mount: p}, nil
	case RuntimeWindows:
		if winRoot == "" {
			w, err := wslToWindows(wslRoot)
			if err != nil {
				return WorkspacePaths{}, fmt.Errorf("windows runtime: workspace_root_win is not set and %w", err)
			}
			winRoot = w
		}
		m := winPathRE.FindStringSubmatch(winRoot)
		if m == nil {
			return WorkspacePaths{}, fmt.Errorf("windows runtime: workspace_root_win must be a drive path like D:\\shipyard, got %q", winRoot)
		}
		p := strings.ToUpper(m[1]) + `:\` + cleanWin(m[2])
		return WorkspacePaths{Native: p, Mount: p}, nil
	case RuntimeWSL:
		if wslRoot == "" {
			w, err := windowsToWSL(winRoot)
			if err != nil {
				return WorkspacePaths{}, fmt.Errorf("wsl runtime: workspace_root_wsl is not set and %w", err)
			}
			wslRoot = w
		}
		if !path.IsAbs(wslRoot) || winPathRE.MatchString(wslRoot) {
			return WorkspacePaths{}, fmt.Errorf("wsl runtime: workspace_root_wsl must be an absolute Linux path like /mnt/d/shipyard, got %q", wslRoot)
		}
		p := path.Clean(wslRoot)
		return WorkspacePaths{Native: p, Mount: p}, nil
	}
	return WorkspacePaths{}, fmt.Errorf("runtime %q is not one of auto, linux, windows, wsl", rt)
}

// cleanWin normalises the part of a Windows path after the drive: backslashes, no empty, "."
// or ".." elements (".." is refused by the caller's check of the result staying on the drive).
func cleanWin(rest string) string {
	p := path.Clean("/" + strings.ReplaceAll(rest, `\`, "/"))
	return strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", `\`)
}

// wslToWindows is wslpath -w for /mnt/<drive> paths.
func wslToWindows(p string) (string, error) {
	m := wslMountRE.FindStringSubmatch(p)
	if m == nil {
		return "", fmt.Errorf("workspace_root_wsl %q is not under /mnt/<drive> (set workspace_root_win)", p)
	}
	return strings.ToUpper(m[1]) + `:\` + cleanWin(m[2]), nil
}

// windowsToWSL is wslpath -u for drive paths.
func windowsToWSL(p string) (string, error) {
	m := winPathRE.FindStringSubmatch(p)
	if m == nil {
		return "", fmt.Errorf("workspace_root_win %q is not a drive path like D:\\shipyard (set workspace_root_wsl)", p)
	}
	rest := strings.ReplaceAll(cleanWin(m[2]), `\`, "/")
	return path.Clean("/mnt/" + strings.ToLower(m[1]) + "/" + rest), nil
}
