package httpapi

import (
	"context"
	"net/http"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/auth"
)

// WarmPoolReporter reports the warm pools for GET /v1/admin/warmpool (the app combines
// internal/bay/warmpool with this bay's claim counters).
type WarmPoolReporter interface {
	WarmPoolStatus(ctx context.Context) (bayapi.WarmPoolStatus, error)
}

// adminRoutes are the key, owner and warm-pool administration: admin keys only.
func (s *Server) adminRoutes() []route {
	return []route{
		{method: "POST", pattern: bayapi.PathAdminKeys, auth: true, handler: s.createKey,
			doc: opDoc{id: "createAPIKey", summary: "Create an API key (admin): the secret is in this answer only; bay stores its SHA-256 hash", tag: "admin",
				request: bayapi.CreateAPIKeyRequest{}, status: 201, response: bayapi.CreatedAPIKey{}}},
		{method: "GET", pattern: bayapi.PathAdminKeys, auth: true, handler: s.listKeys,
			doc: opDoc{id: "listAPIKeys", summary: "List the API keys, revoked ones included (admin; never the secrets)", tag: "admin", status: 200, response: bayapi.APIKeyList{}}},
		{method: "DELETE", pattern: bayapi.PathAdminKey, auth: true, handler: s.revokeKey,
			doc: opDoc{id: "revokeAPIKey", summary: "Revoke an API key (admin): refused at once by this bay, by the others on the same database within a second", tag: "admin", status: 200, response: bayapi.APIKeyInfo{}}},
		{method: "GET", pattern: bayapi.PathAdminOwners, auth: true, handler: s.listOwners,
			doc: opDoc{id: "listOwners", summary: "List the owners that have API keys (admin)", tag: "admin", status: 200, response: bayapi.OwnerList{}}},
		{method: "GET", pattern: bayapi.PathAdminWarmPool, auth: true, handler: s.warmPool,
			doc: opDoc{id: "warmPoolStatus", summary: "Warm pools by profile: target, ready, starting, hits and misses (admin)", tag: "admin", status: 200, response: bayapi.WarmPoolStatus{}}},
	}
}

// keyAdmin returns the key administration after checking the caller is an admin; nil when
// it answered.
func (s *Server) keyAdmin(w http.ResponseWriter, r *http.Request) *auth.Authenticator {
	if !s.requireAdmin(w, r, "Managing API keys needs an admin API key") {
		return nil
	}
	if s.opts.Keys == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "Key administration is not available"))
	}
	return s.opts.Keys
}

// requireAdmin answers 403 forbidden with msg unless the request was made with an admin key.
func (s *Server) requireAdmin(w http.ResponseWriter, r *http.Request, msg string) bool {
	if !IsAdmin(r) {
		s.fail(w, r, bay.Errorf(bay.CodeForbidden, "%s", msg))
		return false
	}
	return true
}

func renderKey(k auth.KeyInfo) bayapi.APIKeyInfo {
	return bayapi.APIKeyInfo{
		ID: k.ID, Name: k.Name, Prefix: k.Prefix, Owner: k.Owner, Admin: k.Admin, Source: k.Source, Active: k.Active,
		CreatedAt: bayapi.NewTime(k.CreatedAt), LastUsedAt: bayapi.TimePtr(k.LastUsedAt), RevokedAt: bayapi.TimePtr(k.RevokedAt),
	}
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	keys := s.keyAdmin(w, r)
	if keys == nil {
		return
	}
	var req bayapi.CreateAPIKeyRequest
	if err := decodeBody(w, r, &req, "owner", "name"); err != nil {
		s.fail(w, r, err)
		return
	}
	k, err := keys.CreateKey(r.Context(), req.Owner, req.Name, s.svc.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// The secret must not linger in a cache between bay and the admin.
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusCreated, bayapi.CreatedAPIKey{APIKeyInfo: renderKey(k.KeyInfo), Key: k.Secret})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	keys := s.keyAdmin(w, r)
	if keys == nil {
		return
	}
	list, err := keys.ListKeys(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bayapi.APIKeyList{Items: make([]bayapi.APIKeyInfo, 0, len(list))}
	for _, k := range list {
		out.Items = append(out.Items, renderKey(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	keys := s.keyAdmin(w, r)
	if keys == nil {
		return
	}
	k, err := keys.RevokeKey(r.Context(), r.PathValue("key_id"), s.svc.Now())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, renderKey(*k))
}

func (s *Server) listOwners(w http.ResponseWriter, r *http.Request) {
	keys := s.keyAdmin(w, r)
	if keys == nil {
		return
	}
	owners, err := keys.Owners(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bayapi.OwnerList{Items: make([]bayapi.OwnerInfo, 0, len(owners))}
	for _, o := range owners {
		out.Items = append(out.Items, bayapi.OwnerInfo(o))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) warmPool(w http.ResponseWriter, r *http.Request) {
	if !s.requireAdmin(w, r, "The warm pool's state needs an admin API key") {
		return
	}
	if s.opts.WarmPool == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "The warm pool is not available"))
		return
	}
	st, err := s.opts.WarmPool.WarmPoolStatus(r.Context())
	if err != nil {
		s.fail(w, r, bay.Classify(err, "Could not read the warm pool"))
		return
	}
	writeJSON(w, http.StatusOK, st)
}
