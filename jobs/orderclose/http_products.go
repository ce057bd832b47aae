package orderclose

import (
	"net/http"

	"github.com/delayq/delayq/internal/httpjson"
)

// The products routes: the catalogue orders take stock from.
const (
	pathProducts = "/v1/products"
	pathProduct  = "/v1/products/"
)

// productRequest is the body of PUT /v1/products/{sku...}: both fields
// are required, so that a typo cannot zero a price. Unknown fields are
// refused.
type productRequest struct {
	Stock      *int64 `json:"stock"`
	PriceCents *int64 `json:"price_cents"`
}

// ProductView is a product as the API shows it: the units available to
// new orders and the unit price in integer cents. Created is set in a
// PUT's answer only.
type ProductView struct {
	SKU        string `json:"sku"`
	Stock      int64  `json:"stock"`
	PriceCents int64  `json:"price_cents"`
	Created    *bool  `json:"created,omitempty"`
}

// ProductPage is a page of GET /v1/products: products in SKU order (byte
// order), and the SKU to pass as after for the next page (absent on the
// last one).
type ProductPage struct {
	Products  []ProductView `json:"products"`
	NextAfter string        `json:"next_after,omitempty"`
}

func productView(p SKU) ProductView {
	return ProductView{SKU: p.SKU, Stock: p.Stock, PriceCents: p.PriceCents}
}

// putProduct serves PUT /v1/products/{sku...}: 201 with the product when
// it is new, 200 when it existed (its stock and price set).
func (h *HTTPHandler) putProduct(w http.ResponseWriter, r *http.Request) {
	var req productRequest
	err := httpjson.Query(r)
	if err == nil {
		err = httpjson.Decoder{MaxBytes: h.s.cfg.MaxBodyBytes}.Body(r, &req)
	}
	switch {
	case err != nil:
	case req.Stock == nil:
		err = httpjson.BadRequest(httpjson.CodeMissingField, "stock", "stock: give the units available to new orders")
	case req.PriceCents == nil:
		err = httpjson.BadRequest(httpjson.CodeMissingField, "price_cents", "price_cents: give the unit price in integer cents")
	}
	if err == nil {
		err = httpjson.CheckText("sku", r.PathValue("sku")) // no control characters in a SKU
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, created, err := h.s.PutProduct(r.Context(), SKU{SKU: r.PathValue("sku"), Stock: *req.Stock, PriceCents: *req.PriceCents})
	if err != nil {
		h.fail(w, r, err)
		return
	}
	h.log.WithField("sku", p.SKU).WithField("stock", p.Stock).WithField("price_cents", p.PriceCents).Info("product set")
	v := productView(p)
	v.Created = &created
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		w.Header().Set("Location", pathProduct+p.SKU)
	}
	httpjson.WriteJSON(w, status, v)
}

// getProduct serves GET /v1/products/{sku...}.
func (h *HTTPHandler) getProduct(w http.ResponseWriter, r *http.Request) {
	err := noInput(r)
	if err == nil {
		err = httpjson.CheckText("sku", r.PathValue("sku")) // as PUT refuses it
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	p, err := h.s.Product(r.Context(), r.PathValue("sku"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, productView(p))
}

// listProducts serves GET /v1/products?after=&limit=.
func (h *HTTPHandler) listProducts(w http.ResponseWriter, r *http.Request) {
	if err := httpjson.Query(r, "after", "limit"); err != nil {
		h.fail(w, r, err)
		return
	}
	limit, err := httpjson.QueryInt(r, "limit", 100, 1, MaxProductsPage)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	rows, next, err := h.s.Products(r.Context(), httpjson.QueryString(r, "after"), int(limit))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	out := ProductPage{Products: make([]ProductView, len(rows)), NextAfter: next}
	for i, p := range rows {
		out.Products[i] = productView(p)
	}
	httpjson.WriteJSON(w, http.StatusOK, out)
}
