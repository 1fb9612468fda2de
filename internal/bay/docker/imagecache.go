package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
)

// The image cache serves an image's hot, read-only directories (the Python library trees that
// every kernel start imports from) from engine volumes instead of from the image's storage
// driver. On fuse-overlayfs (an engine without kernel overlayfs, as on this project's CI) or
// vfs, every file a starting kernel opens goes through a user-space filesystem or a full copy;
// from a local volume it is a plain bind mount. Measured here: a cold create to the first
// python result drops from about 1.9 s to 1.2 s.
//
// How it works, for an image that declares LabelHotPaths:
//   - a keeper container "shipyard-imagecache-<image id>" is created (never started) with one
//     fresh volume per hot path mounted at that path; the engine copies the image's files into
//     an empty volume when the container is created, so once the create has returned the
//     volumes hold the image's trees. The keeper stays: it is the marker that the copy is
//     complete and it keeps the volumes in use so that a volume prune cannot take them;
//   - sandbox containers of that image are then created from the image id (so that the trees
//     and the image cannot disagree if the tag moves) with those volumes mounted read-only, with
//     no copy;
//   - the first create of an image starts the copy in the background and goes ahead without
//     the cache; several bays on one engine agree through the keeper's name;
//   - keepers of images that no longer have a tag are removed with their volumes.
//
// The mode is ImageCacheAuto by default: on when the engine's storage driver is one of
// slowStorageDrivers, off otherwise (kernel overlayfs reads at native speed).

// LabelHotPaths on an image lists, comma-separated, the absolute directories read at nearly
// every start and never written at run time. LabelHotPathsKey, optional, names their content:
// images with the same key (the sandbox image rebuilt with another ship binary on the same root
// filesystem) share one cache. Without it the image id is the key.
const (
	LabelHotPaths    = "dev.shipyard.image.hot-paths"
	LabelHotPathsKey = "dev.shipyard.image.hot-paths-key"
)

// Labels of the keeper container and its volumes.
const (
	labelCacheKey  = "dev.shipyard.image-cache.key"  // the cache key
	labelCachePath = "dev.shipyard.image-cache.path" // volumes: the hot path they hold
	cachePrefix    = "shipyard-imagecache-"
)

// ImageCacheMode selects when the image cache is used.
type ImageCacheMode string

const (
	ImageCacheAuto ImageCacheMode = "auto"
	ImageCacheOn   ImageCacheMode = "on"
	ImageCacheOff  ImageCacheMode = "off"
)

// slowStorageDrivers are the engine storage drivers under which the cache pays off.
var slowStorageDrivers = []string{"fuse-overlayfs", "vfs"}

// cacheRetry is how long a failed copy waits before the next create tries again.
const cacheRetry = time.Minute

// cachePopulateTimeout bounds one copy (650 MB of Python trees take 10-30 s here).
const cachePopulateTimeout = 10 * time.Minute

type imageCache struct {
	d *Driver

	mu      sync.Mutex
	enabled *bool                  // decided on first use (auto mode asks the engine)
	entries map[string]*cacheEntry // by cache key
}

type cacheEntry struct {
	ready   chan struct{} // closed when the copy has finished, well or not
	mounts  []mount.Mount // the keeper's mounts when the copy ended well (nil: failed)
	retryAt time.Time     // when a failed entry may be tried again
}

// imageForCreate returns the image reference and extra mounts a container of image should be
// created with: the image id and the cache's read-only mounts when the cache for it is ready,
// else image itself and none (starting the copy in the background when the image declares hot
// paths). It never fails a create: engine errors only mean "no cache this time".
func (c *imageCache) imageForCreate(ctx context.Context, image string, res client.ImageInspectResult) (string, []mount.Mount) {
	if !c.on(ctx) {
		return image, nil
	}
	paths := hotPaths(imageLabels(res))
	if len(paths) == 0 {
		return image, nil
	}
	key, e := c.entry(res, paths)
	if !isClosed(e.ready) || e.mounts == nil {
		return image, nil
	}
	mounts, ok := c.keeperStill(ctx, key, e)
	if !ok {
		return image, nil
	}
	return res.ID, mounts
}

