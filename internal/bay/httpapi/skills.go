package httpapi

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/internal/bay"
	"github.com/shipyard-dev/shipyard/internal/bay/skills"
)

// PrincipalAuthenticator is an Authenticator that also tells admins apart
// (internal/bay/auth.Authenticator). With a plain Authenticator nobody is an admin.
type PrincipalAuthenticator interface {
	Principal(r *http.Request) (owner string, admin bool, err error)
}

// IsAdmin reports whether the request handled by the Server was made with an admin key.
func IsAdmin(r *http.Request) bool {
	v, _ := r.Context().Value(ctxAdmin).(bool)
	return v
}

// skillRoutes are the skill library's endpoints: reads for every owner, writes for admins.
func (s *Server) skillRoutes() []route {
	uploadDoc := func(id, summary string, status int, resp any) opDoc {
		return opDoc{id: id, summary: summary, tag: "skills", multipart: true, status: status, response: resp}
	}
	return []route{
		{method: "GET", pattern: bayapi.PathSkills, auth: true, handler: s.listSkills,
			doc: opDoc{id: "listSkills", summary: "List the skill library (names, descriptions, kinds, manifest summaries)", tag: "skills", status: 200, response: bayapi.SkillList{}}},
		{method: "GET", pattern: bayapi.PathSkill, auth: true, handler: s.getSkill,
			doc: opDoc{id: "getSkill", summary: "One skill: summary, SKILL.md, manifest and file list", tag: "skills", status: 200, response: bayapi.SkillDetail{}}},
		// Matched as /v1/skills/{name}/{rest...}: the documented pattern would collide with the
		// lifecycle's GET /v1/skills/releases/{release_id}/health under Go's routing rules.
		{method: "GET", pattern: bayapi.PathSkillFile, mux: "/v1/skills/{name}/{rest...}", auth: true, handler: s.getSkillFile,
			doc: opDoc{id: "getSkillFile", summary: "One file of a skill's current version", tag: "skills", status: 200, binary: true}},
		{method: "POST", pattern: bayapi.PathAdminSkills, auth: true, handler: s.uploadSkill,
			doc: uploadDoc("uploadSkill", "Upload or replace one skill (admin): a tar.gz or zip archive as the body or a multipart file part; 201 new version, 200 unchanged", 201, bayapi.SkillUploadResponse{})},
		{method: "POST", pattern: bayapi.PathAdminSkillValidate, auth: true, handler: s.validateSkill,
			doc: uploadDoc("validateSkill", "Validate a skill archive without storing it (admin)", 200, bayapi.SkillValidation{})},
		{method: "DELETE", pattern: bayapi.PathAdminSkill, auth: true, handler: s.deleteSkill,
			doc: opDoc{id: "deleteSkill", summary: "Remove a skill from the library (admin; running sessions keep their version)", tag: "skills", status: 204}},
	}
}

// library returns the skill library or answers 503.
func (s *Server) library(w http.ResponseWriter, r *http.Request) *skills.Library {
	if s.opts.Skills == nil {
		s.fail(w, r, bay.Errorf(bay.CodeUnavailable, "The skill library is not available"))
	}
	return s.opts.Skills
}

// admin answers 403 forbidden unless the request was made with an admin key.
func (s *Server) admin(w http.ResponseWriter, r *http.Request) bool {
	if !IsAdmin(r) {
		s.fail(w, r, bay.Errorf(bay.CodeForbidden, "Managing skills needs an admin API key"))
		return false
	}
	return true
}

