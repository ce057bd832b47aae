package orderclose

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"

	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// updateOrder runs one conditional UPDATE of orderNo's order (the
// order_no and cond, retried on deadlocks) and reads the order back;
// changed says whether cond held. verb names the operation in errors; an
// order that does not exist is ErrOrderNotFound.
func (s *Service) updateOrder(ctx context.Context, verb, orderNo string, set map[string]any, cond string, args ...any) (*Order, bool, error) {
	var changed int64
	err := ledger.RetryDeadlocks(ctx, func() error {
		res := s.db.WithContext(ctx).Model(&Order{}).
			Where("order_no = ? AND "+cond, append([]any{orderNo}, args...)...).
			Updates(set)
		changed = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return nil, false, fmt.Errorf("orderclose: %s %s: %w", verb, orderNo, err)
	}
	var o Order
	if err := s.db.WithContext(ctx).Where("order_no = ?", orderNo).Take(&o).Error; err != nil {
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, false, fmt.Errorf("orderclose: %s %s: %w", verb, orderNo, ErrOrderNotFound)
		}
		return nil, false, fmt.Errorf("orderclose: %s %s: %w", verb, orderNo, err)
	}
	return &o, changed > 0, nil
}

// Pay marks an order paid: a conditional update from pending_payment only,
// so that it and the close job can never both succeed. Paying an order
// already paid succeeds again (payment notifications repeat); a closed
// order returns an error wrapping ErrOrderClosed, an unknown one
// ErrOrderNotFound, a malformed number an *InputError. It returns the order
// as it is now.
//
// After the update it cancels the close job, best effort: if the job is
// running already, its conditional update finds the order paid and does
// nothing.
func (s *Service) Pay(ctx context.Context, orderNo string) (*Order, error) {
	if err := validOrderNo(orderNo); err != nil {
		return nil, err
	}
	now := s.cfg.Now().UnixMilli()
	o, changed, err := s.updateOrder(ctx, "pay", orderNo, map[string]any{
		"status":  StatusPaid,
		"paid_at": now,
		"version": gorm.Expr("version + 1"),
	}, "status = ?", StatusPending)
	if err != nil {
		return nil, err
	}
	switch {
	case o.Status == StatusClosed:
		return o, fmt.Errorf("orderclose: pay %s: %w (reason %s)", orderNo, ErrOrderClosed, o.CloseReason)
	case !changed:
		s.orderLog(orderNo).Debug("order already paid")
		return o, nil
	}
	s.orderLog(orderNo).Debug("order paid")
	s.cancelClose(ctx, orderNo)
	return o, nil
}

// cancelClose removes a paid order's close job if it is still waiting,
// with dataplane.Client.Cancel (its ledger row too, if it waits for a retry). It
// never fails the payment: a job it cannot remove finds the order paid and
// does nothing.
func (s *Service) cancelClose(ctx context.Context, orderNo string) {
	log := s.orderLog(orderNo)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.EnqueueTimeout)
	defer cancel()
	job, err := s.q.Cancel(ctx, s.ops, Topic, JobID(orderNo))
	switch {
	case err == nil:
		log.WithField("attempt", job.Attempt).Debug("close job cancelled")
	case errors.Is(err, queue.ErrNotFound):
		log.Debug("no close job to cancel (already done, or never enqueued)")
	case errors.Is(err, queue.ErrInFlight):
		log.Debug("close job in flight: it will find the order paid")
	case errors.Is(err, queue.ErrDead):
		log.Info("close job is dead: nothing to cancel")
	default:
		log.WithError(err).Warn("could not cancel the close job: it will find the order paid")
	}
}