// WarmImageCache makes sure the cache of image is ready (copying it if need be) and reports
// whether it is used: false when the cache is off, or the image declares no hot paths.
func (d *Driver) WarmImageCache(ctx context.Context, image string) (bool, error) {
	c := d.cache
	if !c.on(ctx) {
		return false, nil
	}
	for {
		// Inspected on every round: the tag may move to an image with another key meanwhile.
		res, err := d.cli.ImageInspect(ctx, image)
		if err != nil {
			return false, fmt.Errorf("image cache: inspect %s: %w", image, classify(err))
		}
		paths := hotPaths(imageLabels(res))
		if len(paths) == 0 {
			return false, nil
		}
		key, e := c.entry(res, paths)
		select {
		case <-ctx.Done():
			return false, fmt.Errorf("image cache for %s: %w", image, ctx.Err())
		case <-e.ready:
		}
		if e.mounts != nil {
			if _, ok := c.keeperStill(ctx, key, e); ok {
				return true, nil
			}
			continue // the keeper vanished; the next round copies again
		}
		if err := sleepCtx(ctx, time.Until(e.retryAt)); err != nil {
			return false, fmt.Errorf("image cache for %s: copy failed, see the log: %w", image, err)
		}
	}
}

// entry returns the cache key and entry of an inspected image that declares paths, starting
// the copy when there is no entry yet or the last copy failed and may be retried.
func (c *imageCache) entry(res client.ImageInspectResult, paths []string) (string, *cacheEntry) {
	key := cacheKey(res)
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.entries[key]
	if e == nil || (e.mounts == nil && isClosed(e.ready) && time.Now().After(e.retryAt)) {
		e = &cacheEntry{ready: make(chan struct{})}
		c.entries[key] = e
		go c.populate(key, res.ID, paths, e)
	}
	return key, e
}

// keeperStill returns the current mounts of a ready entry's keeper, or drops the entry (the
// next use copies again) when the keeper is gone. The keeper holds the volumes: while it
// exists they do, so its mounts are read afresh on every create. Without this, a keeper
// removed by hand (docker container prune) and its volumes pruned would make the engine
// auto-create empty volumes under the old names and hide the image's Python; and a keeper
// recreated by another bay has other volumes.
func (c *imageCache) keeperStill(ctx context.Context, key string, e *cacheEntry) ([]mount.Mount, bool) {
	mounts, err := c.keeperMounts(ctx, cachePrefix+shortID(key), key)
	if err == nil {
		return mounts, true
	}
	c.mu.Lock()
	if c.entries[key] == e {
		delete(c.entries, key)
	}
	c.mu.Unlock()
	c.d.log.WarnContext(ctx, "image cache: keeper gone, creating without the cache", "cache_key", shortID(key), "err", err)
	return nil, false
}

// on reports whether the cache is in use, asking the engine once in auto mode.
func (c *imageCache) on(ctx context.Context) bool {
	switch c.d.cfg.ImageCache {
	case ImageCacheOff:
		return false
	case ImageCacheOn:
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.enabled == nil {
		info, err := c.d.cli.Info(ctx, client.InfoOptions{})
		if err != nil {
			return false // asked again next time
		}
		on := slices.Contains(slowStorageDrivers, info.Info.Driver)
		c.enabled = &on
		c.d.log.InfoContext(ctx, "image cache", "storage_driver", info.Info.Driver, "enabled", on)
	}
	return *c.enabled
}

func imageLabels(res client.ImageInspectResult) map[string]string {
	if res.Config == nil {
		return nil
	}
	return res.Config.Labels
}

// builtLayers is how many layers an image of `bay image build` has: its root filesystem and
// the runtime's own files.
const builtLayers = 2

// cacheKey is the image's LabelHotPathsKey when it is a plain hex digest and the image has no
// more layers than `bay image build` makes, else its id. An image built FROM one of ours
// inherits the label but its own layers may add to the hot paths (a Python package in
// /usr/lib/python3/dist-packages): the parent's cache mounted over them would hide them.
func cacheKey(res client.ImageInspectResult) string {
	k := imageLabels(res)[LabelHotPathsKey]
	if len(k) >= 12 && len(k) <= 128 && strings.Trim(k, "0123456789abcdef") == "" &&
		res.RootFS.Type != "" && len(res.RootFS.Layers) <= builtLayers {
		return k
	}
	return res.ID
}

// hotPaths parses LabelHotPaths: clean absolute paths other than "/", without duplicates.
func hotPaths(labels map[string]string) []string {
	var out []string
	for p := range strings.SplitSeq(labels[LabelHotPaths], ",") {
		p = strings.TrimSpace(p)
		if !strings.HasPrefix(p, "/") || path.Clean(p) != p || p == "/" || slices.Contains(out, p) {
			continue
		}
		out = append(out, p)
	}
	return out
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// populate fills e: from an existing keeper of key, or by creating one from image id (copying
// the trees).
func (c *imageCache) populate(key, id string, paths []string, e *cacheEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), cachePopulateTimeout)
	defer cancel()
	began := time.Now()
	log := c.d.log.With("cache_key", shortID(key), "image_id", shortID(id))
	mounts, err := c.keeper(ctx, key, id, paths)
	c.mu.Lock()
	if err != nil {
		e.retryAt = time.Now().Add(cacheRetry)
		log.Warn("image cache copy failed; creates go on without it", "err", err, "retry_in", cacheRetry)
	} else {
		e.mounts = mounts
		log.Info("image cache ready", "paths", paths, "took_ms", time.Since(began).Milliseconds())
	}
	close(e.ready)
	c.mu.Unlock()
	if err == nil {
		c.pruneStale(ctx, key)
	}
}

