package orderclose

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/ledger"
)

// Service creates, pays, reads and closes orders. It is safe for concurrent
// use.
type Service struct {
	led *ledger.Ledger
	// ops are the close jobs' ledger steps (cancel, reschedule): led's,
	// or over ledger shards the queue's router, which takes each job to
	// its partition's shard (a close job the sweeper enqueued goes to a
	// partition, which may be on another shard than led).
	ops ledgerops.Router
	db  *gorm.DB // the ledger's database
	q   *dataplane.Client
	cfg Config
	log logrus.FieldLogger
}

// New returns a Service whose orders live in the ledger's database (see
// Migrate) and whose close jobs go through q. The caller owns both.
func New(led *ledger.Ledger, q *dataplane.Client, cfg Config) (*Service, error) {
	if led == nil || q == nil {
		return nil, errors.New("orderclose: New needs a ledger and a queue client")
	}
	if !q.WaitsInSQL(Topic) {
		// The close job commits with its order: that needs the topic's
		// jobs in SQL (RequiredDurability).
		return nil, fmt.Errorf("orderclose: topic %s must be %s (queue.Config.TopicDurability)", Topic, RequiredDurability)
	}
	qc := q.Config()
	cfg, err := cfg.withDefaults(qc.Namespace, qc.MaxBatch)
	if err != nil {
		return nil, err
	}
	if cfg.MaxPaymentWindow > qc.MaxDelay {
		return nil, fmt.Errorf("orderclose: Config.MaxPaymentWindow %s is beyond the queue's MaxDelay %s: close jobs could not be enqueued", cfg.MaxPaymentWindow, qc.MaxDelay)
	}
	var ops ledgerops.Router = ledgerops.Of(led)
	if r, ok := qc.Store.(ledgerops.Router); ok && q.LedgerShards() > 1 {
		ops = r
	}
	return &Service{
		led: led,
		ops: ops,
		// The orders tables are the module's, not the ledger's, but they
		// must share its database: the close updates the order and deletes
		// the job's ledger row in one transaction (ledger.Transactional).
		db:  led.DB(),
		q:   q,
		cfg: cfg,
		log: cfg.Logger,
	}, nil
}

// Config returns the service's configuration with defaults filled in.
func (s *Service) Config() Config { return s.cfg }

// OrderDetails is an order with its lines and, once closed, its close-log
// row.
type OrderDetails struct {
	Order Order
	Items []OrderItem // by SKU
	Close *CloseLog   // nil unless the order was closed
}

// Get returns an order with its lines, or an error wrapping
// ErrOrderNotFound, or an *InputError for a malformed order number.
func (s *Service) Get(ctx context.Context, orderNo string) (*OrderDetails, error) {
	if err := validOrderNo(orderNo); err != nil {
		return nil, err
	}
	db := s.db.WithContext(ctx)
	d := &OrderDetails{}
	if err := db.Where("order_no = ?", orderNo).Take(&d.Order).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, fmt.Errorf("orderclose: get %s: %w", orderNo, ErrOrderNotFound)
		}
		return nil, fmt.Errorf("orderclose: get %s: %w", orderNo, err)
	}
	if err := db.Where("order_no = ?", orderNo).Order("sku").Find(&d.Items).Error; err != nil {
		return nil, fmt.Errorf("orderclose: get %s: items: %w", orderNo, err)
	}
	if d.Order.Status == StatusClosed {
		var cl CloseLog
		err := db.Where("order_no = ?", orderNo).Take(&cl).Error
		switch {
		case err == nil:
			d.Close = &cl
		case !errors.Is(err, gorm.ErrRecordNotFound):
			return nil, fmt.Errorf("orderclose: get %s: close log: %w", orderNo, err)
		}
	}
	return d, nil
}

// orderLog returns a logger with the order's fields.
func (s *Service) orderLog(orderNo string) logrus.FieldLogger {
	return s.log.WithFields(logrus.Fields{"topic": Topic, "job": JobID(orderNo), "order": orderNo})
}
