package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// rescheduleTries bounds how often Reschedule looks again at a job that
// moved between its steps (claimed and retried, rescheduled by someone
// else, or put back by a relay or recovery pass).
const rescheduleTries = 20

// RescheduleLedger is the SQL side Reschedule needs: the row of a job Redis
// has no trace of (Lookup, as for Cancel) and the fenced move of a waiting
// row's due time. *ledger.Ledger is one.
type RescheduleLedger interface {
	Lookup(ctx context.Context, topic, id string) (*RestoreRow, error)
	// Reschedule moves run_at of ref's row to runAt (lease_until of a
	// retrying row with it), only if the row waits (waiting or retrying)
	// at ref.Attempt and, when from is not 0, its run_at is from (a
	// compare-and-set: concurrent shifts of a row Redis lacks each apply).
	// It reports whether the row waits at runAt now.
	Reschedule(ctx context.Context, ref Ref, from, runAt int64) (bool, error)
}

// errRescheduleMoved is reschedule.lua's answer for a job that waits at
// another attempt or due time than the caller saw.
var errRescheduleMoved = errors.New("job moved meanwhile")

// Reschedule moves the due time of a job that waits (for its first run or
// for a retry), in Redis and, where it has one, in its ledger row; it
// returns the job and both due times. ErrInFlight: a worker holds it;
// ErrDead: it is dead; ErrNotFound: no such job; a *ValidationError
// naming "run_at", "delay" or "shift" for a time out of range (the limits
// of an enqueue: from now to now + Config.MaxDelay; a time in the past
// means now). An error of the ledger wraps ErrLedger. The API, the CLI and
// the orders module all call it (docs/design.md §4.14).
//
// The steps, and why in this order (the invariant is: a job never runs
// before the last due time a Reschedule returned):
//
//  1. Read Redis's clock (now, for RescheduleIn, and the seen-at of step 4)
//     and the job: its state, attempt and due time, and its ledger row if
//     it has one (every waiting job of a durable topic, a retry on any
//     topic). The target is computed here: at, now + delay, or the due
//     time + shift, the row's when there is a row (Redis's otherwise).
//  2. The ledger row first: its run_at moves to the target by a
//     compare-and-set on the run_at and attempt read in step 1, only while
//     the row waits; a row that moved meanwhile (a concurrent reschedule)
//     is read again from step 1, so concurrent shifts each apply once. A
//     row a claim made in_flight is not touched (ErrInFlight). Once the
//     row has this call's move, later rounds only bring Redis to the row.
//  3. Then Redis (reschedule.lua): compare and set, fenced by the attempt
//     and the due time step 1 saw; refused for a job in flight or dead. A
//     job that moved meanwhile (claimed and retried, or moved by a
//     concurrent call's own step 3) is looked at again. A call that keeps
//     losing answers ErrContended.
//  4. A job Redis has no trace of (a durable job beyond the horizon, or
//     lost) is moved in its row and then created in Redis at the new time
//     (restore.lua with the seen-at of step 1, so a job that ran and was
//     acked meanwhile is not brought back), even beyond the horizon.
//
// SQL before Redis, and the create in step 4, are what keep a relay or
// recovery pass that read the row before step 2 from putting the job back
// at its old, earlier time: Redis has the job from step 3 or 4 on, and
// restore.lua creates only what Redis does not have; if the pass's stale
// push lands first, step 3 finds it and moves it. Redis first would leave a
// window where a Redis loss brings the old time back from the row. A
// failure after step 2 (Redis down) leaves the job due at its old time in
// Redis, the new one in SQL: the reschedule was not accepted, the job runs
// at the old time as before, and repeating the call finishes it.
func (c *Client) Reschedule(ctx context.Context, l RescheduleLedger, topic, id string, to When) (*Rescheduled, error) {
	r, err := c.reschedule(ctx, l, topic, id, to)
	// An invalid topic is no label a metric should grow.
	if o, ok := c.cfg.Observer.(RescheduleObserver); ok && ValidateTopic(topic) == nil {
		o.Rescheduled(topic, RescheduleResult(err))
	}
	return r, err
}

