package app

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
)

// SeedUploader is the uploaded_by of skills loaded from skills.seed_dir.
const SeedUploader = "seed"

// openSkills opens the skill library in skills.dir (default <dataDir or .>/skills), loads
// skills.seed_dir into it and stores the archives of versions uploaded before the database
// kept them.
func openSkills(ctx context.Context, cfg *config.Config, store bay.Store, dataDir string, log *slog.Logger) (*skills.Library, error) {
	dir, err := filepath.Abs(cmp.Or(cfg.Skills.Dir, filepath.Join(cmp.Or(dataDir, "."), "skills")))
	if err != nil {
		return nil, fmt.Errorf("skills dir: %w", err)
	}
	if seed := filepath.Clean(cfg.Skills.SeedDir); cfg.Skills.SeedDir != "" && (within(dir, seed) || within(seed, dir)) {
		// The library writes its index and versions into its directory: inside the seed folder
		// they would become folders the next load refuses (and dirty a source tree).
		return nil, fmt.Errorf("skills.dir %s and skills.seed_dir %s overlap: set skills.dir (or BAY_DATA_DIR) elsewhere", dir, seed)
	}
	lib, err := skills.New(store, skills.Config{Dir: dir, Limits: skills.Limits{
		MaxArchiveBytes:  int64(cfg.Skills.MaxArchiveBytes),
		MaxUnpackedBytes: int64(cfg.Skills.MaxUnpackedBytes),
		MaxFiles:         cfg.Skills.MaxFiles,
	}}, log)
	if err != nil {
		return nil, err
	}
	if cfg.Skills.SeedDir != "" {
		loaded, err := lib.LoadDir(ctx, cfg.Skills.SeedDir, SeedUploader)
		if err != nil {
			return nil, err
		}
		log.InfoContext(ctx, "skills loaded", "component", "skills", "seed_dir", cfg.Skills.SeedDir, "skills", loaded)
	}
	// Versions uploaded before the database kept archives: this bay's files make them
	// available to the other bays.
	if n, err := lib.Backfill(ctx); err != nil {
		log.WarnContext(ctx, "storing the archives of skill versions", "component", "skills", "err", err)
	} else if n > 0 {
		log.InfoContext(ctx, "skill archives stored for versions uploaded before", "component", "skills", "versions", n)
	}
	if cfg.Skills.RootPath == "" {
		// Profiles name library skills; one the library lacks is skipped at every start.
		for _, p := range cfg.Profiles {
			for _, name := range p.Skills {
				if _, err := lib.Get(ctx, name); bay.IsNotFound(err) {
					log.WarnContext(ctx, "a profile names a skill the library does not have (upload it, or it is not mounted)",
						"component", "skills", "profile", p.ID, "skill", name)
				}
			}
		}
	}
	return lib, nil
}

// within reports whether path is dir or lies below it (both absolute and clean).
func within(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
