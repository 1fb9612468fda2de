package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// The e2e suite holds every JSON response bay gives it to bay's own OpenAPI document
// (getkin/kin-openapi): status documented for the operation, body matching its schema.

// specs caches the document's router per bay URL (every bay of the suite serves the same
// document, but a test may run bays of different versions in principle).
var specs sync.Map // URL -> routers.Router

func (b *Bay) openAPIRouter() routers.Router {
	if r, ok := specs.Load(b.URL); ok {
		return r.(routers.Router)
	}
	res, err := b.http.Get(b.URL + "/openapi.json")
	if err != nil {
		b.t.Fatalf("GET /openapi.json: %v", err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		b.t.Fatalf("read /openapi.json: %v", err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err == nil {
		err = doc.Validate(context.Background())
	}
	if err != nil {
		b.t.Fatalf("bay's OpenAPI document does not load: %v", err)
	}
	// The router matches any host: the document names no servers.
	doc.Servers = openapi3.Servers{{URL: "/"}}
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		b.t.Fatalf("OpenAPI router: %v", err)
	}
	specs.Store(b.URL, r)
	return r
}

// checkAgainstOpenAPI reports a JSON response that its operation does not document. What
// the document does not route (the MCP endpoint's own protocol, /metrics) and non-JSON
// bodies (downloads) are left alone.
func (b *Bay) checkAgainstOpenAPI(req *http.Request, status int, header http.Header, body []byte) {
	b.t.Helper()
	if !strings.HasPrefix(header.Get("Content-Type"), "application/json") || strings.HasPrefix(req.URL.Path, "/mcp") {
		return
	}
	r := req.Clone(context.Background())
	r.URL.Host, r.Host = "", ""
	route, params, err := b.openAPIRouter().FindRoute(r)
	if err != nil {
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}},
		Status: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		b.t.Errorf("%s %s answered %d, which bay's OpenAPI document does not allow: %v\nbody: %.500s", req.Method, req.URL.Path, status, err, body)
	}
}
