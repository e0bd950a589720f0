// Package contract checks real HTTP exchanges against paykit's OpenAPI document (package
// openapi) with kin-openapi's openapi3filter, for tests: every request the tests send to
// the API and every answer it gives must be what the document says, or the test fails.
package contract

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/paykit/paykit/openapi"
)

// Validator checks exchanges against the document.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
}

// Load parses and validates the embedded document (OpenAPI 3.1) and builds its router.
func Load(ctx context.Context) (*Validator, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(openapi.Document())
	if err != nil {
		return nil, fmt.Errorf("contract: load: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, fmt.Errorf("contract: invalid document: %w", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("contract: router: %w", err)
	}
	return &Validator{doc: doc, router: router}, nil
}

// Document returns the loaded document.
func (v *Validator) Document() *openapi3.T { return v.doc }

// Check validates one exchange: the route must be in the document (unless the server
// refused it with 404 or 405), a request the document refuses must have been refused by
// the server (4xx), and the answer must match the document's response for its status,
// headers and body included. reqBody and respBody are the bodies as sent.
func (v *Validator) Check(req *http.Request, reqBody []byte, status int, header http.Header, respBody []byte) error {
	ctx := context.Background()
	r := req.Clone(ctx)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	// The document's server is "/": match on the path, as a server sees a request,
	// whether the request is a client's (absolute URL) or a server's.
	r.URL = &url.URL{Path: req.URL.Path, RawPath: req.URL.RawPath, RawQuery: req.URL.RawQuery}
	if structuredJSON(r.Header.Get("Content-Type")) {
		// The server takes any application/*+json as JSON, and the document says so in
		// words: OpenAPI has no media-type pattern for a structured suffix.
		r.Header.Set("Content-Type", "application/json")
	}
	if status == http.StatusMethodNotAllowed {
		// The router's answer for a known path and a method it does not have, the same
		// on every path (the document's description says so): Allow and a problem.
		if header.Get("Allow") == "" || !strings.HasPrefix(header.Get("Content-Type"), "application/problem+json") {
			return fmt.Errorf("%s %s answered 405 without Allow or a problem body", req.Method, req.URL.Path)
		}
		return nil
	}
	route, params, err := v.router.FindRoute(r)
	if err != nil {
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("%s %s answered %d but is not in the contract: %w", req.Method, req.URL.Path, status, err)
	}
	in := &openapi3filter.RequestValidationInput{
		Request: r, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil && status < 400 {
		return fmt.Errorf("%s %s: the contract refuses this request, but the server answered %d: %w",
			req.Method, req.URL.Path, status, err)
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: status, Header: header,
		Body:    io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("%s %s: answer %d %s does not match the contract: %w", req.Method, req.URL.Path, status, respBody, err)
	}
	return nil
}

// Transport returns a RoundTripper that sends through base and checks each exchange
// for which only returns true (nil: all), reporting drift to onDrift. The caller still
// gets the response as it was.
func (v *Validator) Transport(base http.RoundTripper, only func(*http.Request) bool, onDrift func(error)) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		if only != nil && !only(req) {
			return base.RoundTrip(req)
		}
		var reqBody []byte
		if req.Body != nil {
			b, err := io.ReadAll(req.Body)
			_ = req.Body.Close()
			if err != nil {
				return nil, err
			}
			reqBody = b
			req.Body = io.NopCloser(bytes.NewReader(b))
		}
		resp, err := base.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		respBody, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(respBody))
		if err != nil {
			return resp, nil // the caller sees the same read error
		}
		if cerr := v.Check(req, reqBody, resp.StatusCode, resp.Header, respBody); cerr != nil {
			onDrift(cerr)
		}
		return resp, nil
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Handler wraps h so that every exchange it serves is checked, reporting drift to
// onDrift: the server-side twin of Transport, for handlers under test.
func (v *Validator) Handler(h http.Handler, onDrift func(error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reqBody, err := io.ReadAll(r.Body)
		if err != nil {
			onDrift(fmt.Errorf("read request body: %w", err))
		}
		orig := r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		for k, vs := range rec.Header() {
			w.Header()[k] = vs
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		if cerr := v.Check(orig, reqBody, rec.Code, rec.Header(), rec.Body.Bytes()); cerr != nil {
			onDrift(cerr)
		}
	})
}

// structuredJSON reports whether ct is application/<something>+json.
func structuredJSON(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}
