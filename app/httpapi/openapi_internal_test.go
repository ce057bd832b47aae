package httpapi

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestOpenAPIQueryParameters: the query parameters openapi.json gives each
// of the API's own routes are exactly the ones its handler takes (any other
// is refused 400 unknown_field), both ways. The modules' routes are checked
// one way from outside (TestOpenAPIParameters).
func TestOpenAPIQueryParameters(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Ref  string `json:"$ref"`
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	var a api
	for _, rt := range a.routes() {
		path := strings.ReplaceAll(rt.path, "...}", "}")
		op, ok := doc.Paths[path][strings.ToLower(rt.method)]
		if !ok {
			t.Errorf("%s %s: not in openapi.json", rt.method, path)
			continue
		}
		var documented []string
		for _, p := range op.Parameters {
			if p.In == "query" {
				documented = append(documented, p.Name)
			}
		}
		taken := slices.Clone(rt.params)
		slices.Sort(documented)
		slices.Sort(taken)
		if !slices.Equal(documented, taken) {
			t.Errorf("%s %s: query parameters %q in openapi.json, the handler takes %q", rt.method, path, documented, taken)
		}
	}
}
