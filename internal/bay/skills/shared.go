package skills

// A version's files are written once into this bay's <Dir>/versions/<version>/; the database
// holds each version's normalised archive, so that bays on one database, each with its own
// directory (a Kubernetes replica's emptyDir), serve and mount every version: the first call
// that needs a version this bay has not written materialises it from the archive.

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
)

// materialiseTimeout bounds one materialisation (the archive's read and the writing of its
// files). It runs apart from the request that asked, so that concurrent requests for the same
// version share it and one request going away does not fail the others.
const materialiseTimeout = 2 * time.Minute

// materialiseSlots is how many versions one bay materialises at once: each holds its archive
// and its unpacked files in memory (up to skills.max_archive_bytes plus
// skills.max_unpacked_bytes).
const materialiseSlots = 2

// Archive packs the tree as the normalised archive the database keeps: a gzip-compressed tar
// of the entries in path order, at the archive's root, with fixed times, owners and modes
// (0644, 0755 when executable), so one content always packs to the same bytes.
func (t *Tree) Archive() ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, p := range t.Paths() {
		e := t.Entries[p]
		h := &tar.Header{Name: p, ModTime: time.Unix(0, 0), Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.Data))}
		switch {
		case e.Link != "":
			h.Typeflag, h.Linkname, h.Size, h.Mode = tar.TypeSymlink, e.Link, 0, 0o777
		case e.Executable:
			h.Mode = 0o755
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("pack %s: %w", p, err)
		}
		if e.Link == "" {
			if _, err := tw.Write(e.Data); err != nil {
				return nil, fmt.Errorf("pack %s: %w", p, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// archiveOf packs tree for version, refusing an archive above the library's bound (a skill
// whose hard links became copies may pack larger than its upload).
func (l *Library) archiveOf(tree *Tree, version string) (*bay.SkillArchive, error) {
	data, err := tree.Archive()
	if err != nil {
		return nil, fmt.Errorf("skills: pack version %s: %w", version, err)
	}
	if int64(len(data)) > l.lim.MaxArchiveBytes {
		return nil, bay.Errorf(bay.CodePayloadTooLarge, "The skill packs to %d bytes, more than skills.max_archive_bytes (%d)", len(data), l.lim.MaxArchiveBytes).
			WithDetails(map[string]any{"limit_bytes": l.lim.MaxArchiveBytes})
	}
	sum := sha256.Sum256(data)
	return &bay.SkillArchive{Version: version, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)), Data: data, CreatedAt: l.clock.Now()}, nil
}

// validVersion reports whether v can name a version (a sha256 in hex): versions come from the
// database and exec records, and name a directory.
func validVersion(v string) bool {
	if len(v) != 64 {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil
}

// flight is one materialisation in progress; done is closed when err is set.
type flight struct {
	done chan struct{}
	err  error
}

// Dir returns the directory of version's files on this bay, materialising it from the
// database's archive first when this bay has not written it: the archive (at most
// skills.max_archive_bytes) is checked against its sha256, unpacked in memory under the
// library's limits, checked to be the version it is filed under, written to a temporary
// directory and renamed into place. Concurrent calls for one version share one
// materialisation.
func (l *Library) Dir(ctx context.Context, version string) (string, error) {
	if !validVersion(version) {
		return "", fmt.Errorf("skills: %q is not a skill version", version)
	}
	dir := l.VersionDir(version)
	if _, err := os.Stat(dir); err == nil {
		return dir, nil
	}
	l.flightMu.Lock()
	f, ok := l.flights[version]
	if !ok {
		f = &flight{done: make(chan struct{})}
		l.flights[version] = f
		go func() {
			mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), materialiseTimeout)
			f.err = l.fetch(mctx, version)
			cancel()
			l.flightMu.Lock()
			delete(l.flights, version)
			l.flightMu.Unlock()
			close(f.done)
		}()
	}
	l.flightMu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if f.err != nil {
		return "", f.err
	}
	return dir, nil
}

// fetch materialises version from the database's archive.
func (l *Library) fetch(ctx context.Context, version string) error {
	select {
	case l.slots <- struct{}{}:
		defer func() { <-l.slots }()
	case <-ctx.Done():
		return fmt.Errorf("skill version %s: waiting to materialise: %w", version, ctx.Err())
	}
	if _, err := os.Stat(l.VersionDir(version)); err == nil {
		return nil // written by the flight that just ended
	}
	began := time.Now()
	a, err := l.store.GetSkillArchive(ctx, version, l.lim.MaxArchiveBytes)
	if bay.IsNotFound(err) {
		return fmt.Errorf("skill version %s: in neither this bay's skills dir %s nor the database (uploaded before bays kept archives, by a bay whose directory is gone)", version, l.dir)
	}
	if err != nil {
		return err // the store's error names the version
	}
	if a.Data == nil {
		return fmt.Errorf("skill version %s: its archive is %d bytes, more than skills.max_archive_bytes (%d)", version, a.Size, l.lim.MaxArchiveBytes)
	}
	if sum := sha256.Sum256(a.Data); hex.EncodeToString(sum[:]) != a.SHA256 {
		return fmt.Errorf("skill version %s: the stored archive does not match its sha256 %s", version, a.SHA256)
	}
	// The archive passed every bound at upload, but packs tighter than the upload may have:
	// the unpacked size and file count still bound it, the compression ratio does not (a
	// ratio no archive of at least one byte can exceed, small enough not to overflow).
	lim := l.lim
	lim.MaxRatio = lim.MaxUnpackedBytes + 1
	tree, problems := ReadArchive(a.Data, lim)
	if len(problems) > 0 {
		return fmt.Errorf("skill version %s: the stored archive does not unpack: %s", version, problemsText(problems))
	}
	if got := tree.Version(); got != version {
		return fmt.Errorf("skill version %s: the stored archive unpacks to version %s", version, got)
	}
	if err := l.materialise(tree, version); err != nil {
		return err
	}
	l.log.InfoContext(ctx, "skill version materialised from the database", "version", version, "archive_bytes", a.Size,
		"files", len(tree.Entries), "duration_ms", time.Since(began).Milliseconds())
	return nil
}

// Backfill stores the archive of every current version this bay has files of and the database
// has no archive for (versions uploaded before the database kept archives), so that other
// bays can materialise them. It returns how many it stored; a version that fails is logged
// and skipped.
func (l *Library) Backfill(ctx context.Context) (int, error) {
	sks, err := l.List(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sk := range sks {
		_, err := l.store.GetSkillArchive(ctx, sk.Version, 0)
		if err == nil {
			continue
		}
		if !bay.IsNotFound(err) {
			return n, fmt.Errorf("skill %s@%s: %w", sk.Name, sk.Version, err)
		}
		dir := l.VersionDir(sk.Version)
		if _, err := os.Stat(dir); err != nil {
			continue // another bay's: that bay stores it
		}
		tree, problems := ReadDir(dir, l.lim)
		if len(problems) > 0 || tree.Version() != sk.Version {
			l.log.WarnContext(ctx, "skill version's files do not match it; archive not stored", "name", sk.Name, "version", sk.Version)
			continue
		}
		a, err := l.archiveOf(tree, sk.Version)
		if err == nil {
			err = l.store.Tx(ctx, func(tx bay.Tx) error { return tx.PutSkillArchive(ctx, a) })
		}
		if err != nil {
			l.log.WarnContext(ctx, "store a skill version's archive", "name", sk.Name, "version", sk.Version, "err", err)
			continue
		}
		n++
	}
	return n, nil
}
