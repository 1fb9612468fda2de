package ship

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/shipyard-dev/shipyard/internal/runtimekit"
	"github.com/shipyard-dev/shipyard/internal/ship/privsep"
	"github.com/shipyard-dev/shipyard/internal/ship/workspace"
)

// userEnv is the environment of the sandbox user's processes (the kernel, shell commands,
// terminals) on top of ship's env, so that installing packages works for the non-root user
// and what it installs lives in the workspace, kept across stop and resume:
//
//   - HOME is the workspace (the kernel too, not only shells), so pip's user site is
//     $HOME/.local/lib/pythonX.Y/site-packages and its scripts $HOME/.local/bin;
//   - PIP_BREAK_SYSTEM_PACKAGES=1: Debian marks its Python as externally managed (PEP 668)
//     and pip refused every install. A non-root pip cannot write the system site-packages, so
//     it installs into the user site ("Defaulting to user installation"), shadowing Debian's
//     modules for this user only and never changing them; inside a virtualenv the variable
//     has no effect;
//   - NPM_CONFIG_PREFIX=$HOME/.local: `npm install -g` installs into the workspace too
//     (packages under $HOME/.local/lib/node_modules, commands in $HOME/.local/bin); a plain
//     `npm install` writes ./node_modules as always;
//   - PATH starts with $HOME/.local/bin, where both put their commands.
//
// Variables the image or the profile already set are kept, PATH is extended.
func userEnv(env []string, home string) []string {
	bin := filepath.Join(home, ".local", "bin")
	path := lookupEnv(env, "PATH")
	if path == "" {
		path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	}
	set := []string{"HOME=" + home}
	if !containsPath(path, bin) {
		set = append(set, "PATH="+bin+string(os.PathListSeparator)+path)
	}
	if lookupEnv(env, "PIP_BREAK_SYSTEM_PACKAGES") == "" {
		set = append(set, "PIP_BREAK_SYSTEM_PACKAGES=1")
	}
	if lookupEnv(env, "NPM_CONFIG_PREFIX") == "" && lookupEnv(env, "npm_config_prefix") == "" {
		set = append(set, "NPM_CONFIG_PREFIX="+filepath.Join(home, ".local"))
	}
	return runtimekit.WithEnv(env, set...)
}

// lookupEnv is the last value of key in env ("" if unset).
func lookupEnv(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}

func containsPath(path, dir string) bool {
	for _, p := range filepath.SplitList(path) {
		if p == dir {
			return true
		}
	}
	return false
}

// kernelUserSiteCode puts pip's user site on the kernel's sys.path even when it did not exist
// when the kernel started (Python adds it only if it exists then): a `!pip install x` in a
// cell is importable in the next one. The directory goes where Python would have put it,
// before the system site-packages, with its .pth files processed.
const kernelUserSiteCode = `def _ship_user_site():
    import os, site, sys
    p = site.getusersitepackages()
    if not site.ENABLE_USER_SITE or p in sys.path:
        return
    try:
        os.makedirs(p, exist_ok=True)
    except OSError:
        return
    n = len(sys.path)
    site.addsitedir(p)
    added = sys.path[n:]
    del sys.path[n:]
    i = next((k for k, e in enumerate(sys.path) if e.endswith(("site-packages", "dist-packages"))), len(sys.path))
    sys.path[i:i] = added
_ship_user_site()
del _ship_user_site
`

// loginProfileFile is the sandbox user's ~/.profile (HOME is the workspace).
const loginProfileFile = ".profile"

// loginProfile puts $HOME/.local/bin first on PATH in login shells: shell commands run as
// `bash -lc` and terminals as `bash -l`, and Debian's /etc/profile resets PATH, so the
// environment alone does not reach them.
const loginProfile = `# ~/.profile of the sandbox user (HOME is the workspace). Ship wrote it because the workspace
# had none, and never changes it: edit it freely. Commands that pip and npm install for this
# user go to $HOME/.local/bin.
case ":$PATH:" in
*":$HOME/.local/bin:"*) ;;
*) PATH="$HOME/.local/bin:$PATH" ;;
esac
export PATH
`

// writeLoginProfile creates the workspace's .profile, as the sandbox user, unless there is one
// (a file or anything else of that name is left alone).
func writeLoginProfile(ws *workspace.Workspace) error {
	return ws.Do(func() error {
		f, err := ws.Root().OpenFile(loginProfileFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		if err != nil {
			return err
		}
		_, err = f.WriteString(loginProfile)
		return errors.Join(err, f.Close())
	})
}

// writableMPLConfig returns env with MPLCONFIGDIR pointing at a directory the sandbox user can
// write. The image prebuilds matplotlib's font cache in MPLCONFIGDIR, but a sandbox's root
// filesystem is read-only, and matplotlib ignores a config directory it cannot write: it would
// warn in every plot's output and rebuild the cache (seconds) in a throwaway directory. The
// prebuilt files are copied, as the sandbox user, into one under /tmp (tmpfs, per container).
func writableMPLConfig(env []string, u *privsep.User, log *slog.Logger) []string {
	src := lookupEnv(env, "MPLCONFIGDIR")
	if src == "" {
		return env
	}
	dst := filepath.Join(os.TempDir(), "shipyard-mplconfig")
	err := u.Do(func() error {
		if unix.Access(src, unix.W_OK) == nil {
			dst = src // writable already (a writable root filesystem, ship run by hand)
			return nil
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		return os.CopyFS(dst, os.DirFS(src))
	})
	if err != nil && !errors.Is(err, fs.ErrExist) {
		log.Warn("cannot prepare a writable matplotlib config directory", "from", src, "err", err)
		return env
	}
	return runtimekit.WithEnv(env, "MPLCONFIGDIR="+dst)
}
