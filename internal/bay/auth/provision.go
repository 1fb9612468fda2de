package auth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/config"
)

// CredentialsFile is the name of the file written on first boot in the data directory.
const CredentialsFile = "credentials.json"

// GeneratedKeyPrefix starts every generated key: "sk-bay-" + 64 hex characters.
const GeneratedKeyPrefix = "sk-bay-"

// Credentials is the content of credentials.json.
type Credentials struct {
	APIKey      string `json:"api_key"`
	Endpoint    string `json:"endpoint"`
	GeneratedAt string `json:"generated_at"` // ISO 8601 with +00:00
}

// ProvisionResult says what Provision did.
type ProvisionResult struct {
	Configured      int    // keys named by BAY_API_KEY, security.api_key and security.api_keys
	Inserted        int    // configured or generated keys newly stored
	Generated       bool   // a key was generated (first boot, no key anywhere, anonymous off)
	CredentialsPath string // where the generated key was written ("" if none)
	Active          int    // keys accepted after provisioning
}

type configuredKey struct {
	hash, prefix, owner, source string
	admin                       bool
}

// Provision stores the configured API keys and returns an Authenticator over every active
// key. Configured keys, each inserted (hash only) if its hash is not stored yet:
//
//   - BAY_API_KEY from env, else security.api_key: owner "default";
//   - security.api_keys entries: plaintext or key_sha256, with their owner (default "default").
//
// Previously stored keys stay valid (reference semantics), unless
// security.revoke_unlisted_keys is set: then only configured keys are accepted (stored rows
// are kept, not deactivated). When a configured key is stored with another owner, the
// configured owner wins.
//
// First boot: when no key is configured, none is stored and anonymous access is disabled, a
// key "sk-bay-" + 64 hex is generated, its hash stored, and the plaintext written to
// <dataDir or ".">/credentials.json (mode 0600, atomic) inside the same transaction, so that
// either both exist or neither does. The path is logged; the key never is.
func Provision(ctx context.Context, store bay.Store, cfg *config.Config, env []string, dataDir string, log *slog.Logger) (*Authenticator, ProvisionResult, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "auth")
	var res ProvisionResult

	keys, err := configuredKeys(cfg, env)
	if err != nil {
		return nil, res, err
	}
	res.Configured = len(keys)
	if cfg.Security.RevokeUnlistedKeys && len(keys) == 0 {
		return nil, res, fmt.Errorf("auth: security.revoke_unlisted_keys needs at least one configured key (%s, security.api_key or security.api_keys)", config.EnvAPIKey)
	}
	override := make(map[string]string, len(keys))
	admins := map[string]bool{}
	for _, k := range keys {
		override[k.hash] = k.owner
		if k.admin {
			admins[k.hash] = true
		}
	}

	if dataDir == "" {
		dataDir = "."
	}
	credPath := filepath.Join(dataDir, CredentialsFile)
	wroteCredentials := false
	var inserted int
	err = store.Tx(ctx, func(tx bay.Tx) error {
		inserted, wroteCredentials = 0, false
		// Revoked keys count too: their hashes can never be stored again.
		stored, err := tx.ListAllAPIKeys(ctx)
		if err != nil {
			return fmt.Errorf("list api keys: %w", err)
		}
		byHash := make(map[string]*bay.APIKey, len(stored))
		for _, k := range stored {
			byHash[strings.ToLower(k.KeyHash)] = k
		}
		now := time.Now().UTC()
		for _, k := range keys {
			if s, ok := byHash[k.hash]; ok {
				if !s.Active {
					log.ErrorContext(ctx, "configured api key was revoked through the admin API and stays revoked; remove it from the configuration",
						"source", k.source, "key_id", s.ID)
					continue
				}
				if s.Owner != k.owner {
					log.WarnContext(ctx, "configured api key is stored with another owner; the configured owner is used",
						"source", k.source, "stored_owner", s.Owner, "owner", k.owner)
				}
				continue
			}
			row := &bay.APIKey{ID: newUUID(), KeyHash: k.hash, KeyPrefix: k.prefix, Owner: k.owner, Active: true, CreatedAt: now}
			if err := tx.InsertAPIKey(ctx, row); err != nil {
				return fmt.Errorf("store api key from %s: %w", k.source, err)
			}
			byHash[k.hash] = row
			inserted++
		}
		if len(keys) > 0 || len(stored) > 0 || cfg.Security.AllowAnonymous {
			return nil
		}
		plain, err := generateKey()
		if err != nil {
			return err
		}
		row := &bay.APIKey{ID: newUUID(), KeyHash: config.KeyHash(plain), KeyPrefix: plain[:12], Owner: bay.OwnerDefault, Active: true, CreatedAt: now}
		if err := tx.InsertAPIKey(ctx, row); err != nil {
			return fmt.Errorf("store generated api key: %w", err)
		}
		inserted++
		creds := Credentials{
			APIKey:      plain,
			Endpoint:    endpoint(cfg.Server),
			GeneratedAt: now.Format("2006-01-02T15:04:05.000000-07:00"),
		}
		if err := writeCredentials(credPath, creds); err != nil {
			return err
		}
		wroteCredentials = true
		return nil
	})
	if err != nil {
		if wroteCredentials { // the transaction failed after the file was written: undo it
			if rmErr := os.Remove(credPath); rmErr != nil && !errors.Is(rmErr, os.ErrNotExist) {
				log.ErrorContext(ctx, "remove credentials of a failed provisioning", "path", credPath, "err", rmErr)
			}
		}
		return nil, res, fmt.Errorf("auth: provision api keys: %w", err)
	}
	res.Inserted = inserted
	if wroteCredentials {
		res.Generated = true
		res.CredentialsPath = credPath
		log.WarnContext(ctx, "no API key configured: generated one; it is in the credentials file (set BAY_API_KEY or security.api_key to choose your own)",
			"path", credPath)
	}

	a := New(store, Options{
		AllowAnonymous: cfg.Security.AllowAnonymous,
		OwnerOverride:  override,
		AdminHashes:    admins,
		OnlyConfigured: cfg.Security.RevokeUnlistedKeys,
		Log:            log,
	})
	if err := a.Reload(ctx); err != nil {
		return nil, res, err
	}
	res.Active = a.KeyCount()
	log.InfoContext(ctx, "api keys provisioned", "configured", res.Configured, "inserted", res.Inserted,
		"active", res.Active, "allow_anonymous", cfg.Security.AllowAnonymous)
	return a, res, nil
}

