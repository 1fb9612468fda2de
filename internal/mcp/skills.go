package mcp

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/shipyard-dev/shipyard/api/bayapi"
	"github.com/shipyard-dev/shipyard/sdk"
)

// Skills as MCP resources: every knowledge skill of bay's library is listed as the resource
// skill://<name>/SKILL.md (name, description and size: what an agent needs to choose), and
// any file of any skill reads as skill://<name>/<path>, so an agent loads descriptions first
// and bodies on demand. The list follows the library: resources/list asks bay each time.
// Invocable skills become tools skill.<id> once bay runs them (invoke).

// SkillURIScheme names skill resources.
const SkillURIScheme = "skill"

const maxSkillResourceBytes = 4 << 20

func skillURI(name, path string) string {
	return SkillURIScheme + "://" + name + "/" + path
}

// addSkillResources registers the skill resource template and the live resources/list.
func (s *server) addSkillResources(srv *mcpsdk.Server) {
	srv.AddResourceTemplate(&mcpsdk.ResourceTemplate{
		URITemplate: SkillURIScheme + "://{name}/{+path}",
		Name:        "skill-file",
		Title:       "A file of a skill of bay's library",
		Description: "skill://<name>/SKILL.md is a skill's instructions; other paths are its scripts, templates, references and assets.",
	}, s.readSkillResource)
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			if method != "resources/list" {
				return next(ctx, method, req)
			}
			return s.listSkillResources(ctx, req.GetExtra())
		}
	})
}

func (s *server) listSkillResources(ctx context.Context, extra *mcpsdk.RequestExtra) (*mcpsdk.ListResourcesResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	c, err := s.client(ctx, extra)
	if err != nil {
		return nil, err
	}
	list, err := c.ListSkills(ctx)
	if err != nil {
		return nil, fmt.Errorf("list skills: %w", err)
	}
	res := &mcpsdk.ListResourcesResult{Resources: []*mcpsdk.Resource{}}
	for _, sk := range list.Items {
		if sk.Kind != bayapi.SkillKindKnowledge {
			continue
		}
		res.Resources = append(res.Resources, &mcpsdk.Resource{
			URI: skillURI(sk.Name, "SKILL.md"), Name: sk.Name, Title: sk.Name + " (skill)",
			Description: sk.Description, MIMEType: "text/markdown",
		})
	}
	return res, nil
}

func (s *server) readSkillResource(ctx context.Context, req *mcpsdk.ReadResourceRequest) (*mcpsdk.ReadResourceResult, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	uri := req.Params.URI
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != SkillURIScheme || u.Host == "" || len(u.Path) < 2 {
		return nil, mcpsdk.ResourceNotFoundError(uri)
	}
	c, err := s.client(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := c.ReadSkillFile(ctx, u.Host, strings.TrimPrefix(u.Path, "/"), &limitedBuffer{b: &buf, left: maxSkillResourceBytes}); err != nil {
		if e, ok := asNotFound(err); ok {
			return nil, mcpsdk.ResourceNotFoundError(uri + ": " + e)
		}
		return nil, fmt.Errorf("read %s: %w", uri, err)
	}
	content := &mcpsdk.ResourceContents{URI: uri}
	if utf8.Valid(buf.Bytes()) {
		content.Text = buf.String()
		if strings.HasSuffix(uri, ".md") {
			content.MIMEType = "text/markdown"
		} else {
			content.MIMEType = "text/plain"
		}
	} else {
		content.Blob = buf.Bytes()
		content.MIMEType = "application/octet-stream"
	}
	return &mcpsdk.ReadResourceResult{Contents: []*mcpsdk.ResourceContents{content}}, nil
}

// limitedBuffer refuses writes past its limit.
type limitedBuffer struct {
	b    *bytes.Buffer
	left int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if len(p) > l.left {
		return 0, fmt.Errorf("skill file larger than %d bytes", maxSkillResourceBytes)
	}
	l.left -= len(p)
	return l.b.Write(p)
}

// asNotFound reports a bay answer that the skill or file does not exist, with its message.
func asNotFound(err error) (string, bool) {
	e, ok := sdk.AsError(err)
	if !ok || (e.Code != bayapi.CodeNotFound && e.Code != bayapi.CodeFileNotFound) {
		return "", false
	}
	return e.Message, true
}
