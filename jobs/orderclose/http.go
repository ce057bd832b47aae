package orderclose

import (
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
)

// HTTPHandler is the orders module of the program's HTTP API:
//
//	POST /v1/orders             {"items":[{"sku":"A","quantity":2}], "payment_window_ms":60000, "user":"u1"}
//	                            -> 201 the order (Location: /v1/orders/{no})
//	                            optional header Idempotency-Key: <1-64 visible ASCII characters>
//	POST /v1/orders/{no}/pay    -> 200 the order, paid
//	POST /v1/orders/{no}/extend {"by_ms":600000}
//	                            -> 200 the order, its payment window extended and its close job rescheduled
//	GET  /v1/orders/{no}        -> 200 the order: status, deadline, closed at and reason, items
//	GET  /v1/orders/summary     -> 200 orders by status, lateness of the recent closes, stock
//	                               (read-only, for the dashboard; order numbers are never "summary")
//	PUT  /v1/products/{sku}     {"stock":100, "price_cents":1999}
//	                            -> 201 the product, created; 200 when it existed (stock and price set)
//	GET  /v1/products/{sku}     -> 200 the product: sku, stock (available to new orders), price_cents
//	GET  /v1/products?after=&limit=
//	                            -> 200 {"products":[...], "next_after":"sku"}: by SKU, limit 1-1000 (100)
//
// Requests are read and errors answered by internal/httpjson, like every
// other /v1 route: bad input gets a 4xx answer
// {"error":{"code":"...","message":"...","field":"..."}} with the API's
// codes (app/httpapi's package doc) and writes nothing. The module's own
// codes are unknown_sku (400), insufficient_stock (409), order_closed
// (409), order_paid (409) and idempotency_key_reused (422); SQL down is
// 503 backend_unavailable with Retry-After, as on every /v1 route.
//
// Idempotency-Key makes a create safe to retry when its answer was lost:
// the key is stored with the order (keys are global, one order each, kept
// as long as the order), and a create with a key that made an order
// already writes nothing and answers as the first create did, 201 with the
// order and its Location, plus "Idempotent-Replayed: true"; the body is
// the order as it is now (it may be paid or closed since). The same key with another request (user, items or
// payment window: the JSON may differ in order and spacing) is 422
// idempotency_key_reused, field Idempotency-Key. A malformed key (empty,
// over 64 bytes, anything but 0x21-0x7E, or the header given twice) is 400
// invalid_value, field Idempotency-Key. Of concurrent creates with one key,
// one makes the order and the others answer with it.
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
	for _, rt := range h.routes() {
		h.mux.HandleFunc(rt.pattern, rt.handle)
	}
	// The same paths with another method, and anything else under the
	// module's paths, get a JSON answer too.
	h.mux.HandleFunc("/v1/orders", methodNotAllowed("POST"))
	h.mux.HandleFunc("/v1/orders/{no}/pay", methodNotAllowed("POST"))
	h.mux.HandleFunc("/v1/orders/{no}/extend", methodNotAllowed("POST"))
	h.mux.HandleFunc("/v1/orders/{no}", methodNotAllowed("GET, HEAD"))
	h.mux.HandleFunc("/v1/products", methodNotAllowed("GET, HEAD"))
	h.mux.HandleFunc("/v1/products/{sku...}", methodNotAllowed("GET, HEAD, PUT"))
	h.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, r, httpjson.NewError(http.StatusNotFound, httpjson.CodeNotFound, "", "no such endpoint: "+r.URL.Path))
	})
	return h
}

type route struct {
	pattern string
	handle  http.HandlerFunc
}

func (h *HTTPHandler) routes() []route {
	return []route{
		{"POST /v1/orders", h.create},
		{"POST /v1/orders/{no}/pay", h.pay},
		{"POST /v1/orders/{no}/extend", h.extend},
		{"GET /v1/orders/{no}", h.get},
		{"GET /v1/orders/summary", h.summary},
		{"GET /v1/products", h.listProducts},
		{"GET /v1/products/{sku...}", h.getProduct},
		{"PUT /v1/products/{sku...}", h.putProduct},
	}
}

// Routes lists the module's routes as ServeMux patterns ("POST
// /v1/orders"): for documentation and for tests that must cover every
// route. Patterns are what a program mounts.
func Routes() []string {
	var h HTTPHandler
	var out []string
	for _, rt := range h.routes() {
		out = append(out, rt.pattern)
	}
	return out
}

