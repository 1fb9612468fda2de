package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// progressOut returns stderr when it is a terminal (progress bars), else nil.
func (a *app) progressOut() io.Writer {
	if f, ok := a.stderr.(*os.File); ok && isTerminal(f) {
		return f
	}
	return nil
}

func (a *app) fsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "fs", Short: "Workspace files: ls, cat, put, get, rm (paths relative to /workspace)"}

	ls := &cobra.Command{Use: "ls <sandbox> [path]", Short: "List a directory", Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := "."
			if len(args) == 2 {
				p = args[1]
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				entries, err := c.ListFiles(ctx, args[0], p)
				if err != nil {
					return err
				}
				if entries == nil {
					entries = []sdk.FileInfo{}
				}
				if a.json() {
					return a.printJSON(map[string][]sdk.FileInfo{"entries": entries})
				}
				w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
				for _, e := range entries {
					size, name := "-", e.Name
					if e.IsDir {
						name += "/"
					} else {
						size = fmt.Sprint(e.Size)
					}
					fmt.Fprintf(w, "%s\t%s\n", size, name)
				}
				return w.Flush()
			})
		}}

	cat := &cobra.Command{Use: "cat <sandbox> <path>", Short: "Print a file (binary-safe, streamed)", Args: exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if a.json() {
					s, err := c.ReadFile(ctx, args[0], args[1])
					if err != nil {
						return err
					}
					return a.printJSON(map[string]string{"content": s})
				}
				_, err := c.Download(ctx, args[0], args[1], a.stdout)
				return err
			})
		}}

	var force, recursive, putRecursive bool
	put := &cobra.Command{Use: "put <sandbox> <local-file | -> [remote-path]", Short: "Upload a file (streamed; '-' reads stdin)", Args: rangeArgs(2, 3),
		Long: `Upload a local file (or stdin with '-') to the sandbox's workspace. Like cp, a remote
path that ends with '/' or names an existing directory receives the file under its own name
(fs put SB report.csv data/ writes data/report.csv); without a remote path the file lands in
/workspace under its own name. With -r the local path is a directory: its regular files are
uploaded below the remote path (default, or with a trailing '/', the directory's own name),
one streamed upload each; empty directories and symbolic links are not sent.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			local := args[1]
			remote := ""
			if len(args) == 3 {
				remote = args[2]
			}
			if putRecursive {
				if !isLocalDir(local) {
					return usageErr("-r uploads a directory: %s is not one", local)
				}
				if remote == "" || strings.HasSuffix(remote, "/") {
					remote = path.Join(remote, filepath.Base(filepath.Clean(local)))
				}
				return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
					files, n, err := a.putTree(ctx, c, args[0], local, remote)
					if err != nil {
						return err
					}
					return a.show(map[string]any{"status": "ok", "path": remote, "files": files, "size": n}, func() {
						fmt.Fprintf(a.stdout, "uploaded %s to %s (%d files, %d bytes)\n", local, remote, files, n)
					})
				})
			}
			var r io.Reader
			size := int64(-1)
			label := local
			if local == "-" {
				if remote == "" {
					return usageErr("a remote path is required when uploading stdin")
				}
				r, label = a.stdin, "stdin"
			} else {
				f, err := os.Open(local)
				if err != nil {
					return usageErr("%v", err) // os.Open names the file
				}
				defer f.Close()
				st, err := f.Stat()
				if err != nil {
					return err
				}
				if !st.Mode().IsRegular() {
					return usageErr("%s is not a regular file", local)
				}
				r, size = f, st.Size()
				if remote == "" || strings.HasSuffix(remote, "/") || remote == "." {
					remote = path.Join(remote, filepath.Base(local))
				}
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				pb := newProgress(a.progressOut(), "put "+label, size)
				body := io.Reader(&teeCounting{r: r, p: pb})
				if rs, ok := r.(io.ReadSeeker); ok {
					body = &teeSeeker{teeCounting: teeCounting{r: rs, p: pb}, s: rs}
				}
				res, err := c.Upload(ctx, args[0], remote, body, size)
				if rs, ok := body.(io.Seeker); ok && local != "-" && sdk.IsCode(err, bayapi.CodeIsADirectory) {
					// The remote path is a directory: the file goes into it, as cp does.
					if _, serr := rs.Seek(0, io.SeekStart); serr == nil {
						remote = path.Join(remote, filepath.Base(local))
						res, err = c.Upload(ctx, args[0], remote, body, size)
					}
				}
				pb.Done()
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(res)
				}
				fmt.Fprintf(a.stdout, "uploaded %s (%d bytes)\n", res.Path, res.Size)
				return nil
			})
		}}

	get := &cobra.Command{Use: "get <sandbox> <remote-path> [local-file | -]", Short: "Download a file (streamed; '-' writes stdout; an existing local file only with --force)", Args: rangeArgs(2, 3),
		Long: `Download a file from the sandbox's workspace. A local path that names an existing
directory receives the file under its own name. With -r the remote path is a directory: its
files are downloaded below the local directory (created if missing; into an existing one
under the remote directory's name), one streamed download each.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			remote := args[1]
			local := path.Base(remote)
			if len(args) == 3 {
				local = args[2]
			}
			if recursive && local == "-" {
				return usageErr("-r writes a directory, not stdout")
			}
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				if local == "-" {
					_, err := c.Download(ctx, args[0], remote, a.stdout)
					return err
				}
				if isLocalDir(local) {
					local = filepath.Join(local, path.Base(remote))
				}
				if recursive {
					files, n, err := a.getTree(ctx, c, args[0], remote, local, force)
					if err != nil {
						return err
					}
					return a.show(map[string]any{"status": "ok", "path": remote, "local_path": local, "files": files, "size": n}, func() {
						fmt.Fprintf(a.stdout, "downloaded %s to %s (%d files, %d bytes)\n", remote, local, files, n)
					})
				}
				pb := newProgress(a.progressOut(), "get "+remote, -1)
				n, err := downloadTo(ctx, c, args[0], remote, local, force, pb)
				pb.Done()
				if err != nil {
					return err
				}
				if a.json() {
					return a.printJSON(map[string]any{"status": "ok", "path": remote, "local_path": local, "size": n})
				}
				fmt.Fprintf(a.stdout, "downloaded %s to %s (%d bytes)\n", remote, local, n)
				return nil
			})
		}}

	rm := &cobra.Command{Use: "rm <sandbox> <path>...", Short: "Delete files or directories (recursive)", Args: rangeArgs(2, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.withClient(cmd, func(ctx context.Context, c *sdk.Client) error {
				for _, p := range args[1:] {
					if err := c.DeleteFile(ctx, args[0], p); err != nil {
						return err
					}
					if a.json() {
						a.printJSON(map[string]string{"status": "ok", "path": p})
					} else {
						fmt.Fprintf(a.stdout, "deleted %s\n", p)
					}
				}
				return nil
			})
		}}
	get.Flags().BoolVarP(&force, "force", "f", false, "overwrite an existing local file")
	get.Flags().BoolVarP(&recursive, "recursive", "r", false, "download a directory")
	put.Flags().BoolVarP(&putRecursive, "recursive", "r", false, "upload a directory's files")
	cmd.AddCommand(ls, cat, put, get, rm)
	return cmd
}

// teeCounting feeds the progress bar with what the upload reads.
type teeCounting struct {
	r io.Reader
	p *progress
}

func (t *teeCounting) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 {
		t.p.Write(b[:n])
	}
	return n, err
}

// teeSeeker keeps the upload replayable (the SDK retries seekable bodies).
type teeSeeker struct {
	teeCounting
	s io.Seeker
}

func (t *teeSeeker) Seek(off int64, whence int) (int64, error) {
	n, err := t.s.Seek(off, whence)
	if err == nil && whence == io.SeekStart {
		t.p.mu.Lock()
		t.p.n = n
		t.p.mu.Unlock()
	}
	return n, err
}

// placeDownload moves the finished download tmp to local. Without force it never replaces a
// file: a hard link fails when local appeared meanwhile (then tmp is left for the caller to
// remove).
func placeDownload(tmp, local string, force bool) error {
	if force {
		return os.Rename(tmp, local)
	}
	if err := os.Link(tmp, local); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageErr("%s exists: pass --force to overwrite it", local)
		}
		return err
	}
	return os.Remove(tmp)
}
