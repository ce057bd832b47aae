package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
)

// decodeBody reads r's body into v under httpjson's rules (the package doc's
// "Bad input"); with optional set, an empty body leaves v untouched.
func (a *api) decodeBody(r *http.Request, v any, optional bool) error {
	d := httpjson.Decoder{MaxBytes: a.maxBody}
	if optional {
		return d.OptionalBody(r, v)
	}
	return d.Body(r, v)
}
