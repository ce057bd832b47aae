package httpjson_test

import (
	"errors"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/httpjson"
)

type item struct {
	SKU string `json:"sku"`
	N   int64  `json:"n"`
}

type body struct {
	Name  string  `json:"name"`
	B64   *string `json:"b64" httpjson:"notext"`
	Items []item  `json:"items"`
	Raw   []byte  `json:"raw"`
}

func TestValue(t *testing.T) {
	cases := []struct {
		raw         string
		code, field string
	}{
		{`{"name":"a","items":[{"sku":"x","n":1}]}`, "", ""},
		{`{"b64":"QUFB\nQUFB"}`, "", ""},
		{`null`, httpjson.CodeMalformedJSON, ""},
		{` [] `, httpjson.CodeMalformedJSON, ""},
		{`1`, httpjson.CodeMalformedJSON, ""},
		{`nul`, httpjson.CodeMalformedJSON, ""},
		{``, httpjson.CodeMalformedJSON, ""},
		{`{"name":"a"} {}`, httpjson.CodeMalformedJSON, ""},
		{`{"nmae":"a"}`, httpjson.CodeUnknownField, "nmae"},
		{`{"Name":"a"}`, httpjson.CodeUnknownField, "Name"},
		{`{"items":[{"sku":"x"},{"Sku":"y"}]}`, httpjson.CodeUnknownField, "Sku"},
		{`{"items":[{"sku":"x","n":"1"}]}`, httpjson.CodeInvalidValue, "items.n"},
		{`{"name":"a\u0000"}`, httpjson.CodeInvalidValue, "name"},
		{`{"name":"a\u007f"}`, httpjson.CodeInvalidValue, "name"},
		{`{"name":"a\u0085"}`, httpjson.CodeInvalidValue, "name"},
		{"{\"name\":\"a\xc3\"}", httpjson.CodeInvalidValue, "name"},
		{`{"items":[{"sku":"x"},{"sku":"y\n"}]}`, httpjson.CodeInvalidValue, "items[1].sku"},
		{`{"name":"ünïcode ✓"}`, "", ""},
		// A key given twice is refused, whichever spelling and depth:
		// encoding/json would keep the last, another reader the first.
		{`{"name":"a","name":"b"}`, httpjson.CodeMalformedJSON, "name"},
		{`{"name":"a","n\u0061me":"b"}`, httpjson.CodeMalformedJSON, "name"},
		{`{"items":[{"sku":"x","sku":"y"}]}`, httpjson.CodeMalformedJSON, "sku"},
	}
	for _, c := range cases {
		var v body
		err := httpjson.Value([]byte(c.raw), &v)
		var e *httpjson.Error
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%s: %v", c.raw, err)
		case c.code == "":
		case !errors.As(err, &e) || e.Code != c.code || e.Field != c.field || e.Status != 400:
			t.Errorf("%s: %v; want %s on %q", c.raw, err, c.code, c.field)
		}
	}
}

func TestQuery(t *testing.T) {
	cases := []struct {
		query       string
		code, field string
	}{
		{"", "", ""},
		{"a=1&b=x", "", ""},
		{"c=1", httpjson.CodeUnknownField, "c"},
		{"a=", httpjson.CodeInvalidValue, "a"},
		{"a", httpjson.CodeInvalidValue, "a"},
		{"a=1&a=2", httpjson.CodeInvalidValue, "a"},
		{"b=%01", httpjson.CodeInvalidValue, "b"},
		{"a=%zz", httpjson.CodeInvalidValue, ""},
	}
	for _, c := range cases {
		r := httptest.NewRequest("GET", "/x?"+c.query, nil)
		err := httpjson.Query(r, "a", "b")
		var e *httpjson.Error
		switch {
		case c.code == "" && err != nil:
			t.Errorf("%q: %v", c.query, err)
		case c.code == "":
		case !errors.As(err, &e) || e.Code != c.code || e.Field != c.field:
			t.Errorf("%q: %v; want %s on %q", c.query, err, c.code, c.field)
		}
	}
	for q, want := range map[string]any{"d=true": true, "d=false": false, "": true, "d=1": nil, "d=": nil, "d=TRUE": nil} {
		got, err := httpjson.QueryBool(httptest.NewRequest("GET", "/x?"+q, nil), "d", true)
		if (want == nil) != (err != nil) || want != nil && got != want {
			t.Errorf("QueryBool %q: %v %v; want %v", q, got, err, want)
		}
	}
	for q, want := range map[string]string{"e=x": "x", "e=y_z": "y_z", "": "def", "e=X": "", "e=y-z": "", "e=": "", "e=w": ""} {
		got, err := httpjson.QueryEnum(httptest.NewRequest("GET", "/x?"+q, nil), "e", "def", "x", "y_z")
		var e *httpjson.Error
		switch {
		case want == "" && (!errors.As(err, &e) || e.Code != httpjson.CodeInvalidValue || e.Field != "e" || !strings.Contains(e.Message, "x, y_z")):
			t.Errorf("QueryEnum %q: %q, %v; want invalid_value on e naming the choices", q, got, err)
		case want != "" && (err != nil || got != want):
			t.Errorf("QueryEnum %q: %q, %v; want %q", q, got, err, want)
		}
	}
}

func TestMillis(t *testing.T) {
	for ms, ok := range map[int64]bool{0: true, 1: true, -1: true, 9223372036854: true, -9223372036854: true,
		9223372036855: false, -9223372036855: false, math.MinInt64: false, math.MaxInt64: false, -288230376148111744: false} {
		if _, got := httpjson.Millis(ms); got != ok {
			t.Errorf("Millis(%d): ok %v, want %v", ms, got, ok)
		}
	}
}

func TestNoBody(t *testing.T) {
	if err := httpjson.NoBody(httptest.NewRequest("POST", "/x", nil)); err != nil {
		t.Fatal(err)
	}
	var e *httpjson.Error
	r2 := httptest.NewRequest("GET", "/x", strings.NewReader("{}"))
	if err := httpjson.NoBody(r2); !errors.As(err, &e) || e.Code != httpjson.CodeUnexpectedBody {
		t.Fatalf("a body on a GET: %v", err)
	}
}