func (c *Client) reschedule(ctx context.Context, l RescheduleLedger, topic, id string, to When) (*Rescheduled, error) {
	if l == nil {
		return nil, errors.New("queue: reschedule: a ledger is required")
	}
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	if err := c.validateWhen(to, time.Now()); err != nil {
		return nil, err
	}
	// A partitioned topic's job moves in the partition that has it.
	name, err := c.nameOf(ctx, l, topic, id)
	if err != nil {
		return nil, err
	}
	topic = name
	var (
		// accepted: this call's move is in the ledger row (its
		// compare-and-set won). Later rounds only bring Redis to the row's
		// due time: computing a shift again would apply it twice, or on top
		// of a concurrent shift that built on this one.
		accepted bool
		old      int64 // the row's due time this call moved from
	)
	for range rescheduleTries {
		seen, err := c.Time(ctx)
		if err != nil {
			return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, err)
		}
		now := seen.UnixMilli()
		info, err := c.getPart(ctx, topic, id)
		if err != nil {
			return nil, err
		}
		switch info.State {
		case StateInFlight:
			return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrInFlight)
		case StateDead:
			return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrDead)
		}
		inRedis := info.State != StateUnknown
		var row *RestoreRow
		if !inRedis || info.Job.Attempt > 0 || c.lifecycle(topic).waitsInSQL() {
			if row, err = l.Lookup(ctx, topic, id); err != nil {
				return nil, fmt.Errorf("queue: reschedule %s/%s: read its ledger row: %w: %w", topic, id, ErrLedger, err)
			}
			switch {
			case row == nil && !inRedis:
				return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrNotFound)
			case row != nil && row.State == StateInFlight:
				// A claim recorded it, or its last claim's lease ran out
				// and the next claim is about to take it over (Redis put
				// it back due at once).
				return nil, fmt.Errorf("queue: reschedule %s/%s: the ledger says a worker holds it: %w", topic, id, ErrInFlight)
			}
			// A job Redis holds with no row at all (enqueued before its
			// topic became durable, or its row lost) has only Redis to move.
		}
		if row == nil {
			target, err := c.resolveWhen(to, now, info.Score)
			if err != nil {
				return nil, err
			}
			res, err := c.rescheduleWaiting(ctx, topic, id, info.Job.Attempt, info.Score, target)
			if errors.Is(err, errRescheduleMoved) || errors.Is(err, ErrNotFound) {
				continue // moved, or lost: look again
			}
			return res, err
		}
		// The row is where moves are ordered: its due time is read, the new
		// one computed from it and written only if it is still the same.
		target := row.RunAt
		if !accepted {
			if target, err = c.resolveWhen(to, now, row.RunAt); err != nil {
				return nil, err
			}
			ok, err := l.Reschedule(ctx, Ref{Topic: topic, ID: id, Attempt: row.Attempt}, row.RunAt, target)
			if err != nil {
				return nil, fmt.Errorf("queue: reschedule %s/%s: move its ledger row: %w: %w", topic, id, ErrLedger, err)
			}
			if !ok {
				continue // moved, claimed, finished or cancelled meanwhile: look again
			}
			accepted, old = true, row.RunAt
		}
		if !inRedis {
			out, err := c.restoreAt(ctx, row, target, now)
			switch {
			case err != nil:
				return nil, err
			case out == RestoreCreated:
				j := &Job{Topic: topic, ID: id, Payload: row.Payload, Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
					EnqueuedAt: row.EnqueuedAt, RunAt: target, LastError: row.LastError, Priority: row.Priority, OrderingKey: row.OrderingKey}
				return &Rescheduled{Job: j, OldRunAt: old, RunAt: target, State: stateInRedis(inDue, j.Attempt)}, nil
			case out == RestoreGone:
				// Acked, or cancelled, since step 1: the job is over.
				return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrNotFound)
			}
			continue // a pass put it back meanwhile: move it there
		}
		res, err := c.rescheduleWaiting(ctx, topic, id, info.Job.Attempt, info.Score, target)
		if errors.Is(err, errRescheduleMoved) || errors.Is(err, ErrNotFound) {
			continue // moved (a concurrent call's Redis step, a pass), or lost: bring it to the row again
		}
		if err != nil {
			return nil, err
		}
		res.OldRunAt = old
		return res, nil
	}
	if accepted {
		// The row has this call's move; Redis is brought to it by the next
		// call, or by the relay's or recoverer's pass if Redis lost it.
		return nil, fmt.Errorf("queue: reschedule %s/%s: the job moved %d times while Redis was brought to its ledger row; try again: %w",
			topic, id, rescheduleTries, ErrContended)
	}
	return nil, fmt.Errorf("queue: reschedule %s/%s: the job moved %d times while being rescheduled; try again: %w", topic, id, rescheduleTries, ErrContended)
}

