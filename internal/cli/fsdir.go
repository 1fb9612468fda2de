package cli

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/shipyard-dev/shipyard/sdk"
)

// maxTreeFiles bounds one recursive transfer (fs put -r, fs get -r).
const maxTreeFiles = 10000

// putTree uploads the regular files below the local directory dir to remote/<relative path>,
// one streamed upload each (the upload creates the parent directories). Symbolic links and
// other special files are skipped and named on stderr; empty directories are not recreated.
// It returns the number of files and bytes sent.
func (a *app) putTree(ctx context.Context, c *sdk.Client, id, dir, remote string) (files int, bytes int64, err error) {
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			fmt.Fprintf(a.stderr, "shipyard: skipped %s (not a regular file)\n", p)
			return nil
		}
		if files++; files > maxTreeFiles {
			return usageErr("%s has more than %d files: send an archive instead", dir, maxTreeFiles)
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		st, err := f.Stat()
		if err != nil {
			return err
		}
		res, err := c.Upload(ctx, id, path.Join(remote, filepath.ToSlash(rel)), f, st.Size())
		if err != nil {
			return err
		}
		bytes += res.Size
		return nil
	})
	return files, bytes, err
}

// getTree downloads the remote directory dir into the local directory local (created if
// missing), level by level through the directory listing. An existing local file is replaced
// only with force; a name from the sandbox that is not a plain name is refused.
func (a *app) getTree(ctx context.Context, c *sdk.Client, id, dir, local string, force bool) (files int, bytes int64, err error) {
	type pending struct{ remote, local string }
	queue := []pending{{dir, local}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if err := os.MkdirAll(cur.local, 0o755); err != nil {
			return files, bytes, err
		}
		entries, err := c.ListFiles(ctx, id, cur.remote)
		if err != nil {
			return files, bytes, err
		}
		for _, e := range entries {
			if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, `/\`) {
				return files, bytes, fmt.Errorf("the sandbox listed an entry named %q in %s", e.Name, cur.remote)
			}
			rp, lp := path.Join(cur.remote, e.Name), filepath.Join(cur.local, e.Name)
			switch {
			case e.IsDir:
				queue = append(queue, pending{rp, lp})
			case e.IsFile:
				if files++; files > maxTreeFiles {
					return files, bytes, usageErr("%s has more than %d files", dir, maxTreeFiles)
				}
				n, err := downloadTo(ctx, c, id, rp, lp, force, nil)
				if err != nil {
					return files, bytes, err
				}
				bytes += n
			default:
				fmt.Fprintf(a.stderr, "shipyard: skipped %s (not a regular file)\n", rp)
			}
		}
	}
	return files, bytes, nil
}

// downloadTo downloads remote into the local file local through a temporary file renamed into
// place, so that a failure leaves nothing behind; an existing local file is replaced only with
// force. progress, if not nil, sees the bytes.
func downloadTo(ctx context.Context, c *sdk.Client, id, remote, local string, force bool, progress io.Writer) (int64, error) {
	if _, err := os.Lstat(local); err == nil && !force {
		return 0, usageErr("%s exists: pass --force to overwrite it", local)
	}
	tmp, err := os.CreateTemp(filepath.Dir(local), "."+filepath.Base(local)+".part-*")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name())
	w := io.Writer(tmp)
	if progress != nil {
		w = io.MultiWriter(tmp, progress)
	}
	n, err := c.Download(ctx, id, remote, w)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	return n, placeDownload(tmp.Name(), local, force)
}

// isLocalDir reports whether p names an existing directory.
func isLocalDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}
