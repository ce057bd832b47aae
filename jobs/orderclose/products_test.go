package orderclose_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/delayq/delayq/jobs/orderclose"
)

// Products are set and read through the API: a PUT creates (201) or sets
// stock and price (200); orders take stock from what it set; the list
// pages by SKU; bad input names its field and writes nothing.
func TestHTTPProducts(t *testing.T) {
	t.Parallel()
	eachSQL(t, func(t *testing.T, w *world) {
		a := newAPI(t, w)
		put := func(sku, body string) response {
			return a.do(http.MethodPut, "/v1/products/"+sku, "application/json", body)
		}
		product := func(r response) orderclose.ProductView {
			var v orderclose.ProductView
			if err := json.Unmarshal([]byte(r.raw), &v); err != nil {
				t.Fatalf("%s: %v", r.raw, err)
			}
			return v
		}
		r := put("tea", `{"stock":5,"price_cents":450}`)
		if v := product(r); r.status != http.StatusCreated || v.Created == nil || !*v.Created || v.Stock != 5 ||
			r.header.Get("Location") != "/v1/products/tea" {
			t.Fatalf("create: %d %s", r.status, r.raw)
		}
		r = put("tea", `{"stock":7,"price_cents":500}`)
		if v := product(r); r.status != http.StatusOK || *v.Created || v.Stock != 7 || v.PriceCents != 500 {
			t.Fatalf("update: %d %s", r.status, r.raw)
		}
		// An order takes stock from it, at its price.
		o := a.post("/v1/orders", `{"items":[{"sku":"tea","quantity":2}]}`)
		if o.status != http.StatusCreated || o.order.AmountCents != 1000 {
			t.Fatalf("order of tea: %d %s", o.status, o.raw)
		}
		if v := product(a.get("/v1/products/tea")); v.Stock != 5 || v.Created != nil {
			t.Fatalf("tea after the order: %+v", v)
		}
		for _, sku := range []string{"b", "c", "a/1"} {
			if r := put(sku, `{"stock":1,"price_cents":1}`); r.status != http.StatusCreated {
				t.Fatalf("create %s: %d %s", sku, r.status, r.raw)
			}
		}
		var skus []string
		after := ""
		for range 5 {
			path := "/v1/products?limit=2"
			if after != "" {
				path += "&after=" + after
			}
			var p orderclose.ProductPage
			if err := json.Unmarshal([]byte(a.get(path).raw), &p); err != nil {
				t.Fatal(err)
			}
			for _, v := range p.Products {
				skus = append(skus, v.SKU)
			}
			if after = p.NextAfter; after == "" {
				break
			}
		}
		if want := []string{"a/1", "b", "c", "tea"}; len(skus) != 4 || skus[0] != want[0] || skus[3] != want[3] {
			t.Fatalf("listed %v, want %v", skus, want)
		}

		before := w.snapshot()
		put("tea", `{"stock":-1,"price_cents":1}`).wantError(t, "negative stock", http.StatusBadRequest, "invalid_value", "stock")
		put("tea", `{"stock":1,"price_cents":-1}`).wantError(t, "negative price", http.StatusBadRequest, "invalid_value", "price_cents")
		put("tea", `{"stock":1}`).wantError(t, "no price", http.StatusBadRequest, "missing_field", "price_cents")
		put("tea", `{"price_cents":1}`).wantError(t, "no stock", http.StatusBadRequest, "missing_field", "stock")
		put("tea", `{"stock":1,"price_cents":1,"name":"x"}`).wantError(t, "unknown field", http.StatusBadRequest, "unknown_field", "name")
		put("te%01a", `{"stock":1,"price_cents":1}`).wantError(t, "control character", http.StatusBadRequest, "invalid_value", "sku")
		a.get("/v1/products/te%01a").wantError(t, "GET with a control character", http.StatusBadRequest, "invalid_value", "sku")
		a.get("/v1/products/nope").wantError(t, "unknown product", http.StatusNotFound, "not_found", "sku")
		a.get("/v1/products?limit=0").wantError(t, "limit 0", http.StatusBadRequest, "invalid_value", "limit")
		a.do(http.MethodDelete, "/v1/products/tea", "", "").wantError(t, "DELETE", http.StatusMethodNotAllowed, "method_not_allowed", "")
		w.assertUnchanged(before, "refused product requests")
	})
}
