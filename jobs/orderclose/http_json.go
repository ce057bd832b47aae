package orderclose

import (
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
)

// createRequest is the body of POST /v1/orders. Unknown fields are refused.
type createRequest struct {
	User            string        `json:"user"`
	Items           []itemRequest `json:"items"`
	PaymentWindowMs *int64        `json:"payment_window_ms"`
}

type itemRequest struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

// orderView is an order as the API shows it. Times are RFC 3339 in UTC
// with milliseconds; money is integer cents.
type orderView struct {
	OrderNo     string     `json:"order_no"`
	User        string     `json:"user"`
	Status      string     `json:"status"`
	AmountCents int64      `json:"amount_cents"`
	CreatedAt   string     `json:"created_at"`
	PayDeadline string     `json:"pay_deadline"`
	PaidAt      *string    `json:"paid_at"`
	ClosedAt    *string    `json:"closed_at"`
	CloseReason string     `json:"close_reason,omitempty"`
	Version     int        `json:"version"`
	Items       []itemView `json:"items,omitempty"`
	// CloseJobScheduled is set on creation only: false means the close job
	// could not be enqueued and the sweeper will close the order.
	CloseJobScheduled *bool `json:"close_job_scheduled,omitempty"`
}

type itemView struct {
	SKU      string `json:"sku"`
	Quantity int64  `json:"quantity"`
}

func viewOf(o *Order, items []OrderItem) orderView {
	v := orderView{
		OrderNo:     o.OrderNo,
		User:        o.UserID,
		Status:      o.Status,
		AmountCents: o.AmountCents,
		CreatedAt:   timeString(o.CreatedAt),
		PayDeadline: timeString(o.PayDeadline),
		CloseReason: o.CloseReason,
		Version:     o.Version,
	}
	if o.PaidAt != nil {
		t := timeString(*o.PaidAt)
		v.PaidAt = &t
	}
	if o.ClosedAt != nil {
		t := timeString(*o.ClosedAt)
		v.ClosedAt = &t
	}
	for _, it := range items {
		v.Items = append(v.Items, itemView{SKU: it.SKU, Quantity: it.Quantity})
	}
	return v
}

func timeString(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// apiError is the body of every error answer, inside {"error": ...}.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// httpError is an apiError with its status.
type httpError struct {
	status int
	apiError
}

// decode reads a JSON body of at most Config.MaxBodyBytes into v: one
// object, no unknown fields, nothing after it.
func (h *HTTPHandler) decode(w http.ResponseWriter, r *http.Request, v any) *httpError {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &httpError{http.StatusUnsupportedMediaType, apiError{Code: "unsupported_media_type",
				Message: "Content-Type " + strconv.Quote(ct) + ": send application/json"}}
		}
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, h.s.cfg.MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		// Only whitespace may follow the object.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errTrailing
		}
	}
	if err == nil {
		return nil
	}
	bad := func(code, field, msg string) *httpError {
		return &httpError{http.StatusBadRequest, apiError{Code: code, Field: field, Message: msg}}
	}
	var maxErr *http.MaxBytesError
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &maxErr):
		return &httpError{http.StatusRequestEntityTooLarge, apiError{Code: "body_too_large",
			Message: "request body over " + itoa(maxErr.Limit) + " bytes"}}
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return bad("invalid_json", "", "the body must be a JSON object")
		}
		return bad("invalid_type", field, field+": "+typeErr.Value+" where "+jsonType(typeErr.Type.String())+" is expected")
	case errors.As(err, &syntaxErr):
		return bad("invalid_json", "", "malformed JSON at byte "+itoa(syntaxErr.Offset)+": "+syntaxErr.Error())
	case errors.Is(err, io.EOF):
		return bad("invalid_json", "", "empty body: send a JSON object")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return bad("invalid_json", "", "malformed JSON: the body ends early")
	case errors.Is(err, errTrailing):
		return bad("invalid_json", "", "malformed JSON: data after the object")
	}
	// encoding/json has no type for an unknown field.
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		name, _ = strconv.Unquote(name)
		return bad("unknown_field", name, "unknown field "+strconv.Quote(name))
	}
	return bad("invalid_json", "", "malformed JSON: "+err.Error())
}

var errTrailing = errors.New("data after the JSON object")

// jsonType names a Go type as JSON would.
func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"), strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// fail answers a service error: 4xx for what the caller can fix, 500 (and
// a log line) for the rest.
func (h *HTTPHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var in *InputError
	var stock *StockError
	switch {
	case errors.As(err, &in):
		code := "invalid_" + in.Field[strings.LastIndexAny(in.Field, ".]")+1:]
		if errors.Is(err, ErrUnknownSKU) {
			code = "unknown_sku"
		}
		writeError(w, http.StatusBadRequest, apiError{Code: code, Field: in.Field, Message: in.Field + ": " + in.Reason})
	case errors.As(err, &stock):
		writeError(w, http.StatusConflict, apiError{Code: "insufficient_stock", Field: stock.Field,
			Message: "sku " + strconv.Quote(stock.SKU) + ": " + itoa(stock.Requested) + " requested, " + itoa(stock.Available) + " available"})
	case errors.Is(err, ErrOrderNotFound):
		writeError(w, http.StatusNotFound, apiError{Code: "order_not_found", Field: "order_no",
			Message: "no order " + strconv.Quote(r.PathValue("no"))})
	case errors.Is(err, ErrOrderClosed):
		writeError(w, http.StatusConflict, apiError{Code: "order_closed", Field: "order_no",
			Message: "order " + r.PathValue("no") + " is closed (its payment window ended): it cannot be paid"})
	default:
		h.log.WithError(err).WithFields(logrus.Fields{"method": r.Method, "path": r.URL.Path}).Error("orders API: internal error")
		writeError(w, http.StatusInternalServerError, apiError{Code: "internal", Message: "internal error"})
	}
}

func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
