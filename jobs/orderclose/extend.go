package orderclose

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// ErrOrderPaid is returned by Extend for an order already paid.
var ErrOrderPaid = errors.New("order is paid")

// Extend extends a pending order's payment window by `by` ("extend the
// payment window", docs/design.md §4.14) and returns the order as it is
// now. An order pending payment can be extended until its close commits,
// as it can be paid until then: one whose deadline is still ahead ends `by`
// later; one whose deadline passed (its close is due, or held by a paused
// order_close topic) gets a new window of `by` from now. A paid order
// returns an error wrapping ErrOrderPaid, a closed one ErrOrderClosed, an
// unknown one ErrOrderNotFound; a by of 0 or less, or one that makes the
// window end more than Config.MaxPaymentWindow from now, an *InputError
// naming by_ms.
//
// The order's pay_deadline moves first, in one conditional update
// (pending); then the close job is rescheduled to the new deadline
// (dataplane.Client.Reschedule, both stores). The order's row is what
// decides: the close handler closes only a pending order past its
// deadline, in a conditional update, and a close job that runs before it
// retries after it. So a reschedule that fails (Redis down), or finds the
// job in flight, leaves a job that runs at the old deadline, finds the
// window open and waits for the new one: the order still closes on time,
// never early. A close that commits first makes the update change nothing
// (ErrOrderClosed); an update that commits first makes the close find the
// window open.
func (s *Service) Extend(ctx context.Context, orderNo string, by time.Duration) (*Order, error) {
	if err := validOrderNo(orderNo); err != nil {
		return nil, err
	}
	if by <= 0 || by > s.cfg.MaxPaymentWindow {
		return nil, &InputError{Field: "by_ms", Reason: fmt.Sprintf("%d: want 1 to %d (orders.max_payment_window)",
			by.Milliseconds(), s.cfg.MaxPaymentWindow.Milliseconds())}
	}
	now := s.cfg.Now().UnixMilli()
	ms := by.Milliseconds()
	latest := now + s.cfg.MaxPaymentWindow.Milliseconds()
	// A deadline already passed restarts from now; that one never ends past
	// latest, since ms is at most the longest window.
	o, changed, err := s.updateOrder(ctx, "extend", orderNo, map[string]any{
		"pay_deadline": gorm.Expr("CASE WHEN pay_deadline > ? THEN pay_deadline + ? ELSE ? END", now, ms, now+ms),
		"version":      gorm.Expr("version + 1"),
	}, "status = ? AND pay_deadline <= ?", StatusPending, latest-ms)
	if err != nil {
		return nil, err
	}
	if !changed {
		switch o.Status {
		case StatusPaid:
			return o, fmt.Errorf("orderclose: extend %s: %w", orderNo, ErrOrderPaid)
		case StatusClosed:
			return o, fmt.Errorf("orderclose: extend %s: %w (reason %s)", orderNo, ErrOrderClosed, o.CloseReason)
		}
		return o, &InputError{Field: "by_ms", Reason: fmt.Sprintf(
			"%d: the window would end %d ms from now, past orders.max_payment_window (%d)",
			ms, o.PayDeadline+ms-now, s.cfg.MaxPaymentWindow.Milliseconds())}
	}
	s.orderLog(orderNo).WithFields(logrus.Fields{"pay_deadline": o.PayDeadline, "by_ms": ms}).Info("payment window extended")
	s.rescheduleClose(ctx, o)
	return o, nil
}

// rescheduleClose moves an extended order's close job to its new deadline.
// It never fails the extension: a job it cannot move runs at the old
// deadline, finds the window open and retries after the new one.
func (s *Service) rescheduleClose(ctx context.Context, o *Order) {
	log := s.orderLog(o.OrderNo)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.EnqueueTimeout)
	defer cancel()
	r, err := s.q.Reschedule(ctx, s.ops, Topic, JobID(o.OrderNo), queue.RescheduleAt(o.PayDeadline))
	switch {
	case err == nil:
		log.WithFields(logrus.Fields{"was_due": r.OldRunAt, "due": r.RunAt}).Debug("close job rescheduled")
	case errors.Is(err, queue.ErrNotFound):
		log.Warn("no close job to reschedule: the sweeper enqueues one after the deadline")
	case errors.Is(err, queue.ErrInFlight):
		log.Info("close job in flight: it finds the window open and retries after the new deadline")
	default:
		log.WithError(err).Warn("could not reschedule the close job: it runs at the old deadline, finds the window open and retries after the new one")
	}
}
