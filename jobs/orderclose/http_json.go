package orderclose

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/httpjson"
	"github.com/delayq/delayq/internal/unavailable"
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

// fail answers a service error: 4xx for what the caller can fix, 500 (and
// a log line) for the rest. The codes are the API's (app/httpapi's package
// doc lists them), plus the module's own conflicts.
func (h *HTTPHandler) fail(w http.ResponseWriter, r *http.Request, err error) {
	var (
		he    *httpjson.Error
		in    *InputError
		stock *StockError
		e     *httpjson.Error
	)
	switch {
	case errors.As(err, &he):
		e = he
	case errors.As(err, &in) && errors.Is(err, ErrIdempotencyKeyReused):
		e = httpjson.NewError(http.StatusUnprocessableEntity, codeIdempotencyKeyReused, in.Field, in.Field+": "+in.Reason)
	case errors.As(err, &in):
		code := httpjson.CodeInvalidValue
		if errors.Is(err, ErrUnknownSKU) {
			code = codeUnknownSKU
		}
		e = httpjson.BadRequest(code, in.Field, "%s: %s", in.Field, in.Reason)
	case errors.As(err, &stock):
		e = httpjson.NewError(http.StatusConflict, codeInsufficientStock, stock.Field,
			"sku "+strconv.Quote(stock.SKU)+": "+itoa(stock.Requested)+" requested, "+itoa(stock.Available)+" available")
	case errors.Is(err, ErrProductNotFound):
		e = httpjson.NewError(http.StatusNotFound, httpjson.CodeNotFound, "sku", "no product "+strconv.Quote(r.PathValue("sku")))
	case errors.Is(err, ErrOrderNotFound):
		e = httpjson.NewError(http.StatusNotFound, httpjson.CodeNotFound, "order_no", "no order "+strconv.Quote(r.PathValue("no")))
	case errors.Is(err, ErrOrderPaid):
		e = httpjson.NewError(http.StatusConflict, codeOrderPaid, "order_no",
			"order "+r.PathValue("no")+" is paid: its payment window cannot be extended")
	case errors.Is(err, ErrOrderClosed):
		what := "paid"
		if strings.HasSuffix(r.URL.Path, "/extend") {
			what = "extended"
		}
		e = httpjson.NewError(http.StatusConflict, codeOrderClosed, "order_no",
			"order "+r.PathValue("no")+" is closed (its payment window ended): it cannot be "+what)
	case unavailable.Is(err):
		// Every error that reaches here came from SQL: Redis's (the close
		// job's push, cancel or move) are logged, the relay and the sweeper
		// make up for them.
		h.log.WithError(err).WithFields(logrus.Fields{"method": r.Method, "path": r.URL.Path}).Warn("orders API: backend unavailable")
		e = httpjson.NewError(http.StatusServiceUnavailable, codeBackendUnavailable, "", "sql is unavailable; retry later")
	default:
		h.log.WithError(err).WithFields(logrus.Fields{"method": r.Method, "path": r.URL.Path}).Error("orders API: internal error")
		e = httpjson.NewError(http.StatusInternalServerError, httpjson.CodeInternal, "", "internal error")
	}
	httpjson.WriteError(w, r, e)
}
