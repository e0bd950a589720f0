package api

import (
	"net/http"
	"regexp"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/paykit/paykit/openapi"
)

// noStore marks every answer Cache-Control: no-store: payments, refunds and problems
// change or are private to a tenant, and no cache between the merchant and the API may
// keep them. It runs first, so even errors and 405s carry it.
func noStore(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
		return next(c)
	}
}

// requestIDPattern is what a caller's X-Request-Id must match to be kept: short, and
// safe to echo in a header and to write in a log line.
var requestIDPattern = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,64}$`)

// assignRequestID gives every request its id, answered in X-Request-Id and quoted in
// problems and log lines. A caller's id is kept only if it matches requestIDPattern, so
// that a gateway in front can correlate; anything else is replaced by a new one, since an
// id is echoed and logged for every request and must not be the caller's to size.
func assignRequestID(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(echo.HeaderXRequestID)
		if !requestIDPattern.MatchString(id) {
			id = uuid.NewString()
		}
		req.Header.Set(echo.HeaderXRequestID, id)
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

// serveOpenAPI answers the embedded contract.
func serveOpenAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, "application/yaml", openapi.Document())
}

// Routes lists the server's routes as "METHOD /path", with path parameters written
// {name} as in the OpenAPI document.
func (s *Server) Routes() []string {
	var out []string
	for _, r := range s.echo.Routes() {
		if r.Method == echo.RouteNotFound {
			continue
		}
		parts := strings.Split(r.Path, "/")
		for i, p := range parts {
			if name, ok := strings.CutPrefix(p, ":"); ok {
				parts[i] = "{" + name + "}"
			}
		}
		out = append(out, r.Method+" "+strings.Join(parts, "/"))
	}
	sort.Strings(out)
	return out
}

// routeGroup adds routes under a prefix with middleware of their own. Echo's Group.Use
// would also register a catch-all route for the prefix, which answers a wrong method on
// a known path with 404 instead of 405 and Allow.
type routeGroup struct {
	g  *echo.Group
	mw []echo.MiddlewareFunc
}

func perRoute(g *echo.Group, mw ...echo.MiddlewareFunc) routeGroup { return routeGroup{g: g, mw: mw} }

// GET adds a GET route.
func (r routeGroup) GET(path string, h echo.HandlerFunc) { r.g.GET(path, h, r.mw...) }

// POST adds a POST route.
func (r routeGroup) POST(path string, h echo.HandlerFunc) { r.g.POST(path, h, r.mw...) }
