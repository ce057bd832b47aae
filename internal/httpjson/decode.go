package httpjson

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

// Decoder reads JSON request bodies of at most MaxBytes bytes. Strictness is
// the point: a typo in a field name ("dealy_ms") must be an error, not a job
// that runs now instead of in an hour.
type Decoder struct {
	MaxBytes int64
}

// Body reads r's body into v, which points to a struct: application/json
// only, at most d.MaxBytes bytes, and what Value accepts.
func (d Decoder) Body(r *http.Request, v any) error { return d.decode(r, v, false) }

// OptionalBody is Body for routes whose body only carries options: no body
// at all leaves v untouched and needs no content type, so `curl -X POST`
// works; a body of only whitespace, sent as application/json, leaves v
// untouched too. Anything else is held to Body's rules; `null` in
// particular is not an empty body.
func (d Decoder) OptionalBody(r *http.Request, v any) error { return d.decode(r, v, true) }

func (d Decoder) decode(r *http.Request, v any, optional bool) error {
	if optional && (r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody) {
		return nil
	}
	if err := requireJSON(r); err != nil {
		return err
	}
	if r.ContentLength > d.MaxBytes {
		return bodyTooLarge(d.MaxBytes)
	}
	markStarted(r)
	// The body is read whole (bounded) and decoded once; the field checks
	// look at the same bytes.
	body, err := readBody(r.Body, d.MaxBytes, r.ContentLength)
	if err != nil {
		return &Error{Status: http.StatusBadRequest, ErrorDetail: ErrorDetail{Code: CodeMalformedJSON,
			Message: "reading the body failed"}, Cause: err}
	}
	if int64(len(body)) > d.MaxBytes {
		return bodyTooLarge(d.MaxBytes)
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return Value(body, v)
}

// Value decodes raw, one JSON object, into v (a pointer to a struct whose
// fields all have json tags), under the rules every body obeys:
//   - raw is one JSON object: not null, not an array or a scalar, nothing
//     after it;
//   - every key is a field of v, spelt exactly (encoding/json alone matches
//     names case-insensitively), at every depth;
//   - a JSON value has the type of its field;
//   - every string field is text (see checkText).
//
// If v is a FastDecoder whose DecodeFast takes raw, that is the answer, and
// v may keep slices of raw; otherwise v is decoded from its zero value.
func Value(raw []byte, v any) error {
	if f, ok := v.(FastDecoder); ok && f.DecodeFast(raw) {
		return nil
	}
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return BadRequest(CodeMalformedJSON, "", "empty body: want a JSON object")
	case trimmed[0] != '{':
		if !json.Valid(trimmed) {
			return syntaxError(trimmed)
		}
		return BadRequest(CodeMalformedJSON, "", "want a JSON object, got %s", jsonKind(trimmed[0]))
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	// A second value (or garbage) after the object is a client bug, such as
	// two requests glued together; taking the first would hide it.
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return BadRequest(CodeMalformedJSON, "", "trailing data after the JSON object")
	}
	if err := exactFieldNames(raw, v); err != nil {
		return err
	}
	return checkText(v)
}

// requireJSON refuses a body that does not say it is JSON. Without it,
// `curl -d` (form-encoded by default) would get a confusing JSON syntax
// error instead of being told what to send.
func requireJSON(r *http.Request) error {
	ct := r.Header.Get("Content-Type")
	if ct == "application/json" || ct == "application/json; charset=utf-8" {
		return nil // what nearly every client sends, without parsing
	}
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" || err != nil || mt != "application/json" {
		return NewError(http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "",
			fmt.Sprintf("Content-Type %q: want application/json", ct))
	}
	return nil
}

// readBody reads r to its end, or to max+1 bytes, as
// io.ReadAll(io.LimitReader(r, max+1)) does, but into one buffer sized for
// the Content-Length when it is known (size), without ReadAll's doubling.
func readBody(r io.Reader, max, size int64) ([]byte, error) {
	n := int64(512)
	if size > 0 && size <= max {
		n = size + 1 // room to see the end without growing
	}
	b := make([]byte, 0, n)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		room := b[len(b):cap(b)]
		if left := max + 1 - int64(len(b)); int64(len(room)) > left {
			room = room[:left]
		}
		k, err := r.Read(room)
		b = b[:len(b)+k]
		switch {
		case errors.Is(err, io.EOF):
			return b, nil
		case err != nil:
			return b, err
		case int64(len(b)) > max:
			return b, nil
		}
	}
}

func bodyTooLarge(limit int64) *Error {
	return NewError(http.StatusRequestEntityTooLarge, CodeBodyTooLarge, "",
		fmt.Sprintf("request body over %d bytes", limit))
}

// syntaxError describes why raw, which is not valid JSON, is not.
func syntaxError(raw []byte) error {
	var v any
	return jsonError(json.Unmarshal(raw, &v))
}

// jsonError turns a decoding error into a 400 that names the field when the
// decoder knows it.
func jsonError(err error) *Error {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
	)
	switch {
	case errors.Is(err, io.EOF):
		return BadRequest(CodeMalformedJSON, "", "empty body: want a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest(CodeMalformedJSON, "", "truncated JSON")
	case errors.As(err, &se):
		return BadRequest(CodeMalformedJSON, "", "invalid JSON at byte %d: %v", se.Offset, se)
	case errors.As(err, &te):
		if te.Field == "" {
			return BadRequest(CodeMalformedJSON, "", "want a JSON object, got %s", te.Value)
		}
		return BadRequest(CodeInvalidValue, te.Field, "%s: want %s, got %s", te.Field, jsonTypeName(te.Type.Kind().String()), te.Value)
	}
	// encoding/json has no typed error for unknown fields; its message is
	// `json: unknown field "name"` and has been stable since Go 1.10.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if n, uerr := strconv.Unquote(name); uerr == nil {
			name = n
		}
		return BadRequest(CodeUnknownField, name, "unknown field %q", name)
	}
	return &Error{Status: http.StatusBadRequest, ErrorDetail: ErrorDetail{Code: CodeMalformedJSON,
		Message: "decoding the JSON body failed"}, Cause: err}
}

// jsonKind names the kind of the JSON value that starts with c.
func jsonKind(c byte) string {
	switch c {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
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
