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

// queryInt reads an integer query parameter between lo and hi; absent means
// def.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	return httpjson.QueryInt(r, name, def, lo, hi)
}

// queryBool reads a boolean query parameter (true or false); absent means
// def.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	return httpjson.QueryBool(r, name, def)
}
