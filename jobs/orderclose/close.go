package orderclose

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// Handlers is what the close handler registers with: an *engine.Engine, or
// the worker of one.
type Handlers interface {
	Handle(topic string, h queue.Handler, tc queue.TopicConfig) error
}

// Register attaches the close handler to w on Topic with tc (zero fields
// take the worker's defaults). w must record its jobs in the Service's
// ledger: the handler deletes the job's row in its own transaction.
func Register(w Handlers, s *Service, tc queue.TopicConfig) error {
	if err := w.Handle(Topic, s.CloseHandler(), tc); err != nil {
		return fmt.Errorf("orderclose: register the close handler: %w", err)
	}
	return nil
}

// CloseHandler returns the close job's handler. In one transaction on the
// ledger's database (ledger.Transactional) it moves the order from
// pending_payment to closed; if that changed the row, it inserts the
// close-log row and gives the order's stock back; and it deletes the job's
// ledger row. So:
//
//   - an order already paid or closed is a successful no-op (the ledger row
//     still goes);
//   - a close-log row that already exists means the close was done: the
//     order is closed without a second stock release;
//   - a run whose claim was lost (another worker took the job over) commits
//     nothing and returns an error wrapping ledger.ErrClaimLost;
//   - a run before the order's deadline (a job enqueued by hand, clock skew)
//     closes nothing and asks for a retry once the deadline has passed on
//     this process's clock;
//   - a job whose id names no order is buried at once (queue.SkipRetry).
//
// A transaction rolled back as a deadlock victim is run again after a few
// milliseconds, a few times; any other error rolls everything back and the
// worker retries.
func (s *Service) CloseHandler() queue.Handler {
	inTx := ledger.Transactional(s.led, s.closeInTx)
	return queue.HandlerFunc(func(ctx context.Context, job *queue.Job) error {
		if _, err := orderNoOf(job); err != nil {
			return queue.SkipRetry(err)
		}
		return ledger.RetryDeadlocks(ctx, func() error { return inTx(ctx, job) })
	})
}

// errNotDue is the cause of the retry of a close job that ran before its
// order's deadline.
var errNotDue = errors.New("order not yet past its pay deadline")

// orderNoOf returns the order number a close job's id names.
func orderNoOf(job *queue.Job) (string, error) {
	no, ok := strings.CutPrefix(job.ID, JobIDPrefix)
	if !ok || validOrderNo(no) != nil {
		return "", fmt.Errorf("orderclose: job %s/%s is not a close job (want id %s<order_no>)", job.Topic, job.ID, JobIDPrefix)
	}
	return no, nil
}

// closeInTx is the close handler's part of the transaction.
func (s *Service) closeInTx(ctx context.Context, tx *gorm.DB, job *queue.Job) error {
	no, err := orderNoOf(job)
	if err != nil {
		return queue.SkipRetry(err)
	}
	log := s.log.WithFields(logrus.Fields{"topic": job.Topic, "job": job.ID, "order": no, "attempt": job.Attempt})
	now := s.cfg.Now().UnixMilli()

	res := tx.Model(&Order{}).
		Where("order_no = ? AND status = ? AND pay_deadline <= ?", no, StatusPending, now).
		Updates(map[string]any{
			"status":       StatusClosed,
			"closed_at":    now,
			"close_reason": CloseReasonTimeout,
			"version":      gorm.Expr("version + 1"),
		})
	if res.Error != nil {
		return fmt.Errorf("orderclose: close %s: %w", no, res.Error)
	}
	if res.RowsAffected == 0 {
		return s.notClosed(ctx, tx, log, no, now)
	}

	if err := tx.Create(&CloseLog{OrderNo: no, ClosedAt: now, JobAttempt: job.Attempt}).Error; err != nil {
		if isDuplicate(tx, err) {
			// Closed before (the status says otherwise only if someone
			// reopened the order by hand): its stock went back then.
			log.Warn("order pending, but its close-log row exists: closed without a second stock release")
			recordClose(ctx, closeResult{OrderNo: no, Did: "closed before"})
			return nil
		}
		return fmt.Errorf("orderclose: close %s: close log: %w", no, err)
	}

	var items []OrderItem
	if err := tx.Where("order_no = ?", no).Order("sku").Find(&items).Error; err != nil {
		return fmt.Errorf("orderclose: close %s: read items: %w", no, err)
	}
	for _, it := range items { // in SKU order, as CreateOrder takes them
		res := tx.Model(&SKU{}).Where("sku = ?", it.SKU).Update("stock", gorm.Expr("stock + ?", it.Quantity))
		if res.Error != nil {
			return fmt.Errorf("orderclose: close %s: give back stock of %s: %w", no, it.SKU, res.Error)
		}
		if res.RowsAffected != 1 {
			return fmt.Errorf("orderclose: close %s: give back stock of %s: the SKU is gone", no, it.SKU)
		}
	}
	log.WithField("items", len(items)).Info("order closed: payment window over, stock given back")
	recordClose(ctx, closeResult{OrderNo: no, Did: "closed", ItemsRestocked: len(items)})
	return nil
}

// notClosed explains a close that changed no row: the order is paid or
// closed (success: nothing to do), missing (success, logged), or not yet
// past its deadline (retry at the deadline).
func (s *Service) notClosed(ctx context.Context, tx *gorm.DB, log logrus.FieldLogger, no string, now int64) error {
	var o Order
	err := tx.Select("status", "pay_deadline").Where("order_no = ?", no).Take(&o).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		log.Warn("close job for an order that does not exist: nothing to do")
		recordClose(ctx, closeResult{OrderNo: no, Did: "nothing: no such order"})
		return nil
	case err != nil:
		return fmt.Errorf("orderclose: close %s: read order: %w", no, err)
	case o.Status == StatusPending:
		// RetryAfter, not RetryAt: the wait is measured on this clock, the
		// one that found the job early, whatever Redis's clock says.
		early := time.Duration(o.PayDeadline-now+1) * time.Millisecond
		log.WithFields(logrus.Fields{"pay_deadline": o.PayDeadline, "early": early}).
			Warn("close job ran before the pay deadline: retrying after it")
		return queue.RetryAfter(fmt.Errorf("orderclose: close %s: %w (%s early)", no, errNotDue, early), early)
	}
	log.WithField("status", o.Status).Debug("order not pending: nothing to close")
	recordClose(ctx, closeResult{OrderNo: no, Did: "nothing: order " + o.Status})
	return nil
}

// closeResult is what a close job's history row keeps as its result
// (queue.RecordResult): what the run did to its order.
type closeResult struct {
	OrderNo string `json:"order_no"`
	// Did is "closed", "closed before" (its close-log row existed) or
	// "nothing: ..." with the reason.
	Did string `json:"did"`
	// ItemsRestocked is how many order lines gave their stock back.
	ItemsRestocked int `json:"items_restocked,omitempty"`
}

// recordClose keeps r as the run's result. Outside a worker (a handler
// called directly) there is nowhere to keep it, and nothing is lost.
func recordClose(ctx context.Context, r closeResult) { _ = queue.RecordResult(ctx, r) }
