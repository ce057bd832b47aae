package httpapi

import (
	_ "embed"
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
)

// openAPI is the API's contract, openapi.json (OpenAPI 3.1): every route the
// program serves, the orders module's and the dashboard's included. It is
// written by hand and kept true by the tests (openapi_test.go): the routes
// against the code, the answers against real requests.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI returns the API's OpenAPI 3.1 description (a copy: the caller may
// change it), as GET /v1/openapi.json serves it.
func OpenAPI() []byte { return append([]byte(nil), openAPI...) }

// openapi handles GET /v1/openapi.json. It is behind auth like the rest of
// /v1: it says what a client may call, not what it holds.
func (a *api) openapi(w http.ResponseWriter, _ *http.Request) error {
	httpjson.WriteJSONBytes(w, http.StatusOK, openAPI)
	return nil
}
