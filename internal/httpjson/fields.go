package httpjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"unicode/utf8"
)

// exactFieldNames refuses a key of the JSON object raw that names one of
// v's fields only when case is ignored, at any depth. encoding/json matches
// field names case-insensitively, so DisallowUnknownFields lets
// {"Delay_MS": 5000} through as delay_ms; the API's promise is that a
// misspelt field is an error, and a client must learn the documented
// spelling before another decoder (a proxy, a v2 server) reads it
// differently. raw has already decoded into v.
func exactFieldNames(raw []byte, v any) error {
	return exactNames(raw, reflect.TypeOf(v))
}

func exactNames(raw json.RawMessage, t reflect.Type) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct:
		keys, vals, err := objectMembers(raw)
		if err != nil {
			return err
		}
		for i, key := range keys {
			val := vals[i]
			f, ok := jsonField(t, key)
			if !ok {
				return BadRequest(CodeUnknownField, key, "unknown field %q (field names are case-sensitive)", key)
			}
			if err := exactNames(val, f.Type); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8, t.Kind() == reflect.Array:
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return nil
		}
		for _, e := range elems {
			if err := exactNames(e, t.Elem()); err != nil {
				return err
			}
		}
	}
	return nil
}

// objectMembers returns the keys of the JSON object raw, in order, with
// their raw values, and refuses a key given twice: encoding/json keeps the
// last of them, another reader may keep the first, and a client (or an
// attacker between) can use the difference. Keys are compared as decoded,
// so an escaped spelling of a key is the same key. null, or not an object,
// gives nothing: decoding into the value already said what was wrong.
func objectMembers(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, nil, nil
	}
	var keys []string
	var vals []json.RawMessage
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, nil
		}
		key, _ := tok.(string)
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, nil, nil
		}
		if seen[key] {
			return nil, nil, BadRequest(CodeMalformedJSON, key, "field %q is given twice: each key of a JSON object must be unique", key)
		}
		seen[key] = true
		keys, vals = append(keys, key), append(vals, val)
	}
	return keys, vals, nil
}

// jsonField returns struct type t's field whose JSON name is exactly name.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// checkText refuses a string field of v, at any depth, that is not text:
// control characters (U+0000-U+001F, U+007F-U+009F) have no place in an id,
// a name or a user, and end up in logs, terminals and other systems' keys.
// encoding/json turns invalid UTF-8 into U+FFFD while decoding, so U+FFFD is
// refused too: it almost always means the client sent bytes that were not
// UTF-8. A field tagged `httpjson:"notext"` (base64, which may be broken
// into lines) is left out; []byte fields (raw JSON payloads) are data.
func checkText(v any) error {
	return textIn(reflect.ValueOf(v), "")
}

func textIn(v reflect.Value, path string) error {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return textIn(v.Elem(), path)
	case reflect.String:
		return CheckText(path, v.String())
	case reflect.Struct:
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || f.Tag.Get("httpjson") == "notext" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if path != "" {
				name = path + "." + name
			}
			if err := textIn(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return nil
		}
		for i := 0; i < v.Len(); i++ {
			if err := textIn(v.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// CheckText refuses s, the value of field (a JSON field, a query parameter
// or a path segment), unless it is text: valid UTF-8 without control
// characters or U+FFFD (see checkText). The answer is 400 invalid_value
// naming the field.
func CheckText(field, s string) error {
	for i, r := range s {
		switch {
		case r == utf8.RuneError:
			return BadRequest(CodeInvalidValue, field, "%s: invalid UTF-8 (or U+FFFD) at byte %d: want text", field, i)
		case r < 0x20, r >= 0x7f && r <= 0x9f:
			return BadRequest(CodeInvalidValue, field, "%s: control character U+%04X at byte %d: want text", field, r, i)
		}
	}
	return nil
}
