package api

import (
	"net/http"
	"sort"
	"strings"

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