// keeper returns the read-only mounts of key's keeper, creating the keeper from image id (and
// so copying the trees) when there is none. Another process creating it at the same time is
// waited for.
func (c *imageCache) keeper(ctx context.Context, key, id string, paths []string) ([]mount.Mount, error) {
	name := cachePrefix + shortID(key)
	delay := 100 * time.Millisecond
	for {
		ms, err := c.keeperMounts(ctx, name, key)
		if err == nil {
			return ms, nil
		}
		if !cerrdefs.IsNotFound(err) {
			return nil, err
		}
		// A keeper that is listed but answers 404 is still being created (copying) by another
		// bay: wait for it rather than race it.
		creating, err := c.d.listed(ctx, name)
		if err != nil {
			return nil, err
		}
		if !creating {
			ms, err := c.createKeeper(ctx, name, key, id, paths)
			if err == nil || !cerrdefs.IsConflict(err) {
				return ms, err
			}
		}
		if err := sleepCtx(ctx, delay); err != nil {
			return nil, fmt.Errorf("wait for the keeper %s another process is creating: %w", name, err)
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// keeperMounts inspects the keeper and returns its volumes as read-only, no-copy mounts.
func (c *imageCache) keeperMounts(ctx context.Context, name, key string) ([]mount.Mount, error) {
	res, err := c.d.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("inspect image cache keeper %s: %w", name, classify(err))
	}
	k := res.Container
	if k.Config == nil || k.Config.Labels[labelCacheKey] != key {
		return nil, fmt.Errorf("container %s exists but is not the image cache keeper of %s", name, shortID(key))
	}
	var out []mount.Mount
	for _, m := range k.Mounts {
		if m.Type == mount.TypeVolume && m.Name != "" {
			out = append(out, mount.Mount{Type: mount.TypeVolume, Source: m.Name, Target: m.Destination,
				ReadOnly: true, VolumeOptions: &mount.VolumeOptions{NoCopy: true}})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("image cache keeper %s has no volumes", name)
	}
	slices.SortFunc(out, func(a, b mount.Mount) int { return strings.Compare(a.Target, b.Target) })
	return out, nil
}

// createKeeper creates fresh volumes and the keeper that copies the image's trees into them.
// The volume names carry a random part: a volume left by an interrupted copy is never reused
// half-filled (the engine copies only into an empty volume). A failure removes what it made.
func (c *imageCache) createKeeper(ctx context.Context, name, key, id string, paths []string) (ms []mount.Mount, err error) {
	var nonce [4]byte
	rand.Read(nonce[:])
	var vols []string
	defer func() {
		if err != nil {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
			defer cancel()
			for _, v := range vols {
				if rerr := c.d.DeleteVolume(dctx, v); rerr != nil {
					c.d.log.WarnContext(ctx, "image cache: remove volume after a failed copy", "volume", v, "err", rerr)
				}
			}
		}
	}()
	var mounts []mount.Mount
	for _, p := range paths {
		sum := sha256.Sum256([]byte(p))
		v := cachePrefix + shortID(key) + "-" + hex.EncodeToString(nonce[:]) + "-" + hex.EncodeToString(sum[:4])
		_, err := c.d.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: v, Driver: "local",
			Labels: map[string]string{labelCacheKey: key, labelCachePath: p}})
		if err != nil {
			return nil, fmt.Errorf("create volume %s: %w", v, classify(err))
		}
		vols = append(vols, v)
		mounts = append(mounts, mount.Mount{Type: mount.TypeVolume, Source: v, Target: p})
	}
	c.d.log.InfoContext(ctx, "image cache: copying the image's hot paths into volumes", "cache_key", shortID(key), "image_id", shortID(id), "paths", paths)
	_, err = c.d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: name,
		Config: &container.Config{Image: id, Labels: map[string]string{labelCacheKey: key},
			Entrypoint: []string{"/nonexistent-never-started"}, NetworkDisabled: true},
		HostConfig: &container.HostConfig{Mounts: mounts, NetworkMode: "none"},
	})
	if err != nil {
		if cerrdefs.IsConflict(err) {
			return nil, fmt.Errorf("create keeper %s: %w", name, err) // IsConflict still holds
		}
		// The create may have got far enough to exist: remove it before its volumes.
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RemoveTimeout)
		c.d.removeContainer(dctx, name)
		cancel()
		return nil, fmt.Errorf("create keeper %s: %w", name, classify(err))
	}
	return c.keeperMounts(ctx, name, key)
}

