package httpapi

import (
	"encoding/json"
	"reflect"
	"strings"
)

// exactFieldNames refuses a key of the JSON object raw that names one of
// v's fields only when case is ignored. encoding/json matches field names
// case-insensitively, so DisallowUnknownFields lets {"Delay_MS": 5000}
// through as delay_ms; the API's promise is that a misspelt field is an
// error, and a client must learn the documented spelling before another
// decoder (a proxy, a v2 server) reads it differently. v points to a struct
// whose fields all have json tags; raw has already decoded into it.
func exactFieldNames(raw []byte, v any) error {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil // not an object: the decoder into v already said so
	}
	for key := range obj {
		if !hasJSONField(t, key) {
			return badRequest(CodeUnknownField, key, "unknown field %q (field names are case-sensitive)", key)
		}
	}
	return nil
}

// hasJSONField reports whether struct type t has a field whose JSON name is
// exactly name.
func hasJSONField(t reflect.Type, name string) bool {
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name {
			return true
		}
	}
	return false
}
