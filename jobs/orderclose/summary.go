package orderclose

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/delayq/delayq/internal/httpjson"
)

// SummaryWindow is how far back Summary looks at closes.
const SummaryWindow = 5 * time.Minute

// maxSummarySKUs bounds the stock list of a Summary.
const maxSummarySKUs = 100

// Summary is the orders at a glance, for an operator's dashboard: how many
// are pending, paid and closed, how late the recent closes ran, and the
// stock left.
type Summary struct {
	Pending, Paid, Closed int64
	// RecentClosed counts the orders closed whose deadline fell in the last
	// SummaryWindow; RecentLateAvgMs and RecentLateMaxMs are how long after
	// their deadline they closed, in ms.
	RecentClosed    int64
	RecentLateAvgMs float64
	RecentLateMaxMs int64
	// Stock lists the SKUs (at most 100, by SKU) with their available stock.
	Stock []SKU
}

// Summary reads the orders summary: three statements, the first two
// answered from the (status, pay_deadline) index.
func (s *Service) Summary(ctx context.Context) (*Summary, error) {
	db := s.db.WithContext(ctx)
	var byStatus []struct {
		Status string
		N      int64
	}
	if err := db.Model(&Order{}).Select("status, COUNT(*) AS n").Group("status").Scan(&byStatus).Error; err != nil {
		return nil, fmt.Errorf("orderclose: summary: count orders by status: %w", err)
	}
	sum := &Summary{}
	for _, r := range byStatus {
		switch r.Status {
		case StatusPending:
			sum.Pending = r.N
		case StatusPaid:
			sum.Paid = r.N
		case StatusClosed:
			sum.Closed = r.N
		}
	}
	var recent struct {
		N   int64
		Avg *float64
		Max *int64
	}
	since := s.cfg.Now().Add(-SummaryWindow).UnixMilli()
	err := db.Model(&Order{}).Where("status = ? AND pay_deadline >= ?", StatusClosed, since).
		Select("COUNT(*) AS n, AVG(closed_at - pay_deadline) AS avg, MAX(closed_at - pay_deadline) AS max").
		Scan(&recent).Error
	if err != nil {
		return nil, fmt.Errorf("orderclose: summary: recent closes: %w", err)
	}
	sum.RecentClosed = recent.N
	if recent.Avg != nil {
		sum.RecentLateAvgMs = *recent.Avg
	}
	if recent.Max != nil {
		sum.RecentLateMaxMs = *recent.Max
	}
	if err := db.Order("sku").Limit(maxSummarySKUs).Find(&sum.Stock).Error; err != nil {
		return nil, fmt.Errorf("orderclose: summary: stock: %w", err)
	}
	return sum, nil
}

// summaryView is GET /v1/orders/summary's answer.
type summaryView struct {
	Orders struct {
		Created int64 `json:"created"`
		Pending int64 `json:"pending_payment"`
		Paid    int64 `json:"paid"`
		Closed  int64 `json:"closed"`
	} `json:"orders"`
	RecentCloses struct {
		WindowMs  int64   `json:"window_ms"`
		Closed    int64   `json:"closed"`
		AvgLateMs float64 `json:"avg_late_ms"`
		MaxLateMs int64   `json:"max_late_ms"`
	} `json:"recent_closes"`
	Stock []stockView `json:"stock"`
}

type stockView struct {
	SKU   string `json:"sku"`
	Stock int64  `json:"stock"`
}

// summary serves GET /v1/orders/summary.
func (h *HTTPHandler) summary(w http.ResponseWriter, r *http.Request) {
	if err := noInput(r); err != nil {
		h.fail(w, r, err)
		return
	}
	sum, err := h.s.Summary(r.Context())
	if err != nil {
		h.fail(w, r, err)
		return
	}
	var v summaryView
	v.Orders.Created = sum.Pending + sum.Paid + sum.Closed
	v.Orders.Pending, v.Orders.Paid, v.Orders.Closed = sum.Pending, sum.Paid, sum.Closed
	v.RecentCloses.WindowMs = SummaryWindow.Milliseconds()
	v.RecentCloses.Closed = sum.RecentClosed
	v.RecentCloses.AvgLateMs = sum.RecentLateAvgMs
	v.RecentCloses.MaxLateMs = sum.RecentLateMaxMs
	v.Stock = make([]stockView, 0, len(sum.Stock))
	for _, k := range sum.Stock {
		v.Stock = append(v.Stock, stockView{SKU: k.SKU, Stock: k.Stock})
	}
	httpjson.WriteJSON(w, http.StatusOK, v)
}