func (s *Server) listSkills(w http.ResponseWriter, r *http.Request) {
	lib := s.library(w, r)
	if lib == nil {
		return
	}
	sks, err := lib.List(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := bayapi.SkillList{Items: make([]bayapi.SkillSummary, 0, len(sks))}
	for _, sk := range sks {
		out.Items = append(out.Items, renderSkill(sk))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getSkill(w http.ResponseWriter, r *http.Request) {
	lib := s.library(w, r)
	if lib == nil {
		return
	}
	sk, md, err := lib.Detail(r.Context(), r.PathValue("name"))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	d := bayapi.SkillDetail{SkillSummary: renderSkill(sk), SkillMD: string(md), Files: make([]bayapi.SkillFile, 0, len(sk.Files))}
	if sk.Manifest != nil {
		if d.Manifest, err = skills.ManifestFields(sk.Manifest); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	for _, f := range sk.Files {
		d.Files = append(d.Files, bayapi.SkillFile(f))
	}
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) getSkillFile(w http.ResponseWriter, r *http.Request) {
	p, ok := strings.CutPrefix(r.PathValue("rest"), "files/")
	if !ok {
		s.fail(w, r, bay.Errorf(bay.CodeNotFound, "Not found: %s", r.URL.Path))
		return
	}
	lib := s.library(w, r)
	if lib == nil {
		return
	}
	if len(p) > bayapi.MaxPathLen {
		s.fail(w, r, bay.Errorf(bay.CodeInvalidPath, "Path longer than %d bytes", bayapi.MaxPathLen))
		return
	}
	f, sk, err := lib.OpenFile(r.Context(), r.PathValue("name"), p)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		s.fail(w, r, fmt.Errorf("stat skill file: %w", err))
		return
	}
	ctype := mime.TypeByExtension(path.Ext(p))
	if ctype == "" || strings.HasPrefix(ctype, "text/html") {
		ctype = "application/octet-stream"
	}
	if path.Base(p) == skills.SkillFile || path.Ext(p) == ".md" {
		ctype = "text/markdown; charset=utf-8"
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size(), 10))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Skill-Version", sk.Version)
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, f)
}

// adminArchive checks that an admin called and reads the archive; nil when it answered.
func (s *Server) adminArchive(w http.ResponseWriter, r *http.Request) (*skills.Library, []byte) {
	lib := s.library(w, r)
	if lib == nil || !s.admin(w, r) {
		return nil, nil
	}
	data, err := s.readArchive(r, lib.Limits().MaxArchiveBytes)
	if err != nil {
		s.fail(w, r, err)
		return nil, nil
	}
	return lib, data
}

func (s *Server) uploadSkill(w http.ResponseWriter, r *http.Request) {
	lib, data := s.adminArchive(w, r)
	if lib == nil {
		return
	}
	res, err := lib.Upload(r.Context(), data, Owner(r.Context()))
	if err != nil {
		s.fail(w, r, err)
		return
	}
	status := http.StatusOK
	if res.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, bayapi.SkillUploadResponse{Skill: renderSkill(res.Skill), Created: res.Created, Warnings: renderProblems(res.Warnings)})
}

func (s *Server) validateSkill(w http.ResponseWriter, r *http.Request) {
	lib, data := s.adminArchive(w, r)
	if lib == nil {
		return
	}
	v := lib.Validate(r.Context(), data)
	writeJSON(w, http.StatusOK, bayapi.SkillValidation{Valid: v.Valid, Name: v.Name, Version: v.Version, Kind: v.Kind,
		Errors: renderProblems(v.Errors), Warnings: renderProblems(v.Warnings)})
}