// configuredKeys lists the keys named by the environment and the configuration.
func configuredKeys(cfg *config.Config, env []string) ([]configuredKey, error) {
	var keys []configuredKey
	seen := map[string]configuredKey{}
	addKey := func(k configuredKey) error {
		if prev, ok := seen[k.hash]; ok {
			if prev.owner != k.owner {
				return fmt.Errorf("auth: %s and %s are the same key with different owners (%q, %q)", prev.source, k.source, prev.owner, k.owner)
			}
			return nil
		}
		seen[k.hash] = k
		keys = append(keys, k)
		return nil
	}
	if v := config.LookupEnv(env, config.EnvAPIKey); v != "" {
		if err := addKey(plainKey(v, bay.OwnerDefault, config.EnvAPIKey)); err != nil {
			return nil, err
		}
	} else if cfg.Security.APIKey != "" {
		if err := addKey(plainKey(cfg.Security.APIKey, bay.OwnerDefault, "security.api_key")); err != nil {
			return nil, err
		}
	}
	for i, k := range cfg.Security.APIKeys {
		owner := k.Owner
		if owner == "" {
			owner = bay.OwnerDefault
		}
		if !config.OwnerRe.MatchString(owner) || owner == bay.OwnerWarmPool {
			return nil, fmt.Errorf("auth: security.api_keys[%d].owner %q is invalid or reserved", i, owner)
		}
		source := fmt.Sprintf("security.api_keys[%d]", i)
		var ck configuredKey
		switch {
		case k.Key != "" && k.KeySHA256 == "":
			ck = plainKey(k.Key, owner, source)
		case k.Key == "" && k.KeySHA256 != "":
			b, err := hex.DecodeString(k.KeySHA256)
			if err != nil || len(b) != 32 {
				return nil, fmt.Errorf("auth: %s.key_sha256 must be 64 hex characters", source)
			}
			ck = configuredKey{hash: hex.EncodeToString(b), owner: owner, source: source}
		default:
			return nil, fmt.Errorf("auth: %s needs exactly one of key and key_sha256", source)
		}
		ck.admin = k.Admin
		if err := addKey(ck); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

func plainKey(plain, owner, source string) configuredKey {
	prefix := plain
	if len(prefix) > 12 {
		prefix = prefix[:12]
	}
	return configuredKey{hash: config.KeyHash(plain), prefix: prefix, owner: owner, source: source}
}

func generateKey() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate api key: %w", err)
	}
	return GeneratedKeyPrefix + hex.EncodeToString(b[:]), nil
}

func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// endpoint is the URL a client on this machine uses: http://host:port, with a wildcard host
// (0.0.0.0, ::, "") replaced by 127.0.0.1.
func endpoint(s config.ServerConfig) string {
	host := s.Host
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, strconv.Itoa(s.Port))
}

// writeCredentials writes the file atomically (temp file in the same directory, fsync,
// rename, fsync of the directory) with mode 0600, creating the directory (0700) if needed.
func writeCredentials(path string, c Credentials) (err error) {
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encode credentials: %w", err)
	}
	data = append(data, '\n')
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data dir %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".credentials-*.json")
	if err != nil {
		return fmt.Errorf("write credentials in %s: %w", dir, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if err := f.Chmod(0o600); err != nil {
		return fmt.Errorf("chmod credentials: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync credentials: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close credentials: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write credentials %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}