// ServeHTTP serves the module's endpoints.
func (h *HTTPHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// Patterns are the ServeMux patterns the module answers: /v1/orders,
// /v1/products and everything under them, every method. A program that assembles its
// API from modules registers the handler under each.
func (h *HTTPHandler) Patterns() []string {
	return []string{pathOrders, pathOrder, pathProducts, pathProduct}
}

// Mount registers the module on the program's mux, under /v1/orders and
// /v1/orders/ (every method), so that leaving Mount out switches the
// endpoints off.
func (h *HTTPHandler) Mount(mux *http.ServeMux) {
	for _, p := range h.Patterns() {
		mux.Handle(p, h)
	}
}

// The module's own error codes, next to the API's (httpjson's).
const (
	codeUnknownSKU        = "unknown_sku"        // 400: an item names a SKU that does not exist
	codeInsufficientStock = "insufficient_stock" // 409
	codeOrderClosed       = "order_closed"       // 409: paying (or extending) an order whose window ended
	codeOrderPaid         = "order_paid"         // 409: extending an order already paid
	// 503: SQL did not answer; the same code as the API's (app/httpapi).
	codeBackendUnavailable = "backend_unavailable"
	// 422: an Idempotency-Key that made an order with another request.
	codeIdempotencyKeyReused = "idempotency_key_reused"
)

// The create's idempotency headers: the key a client sends, and the mark
// on an answer that replays the key's first create.
const (
	headerIdempotencyKey = "Idempotency-Key"
	headerReplayed       = "Idempotent-Replayed"
)

func methodNotAllowed(allow string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		httpjson.WriteError(w, r, httpjson.MethodNotAllowed(w, r, allow))
	}
}

// noInput refuses a query string and a body on the module's routes that
// take neither (all but create, which takes a body).
func noInput(r *http.Request) error {
	if err := httpjson.Query(r); err != nil {
		return err
	}
	return httpjson.NoBody(r)
}

// create serves POST /v1/orders.
func (h *HTTPHandler) create(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	err := httpjson.Query(r)
	var key string
	if err == nil {
		key, err = idempotencyKey(r)
	}
	if err == nil {
		err = httpjson.Decoder{MaxBytes: h.s.cfg.MaxBodyBytes}.Body(r, &req)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	in := NewOrder{User: req.User, Items: make([]Item, len(req.Items)), IdempotencyKey: key}
	for i, it := range req.Items {
		in.Items[i] = Item{SKU: it.SKU, Quantity: it.Quantity}
	}
	if req.PaymentWindowMs != nil {
		if *req.PaymentWindowMs <= 0 || *req.PaymentWindowMs > h.s.cfg.MaxPaymentWindow.Milliseconds() {
			h.fail(w, r, httpjson.BadRequest(httpjson.CodeInvalidValue, "payment_window_ms",
				"payment_window_ms: want 1 to %d", h.s.cfg.MaxPaymentWindow.Milliseconds()))
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
	if c.Replayed {
		w.Header().Set(headerReplayed, "true")
	}
	w.Header().Set("Location", pathOrder+c.Order.OrderNo)
	httpjson.WriteJSON(w, http.StatusCreated, v)
}

// pay serves POST /v1/orders/{no}/pay.
func (h *HTTPHandler) pay(w http.ResponseWriter, r *http.Request) {
	if err := noInput(r); err != nil {
		h.fail(w, r, err)
		return
	}
	o, err := h.s.Pay(r.Context(), r.PathValue("no"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewOf(o, nil))
}

// extendRequest is the body of POST /v1/orders/{no}/extend.
type extendRequest struct {
	// ByMs extends the payment window by this many milliseconds.
	ByMs *int64 `json:"by_ms"`
}

// extend serves POST /v1/orders/{no}/extend: the order's payment window
// grows and its close job moves to the new deadline (Service.Extend).
func (h *HTTPHandler) extend(w http.ResponseWriter, r *http.Request) {
	var req extendRequest
	err := httpjson.Query(r) // it takes no query parameter
	if err == nil {
		err = httpjson.Decoder{MaxBytes: h.s.cfg.MaxBodyBytes}.Body(r, &req)
	}
	if err != nil {
		h.fail(w, r, err)
		return
	}
	if req.ByMs == nil {
		h.fail(w, r, httpjson.BadRequest(httpjson.CodeMissingField, "by_ms", "by_ms: give how many milliseconds to extend the window by"))
		return
	}
	by, ok := httpjson.Millis(*req.ByMs)
	if !ok {
		h.fail(w, r, httpjson.BadRequest(httpjson.CodeInvalidValue, "by_ms", "by_ms %d: out of range", *req.ByMs))
		return
	}
	o, err := h.s.Extend(r.Context(), r.PathValue("no"), by)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewOf(o, nil))
}

// get serves GET /v1/orders/{no}.
func (h *HTTPHandler) get(w http.ResponseWriter, r *http.Request) {
	if err := noInput(r); err != nil {
		h.fail(w, r, err)
		return
	}
	d, err := h.s.Get(r.Context(), r.PathValue("no"))
	if err != nil {
		h.fail(w, r, err)
		return
	}
	httpjson.WriteJSON(w, http.StatusOK, viewOf(&d.Order, d.Items))
}

// idempotencyKey returns the create's Idempotency-Key header ("" if it has
// none). A header given but empty, or given twice, is refused here: either
// would otherwise pass for no key and make a second order; the service
// checks the key's characters.
func idempotencyKey(r *http.Request) (string, error) {
	vs, ok := r.Header[headerIdempotencyKey]
	if !ok {
		return "", nil
	}
	if len(vs) != 1 || vs[0] == "" {
		return "", httpjson.BadRequest(httpjson.CodeInvalidValue, headerIdempotencyKey,
			"%s: give the header once, with 1 to %d visible ASCII characters", headerIdempotencyKey, MaxIdempotencyKeyLen)
	}
	return vs[0], nil
}