func (s *Server) deleteSkill(w http.ResponseWriter, r *http.Request) {
	lib := s.library(w, r)
	if lib == nil || !s.admin(w, r) {
		return
	}
	if err := lib.Delete(r.Context(), r.PathValue("name")); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// readArchive reads an uploaded archive: the body itself, or the "file" part of a
// multipart/form-data body. More than max bytes is 413 payload_too_large.
func (s *Server) readArchive(r *http.Request, max int64) ([]byte, error) {
	tooLarge := bay.Errorf(bay.CodePayloadTooLarge, "Skill archive larger than %d bytes", max).WithDetails(map[string]any{"limit_bytes": max})
	if r.ContentLength > max+1<<20 {
		return nil, tooLarge
	}
	var src io.Reader = r.Body
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "multipart/form-data" {
		r.Body = struct {
			io.Reader
			io.Closer
		}{bufio.NewReaderSize(r.Body, 64<<10), r.Body}
		mr, err := r.MultipartReader()
		if err != nil {
			return nil, bay.Errorf(bay.CodeValidation, "Malformed multipart body")
		}
		for {
			part, err := mr.NextPart()
			if err == io.EOF {
				return nil, bay.Errorf(bay.CodeValidation, "No %q part in the multipart body", bayapi.UploadFileField).
					WithDetails(map[string]any{"field": bayapi.UploadFileField})
			}
			if err != nil {
				return nil, bay.Errorf(bay.CodeValidation, "Malformed multipart body")
			}
			if part.FormName() == bayapi.UploadFileField {
				src = part
				break
			}
		}
	}
	data, err := io.ReadAll(io.LimitReader(src, max+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge
		}
		return nil, bay.Errorf(bay.CodeValidation, "Unreadable request body").WithCause(err)
	}
	if int64(len(data)) > max {
		return nil, tooLarge
	}
	if len(data) == 0 {
		return nil, bay.Errorf(bay.CodeValidation, "Empty body: send a tar.gz or zip archive of one skill folder")
	}
	return data, nil
}

// checkSkillNames bounds a create request's skills list (the library checks the names).
func checkSkillNames(is *issues, names []string) {
	if len(names) > bayapi.MaxSkillsPerSandbox {
		is.add("too_long", []any{"body", "skills"}, fmt.Sprintf("List should have at most %d items", bayapi.MaxSkillsPerSandbox),
			len(names), map[string]any{"max_length": bayapi.MaxSkillsPerSandbox})
		return
	}
	for i, n := range names {
		is.strLen(&n, 64, "body", "skills", i)
	}
}

// renderSkill is the list entry of a skill version.
func renderSkill(sk *bay.Skill) bayapi.SkillSummary {
	out := bayapi.SkillSummary{
		Name: sk.Name, Description: sk.Description, Version: sk.Version, Kind: sk.Kind,
		HasScripts: sk.HasDir("scripts"), HasTemplates: sk.HasDir("templates"),
		HasReferences: sk.HasDir("references"), HasAssets: sk.HasDir("assets"),
		SizeBytes: sk.SizeBytes, CreatedAt: bayapi.Time{Time: sk.CreatedAt}, UploadedBy: sk.UploadedBy,
		MountPath: bay.SkillsMountRoot + "/" + sk.Name, FileCount: len(sk.Files),
	}
	if sk.Manifest != nil {
		sum := sha256.Sum256(sk.Manifest)
		out.ManifestSHA256 = hex.EncodeToString(sum[:])
		out.Manifest = renderManifest(sk.Manifest)
	}
	return out
}

// renderManifest is the part of a manifest a client needs to pick and call the skill.
func renderManifest(data []byte) *bayapi.ManifestSummary {
	var m struct {
		ID          string `json:"id"`
		Name        string `json:"name"`
		Description string `json:"description"`
		Interface   struct {
			Inputs  map[string]any `json:"inputs"`
			Outputs map[string]any `json:"outputs"`
		} `json:"interface"`
		Runtime struct {
			Image string `json:"image"`
		} `json:"runtime"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil // validated at upload
	}
	return &bayapi.ManifestSummary{ID: m.ID, Name: m.Name, Description: m.Description, Image: m.Runtime.Image,
		Inputs: m.Interface.Inputs, Outputs: m.Interface.Outputs}
}

func renderProblems(ps []bay.SkillProblem) []bayapi.SkillProblem {
	out := make([]bayapi.SkillProblem, 0, len(ps))
	for _, p := range ps {
		out = append(out, bayapi.SkillProblem(p))
	}
	return out
}
