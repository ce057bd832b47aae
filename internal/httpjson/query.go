package httpjson

import (
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Query checks r's query string against the parameters its route takes,
// names: an unknown parameter is 400 unknown_field (a typo such as
// ?dryrun=true must not run the real thing), and a parameter given twice,
// given empty (?dry_run=) or holding anything but text is 400 invalid_value.
// Leave a parameter out to get its default. A route that takes none calls
// Query(r).
func Query(r *http.Request, names ...string) error {
	if r.URL.RawQuery == "" {
		return nil // most requests: skip ParseQuery's map
	}
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return BadRequest(CodeInvalidValue, "", "malformed query string: %v", err)
	}
	for name, vs := range vals {
		switch {
		case !slices.Contains(names, name):
			return BadRequest(CodeUnknownField, name, "unknown query parameter %q", name)
		case len(vs) > 1:
			return BadRequest(CodeInvalidValue, name, "%s given %d times: give it once", name, len(vs))
		case vs[0] == "":
			return BadRequest(CodeInvalidValue, name, "%s is empty: give a value, or leave it out for the default", name)
		}
		if err := CheckText(name, vs[0]); err != nil {
			return err
		}
	}
	return nil
}

// QueryString returns query parameter name, "" when absent. Run Query
// first: it refuses empty values.
func QueryString(r *http.Request, name string) string { return r.URL.Query().Get(name) }

// QueryInt reads an integer query parameter between lo and hi; absent
// means def, present and empty is refused.
func QueryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return def, nil
	}
	s := q.Get(name)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, BadRequest(CodeInvalidValue, name, "%s=%q: want an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

// QueryBool reads a boolean query parameter: exactly "true" or "false";
// absent means def, anything else (empty, "1", "yes") is refused.
func QueryBool(r *http.Request, name string, def bool) (bool, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return def, nil
	}
	switch s := q.Get(name); s {
	case "true":
		return true, nil
	case "false":
		return false, nil
	default:
		return false, BadRequest(CodeInvalidValue, name, "%s=%q: want true or false", name, s)
	}
}

// QueryEnum reads a query parameter that takes one of choices, spelt
// exactly; absent means def, anything else (another spelling, another case)
// is refused with the choices in the message.
func QueryEnum(r *http.Request, name, def string, choices ...string) (string, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return def, nil
	}
	s := q.Get(name)
	if slices.Contains(choices, s) {
		return s, nil
	}
	return "", BadRequest(CodeInvalidValue, name, "%s=%q: want one of %s", name, s, strings.Join(choices, ", "))
}
