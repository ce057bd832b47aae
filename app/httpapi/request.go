package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
)

// decodeBody reads r's body into v: application/json only, at most
// a.maxBody bytes, one JSON object with no unknown fields and nothing after
// it. Strictness is the point: a typo in a field name ("dealy_ms") must be
// an error, not a job that runs now instead of in an hour.
//
// With optional set, an empty body (Content-Length 0) leaves v untouched
// and needs no content type, so `curl -X POST` works on endpoints whose
// body only carries options.
func (a *api) decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	if optional && r.ContentLength == 0 {
		return nil
	}
	if err := requireJSON(r); err != nil {
		return err
	}
	if r.ContentLength > a.maxBody {
		return bodyTooLarge(a.maxBody)
	}
	// The body is read whole (bounded) and decoded once; exactFieldNames
	// looks at the same bytes.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.maxBody))
	if err != nil {
		return jsonError(err, a.maxBody)
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err, a.maxBody)
	}
	// A second value (or garbage) after the object is a client bug, such as
	// two requests glued together; taking the first would hide it.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest(CodeMalformedJSON, "", "trailing data after the JSON object")
	}
	return exactFieldNames(body, v)
}

// requireJSON refuses a body that does not say it is JSON. Without it,
// `curl -d` (form-encoded by default) would get a confusing JSON syntax
// error instead of being told what to send.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return newError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "",
			fmt.Sprintf("Content-Type %q: want application/json", ct))
	}
	return nil
}

func bodyTooLarge(limit int64) *apiError {
	return newError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		fmt.Sprintf("request body over %d bytes", limit))
}

// jsonError turns a decoding error into a 400 that names the field when the
// decoder knows it, or a 413 when the body hit the size limit.
func jsonError(err error, limit int64) *apiError {
	var (
		mbe *http.MaxBytesError
		se  *json.SyntaxError
		te  *json.UnmarshalTypeError
	)
	switch {
	case errors.As(err, &mbe):
		return bodyTooLarge(limit)
	case errors.Is(err, io.EOF):
		return badRequest(CodeMalformedJSON, "", "empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(CodeMalformedJSON, "", "truncated JSON")
	case errors.As(err, &se):
		return badRequest(CodeMalformedJSON, "", "invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return badRequest(CodeMalformedJSON, "", "want a JSON object, got %s", te.Value)
		}
		return badRequest(CodeInvalidValue, te.Field, "%s: want %s, got %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
	}
	// encoding/json has no typed error for unknown fields; its message is
	// `json: unknown field "name"` and has been stable since Go 1.10.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return badRequest(CodeUnknownField, name, "unknown field %q", name)
	}
	return &apiError{status: http.StatusBadRequest, ErrorDetail: ErrorDetail{Code: CodeMalformedJSON,
		Message: "reading the JSON body failed"}, cause: err}
}

// jsonTypeName names a Go kind the way a JSON client thinks of it.
func jsonTypeName(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	}
	return kind
}

// queryInt reads an integer query parameter between lo and hi; absent means
// def.
func queryInt(r *http.Request, name string, def, lo, hi int64) (int64, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest(CodeInvalidValue, name, "%s=%q: want an integer from %d to %d", name, s, lo, hi)
	}
	return n, nil
}

// queryBool reads a boolean query parameter; absent means def.
func queryBool(r *http.Request, name string, def bool) (bool, error) {
	s := r.URL.Query().Get(name)
	if s == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(s)
	if err != nil {
		return false, badRequest(CodeInvalidValue, name, "%s=%q: want true or false", name, s)
	}
	return b, nil
}