// rescheduleWaiting runs reschedule.lua for a job seen in due at attempt
// and due time cur.
func (c *Client) rescheduleWaiting(ctx context.Context, topic, id string, attempt int, cur, target int64) (*Rescheduled, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	reply, err := c.scripts.reschedule.Run(ctx, c.rdb, append([]string{k.due, k.lease, k.job, k.dead, k.wake}, k.ordered()...),
		id, strconv.Itoa(attempt), cur, target).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, err)
	}
	switch asInt64(reply[0]) {
	case 1:
		if len(reply) != 7 {
			return nil, fmt.Errorf("queue: reschedule %s/%s: reply of %d values", topic, id, len(reply))
		}
		j := &Job{Topic: topic, ID: id}
		env, _ := reply[3].(string)
		if err := decodeEnvelope([]byte(env), j); err != nil {
			return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, err)
		}
		j.Priority = int(asInt64(reply[4]))
		j.OrderingKey, _ = reply[5].(string)
		return &Rescheduled{Job: j, OldRunAt: asInt64(reply[1]), RunAt: asInt64(reply[2]), State: stateInRedis(inDue, j.Attempt),
			Parked: asInt64(reply[6]) == 1}, nil
	case -1:
		return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrInFlight)
	case -2:
		return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrDead)
	case -3:
		return nil, errRescheduleMoved
	}
	return nil, fmt.Errorf("queue: reschedule %s/%s: %w", topic, id, ErrNotFound)
}

// restoreAt creates in Redis, at target, the job of a waiting row Redis had
// no trace of when it was read at seen (Redis's clock).
func (c *Client) restoreAt(ctx context.Context, row *RestoreRow, target, seen int64) (RestoreOutcome, error) {
	r := *row
	r.RunAt = target
	if r.State != StateWaiting {
		r.State = StateRetrying
	}
	out, err := c.Restore(ctx, []RestoreRow{r}, RestoreOptions{SeenAt: seen})
	if err != nil {
		return RestoreFailed, fmt.Errorf("queue: reschedule %s/%s: %w", row.Topic, row.ID, err)
	}
	return out[0], nil
}

// validateWhen checks what can be checked before the job is read: the kind
// and the range of its value (the limits of an enqueue).
func (c *Client) validateWhen(w When, now time.Time) error {
	switch w.Kind {
	case WhenAt:
		latest := now.Add(c.cfg.MaxDelay).UnixMilli()
		if w.At < earliestRunAt || w.At > latest {
			return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
				Reason: fmt.Sprintf("%d: want Unix milliseconds from %d (2001-01-01) to %d (now + %s)",
					w.At, int64(earliestRunAt), latest, c.cfg.MaxDelay)}
		}
	case WhenIn:
		if w.D < 0 || w.D > c.cfg.MaxDelay {
			return &ValidationError{Field: "delay", Kind: ErrInvalidRunAt,
				Reason: fmt.Sprintf("%s: want 0 to %s", w.D, c.cfg.MaxDelay)}
		}
	case WhenBy:
		if w.D < -c.cfg.MaxDelay || w.D > c.cfg.MaxDelay {
			return &ValidationError{Field: "shift", Kind: ErrInvalidRunAt,
				Reason: fmt.Sprintf("%s: want -%s to %s", w.D, c.cfg.MaxDelay, c.cfg.MaxDelay)}
		}
	default:
		return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
			Reason: "give a due time, a delay or a shift"}
	}
	return nil
}

// resolveWhen computes the new due time from Redis's now and the job's
// current due time cur; a result past now + MaxDelay is refused, one before
// now means now.
func (c *Client) resolveWhen(w When, now, cur int64) (int64, error) {
	var t int64
	field := "run_at"
	switch w.Kind {
	case WhenAt:
		t = w.At
	case WhenIn:
		t, field = now+w.D.Milliseconds(), "delay"
	case WhenBy:
		t, field = cur+w.D.Milliseconds(), "shift"
	}
	if latest := now + c.cfg.MaxDelay.Milliseconds(); t > latest {
		return 0, &ValidationError{Field: field, Kind: ErrInvalidRunAt,
			Reason: fmt.Sprintf("the new due time %d is past now + %s (%d)", t, c.cfg.MaxDelay, latest)}
	}
	return max(t, now), nil
}