// pruneStale removes the keepers (and their volumes) of keys no tagged image has any more,
// other than current, and cache volumes no keeper holds that are older than a copy can take
// (left by a bay that died between creating them and creating their keeper). Volumes still
// mounted by a sandbox stay until a later prune.
func (c *imageCache) pruneStale(ctx context.Context, current string) {
	res, err := c.d.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", labelCacheKey)})
	if err != nil {
		c.d.log.WarnContext(ctx, "image cache: list keepers", "err", err)
		return
	}
	held := map[string]bool{}
	for _, k := range res.Items {
		key := k.Labels[labelCacheKey]
		isKeeper := slices.ContainsFunc(k.Names, func(n string) bool { return strings.HasPrefix(n, "/"+cachePrefix) })
		if key == current || !isKeeper || c.keyInUse(ctx, key) {
			for _, m := range k.Mounts {
				held[m.Name] = true
			}
			continue
		}
		if err := c.d.removeContainer(ctx, k.ID); err != nil {
			c.d.log.WarnContext(ctx, "image cache: remove a stale keeper", "container", k.ID, "err", err)
			continue
		}
		c.d.log.InfoContext(ctx, "image cache: removed the cache no tagged image uses", "cache_key", shortID(key))
	}
	vols, err := c.d.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).Add("label", labelCacheKey)})
	if err != nil {
		c.d.log.WarnContext(ctx, "image cache: list volumes", "err", err)
		return
	}
	for _, v := range vols.Items {
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		if held[v.Name] || created.IsZero() || time.Since(created) < cachePopulateTimeout {
			continue
		}
		if err := c.d.DeleteVolume(ctx, v.Name); err != nil {
			c.d.log.InfoContext(ctx, "image cache: a stale volume stays for now", "volume", v.Name, "err", err)
		}
	}
}

// keyInUse reports whether a tagged image has this cache key (or is it, for id keys). It
// answers true when unsure.
func (c *imageCache) keyInUse(ctx context.Context, key string) bool {
	if strings.HasPrefix(key, "sha256:") {
		img, err := c.d.cli.ImageInspect(ctx, key)
		return err == nil && len(img.RepoTags) > 0 || err != nil && !cerrdefs.IsNotFound(err)
	}
	imgs, err := c.d.cli.ImageList(ctx, client.ImageListOptions{
		Filters: make(client.Filters).Add("label", LabelHotPathsKey+"="+key)})
	if err != nil {
		return true
	}
	return slices.ContainsFunc(imgs.Items, func(i image.Summary) bool { return len(i.RepoTags) > 0 })
}

// shortID is the first 12 hex digits of an image id ("sha256:..." or bare).
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		id = id[:12]
	}
	return id
}
