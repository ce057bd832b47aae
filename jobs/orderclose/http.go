package orderclose

import (
	"net/http"
	"time"

	"github.com/sirupsen/logrus"
)

// HTTPHandler is the orders module of the program's HTTP API:
//
//	POST /v1/orders             {"items":[{"sku":"A","quantity":2}], "payment_window_ms":60000, "user":"u1"}
//	                            -> 201 the order (Location: /v1/orders/{no})
//	POST /v1/orders/{no}/pay    -> 200 the order, paid
//	GET  /v1/orders/{no}        -> 200 the order: status, deadline, closed at and reason, items
//	GET  /v1/orders/summary     -> 200 orders by status, lateness of the recent closes, stock
//	                               (read-only, for the dashboard; order numbers are never "summary")
//
// Bad input gets a 4xx answer {"error":{"code":"...","message":"...","field":"..."}}
// and writes nothing. The codes: invalid_json, unknown_field, invalid_type,
// unsupported_media_type, body_too_large (413), invalid_<field> (for example
// invalid_quantity, invalid_items, invalid_payment_window_ms,
// invalid_order_no), unknown_sku, insufficient_stock (409), order_not_found
// (404), order_closed (409), method_not_allowed (405), not_found (404).
type HTTPHandler struct {
	s   *Service
	mux *http.ServeMux
	log logrus.FieldLogger
}

// The module's paths.
const (
	pathOrders = "/v1/orders"
	pathOrder  = "/v1/orders/"
)

// NewHTTPHandler returns the orders module over s.
func NewHTTPHandler(s *Service) *HTTPHandler {
	h := &HTTPHandler{s: s, mux: http.NewServeMux(), log: s.log.WithField("component", "orderclose-http")}
	h.mux.HandleFunc("POST /v1/orders", h.create)
	h.mux.HandleFunc("POST /v1/orders/{no}/pay", h.pay)
	h.mux.HandleFunc("GET /v1/orders/{no}", h.get)
	h.mux.HandleFunc("GET /v1/orders/summary", h.summary)
	// The same paths with another method, and anything else under the
	// module's paths, get a JSON answer too.
	h.mux.HandleFunc("/v1/orders", methodNotAllowed("POST"))
	h.mux.HandleFunc("/v1/orders/{no}/pay", methodNotAllowed("POST"))
	h.mux.HandleFunc("/v1/orders/{no}", methodNotAllowed("GET, HEAD"))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, apiError{Code: "not_found", Message: "no such endpoint: " + r.URL.Path})
	})
	return h
}

// ServeHTTP serves the module's endpoints.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Patterns are the ServeMux patterns the module answers: /v1/orders and
// everything under /v1/orders/, every method. A program that assembles its
// API from modules registers the handler under each.
func (h *HTTPHandler) Patterns() []string { return []string{pathOrders, pathOrder} }

// Mount registers the module on the program's mux, under /v1/orders and
// /v1/orders/ (every method), so that leaving Mount out switches the
// endpoints off.
func (h *HTTPHandler) Mount(mux *http.ServeMux) {
	for _, p := range h.Patterns() {
		mux.Handle(p, h)
	}
}

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeError(w, http.StatusMethodNotAllowed, apiError{Code: "method_not_allowed",
			Message: r.Method + " is not allowed here: use " + allow})
	}
}

// create serves POST /v1/orders.
func (h *HTTPHandler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	if e := h.decode(w, r, &req); e != nil {
		writeError(w, e.status, e.apiError)
		return
	}
	in := NewOrder{User: req.User, Items: make([]Item, len(req.Items))}
	for i, it := range req.Items {
		in.Items[i] = Item{SKU: it.SKU, Quantity: it.Quantity}
	}
	if req.PaymentWindowMs != nil {
		if *req.PaymentWindowMs <= 0 || *req.PaymentWindowMs > h.s.cfg.MaxPaymentWindow.Milliseconds() {
			writeError(w, http.StatusBadRequest, apiError{Code: "invalid_payment_window_ms", Field: "payment_window_ms",
				Message: "payment_window_ms: want 1 to " + itoa(h.s.cfg.MaxPaymentWindow.Milliseconds())})
			return
		}
		in.PaymentWindow = time.Duration(*req.PaymentWindowMs) * time.Millisecond
	}
	c, err := h.s.CreateOrder(r.Context(), in)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	v := viewOf(&c.Order, c.Items)
	v.CloseJobScheduled = &c.CloseScheduled
	w.Header().Set("Location", pathOrder+c.Order.OrderNo)
	writeJSON(w, http.StatusCreated, v)
}

// pay serves POST /v1/orders/{no}/pay.
func (h *HTTPHandler) pay(w http.ResponseWriter, r *http.Request) {
	o, err := h.s.Pay(r.Context(), r.PathValue("no"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(o, nil))
}

// get serves GET /v1/orders/{no}.
func (h *HTTPHandler) get(w http.ResponseWriter, r *http.Request) {
	d, err := h.s.Get(r.Context(), r.PathValue("no"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, viewOf(&d.Order, d.Items))
}
