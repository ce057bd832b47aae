package dataplane

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// cancelTries bounds how often Cancel looks again at a job that was claimed
// and retried between its steps; each time takes a worker's whole attempt.
const cancelTries = 5

// errAttemptChanged is cancel.lua's answer for a job waiting at another
// attempt than the one the caller saw.
var errAttemptChanged = errors.New("job waits at another attempt")

// Cancel removes a job that has not started (waiting for its first run or
// for a retry) from Redis and from the ledger l, and returns it. It returns
// ErrNotFound for an unknown job, ErrInFlight when a worker holds the job
// (its handler may be running), ErrDead for a dead job; an error of the
// ledger wraps ErrLedger. It is the one way to cancel a job: the API, the
// CLI and the modules all call it.
//
// The order of its steps is what keeps a cancelled job from coming back.
// A job waiting for a retry has a ledger row as well as its Redis entries,
// and a row whose job Redis no longer tracks is exactly what the recoverer
// puts back. So:
//
//  1. Redis is read: the job's state and the attempt it waits at.
//  2. The ledger row of that attempt is deleted (Ledger.CancelRows: fenced,
//     so a claim made meanwhile, which rewrites the row with a newer
//     attempt, keeps it), leaving the job's history row (cancelled) in the
//     same transaction. A redis topic's first run has no row: its history
//     row is written here instead, on its own (Ledger.Cancelled). A cancel
//     whose step 3 then finds the job claimed leaves that history row for
//     a job that runs after all: the job's later history row tells.
//  3. The Redis entries are removed, in one script that refuses a job held
//     by a worker, a dead one, or one waiting at another attempt than step 1
//     saw (claimed and retried meanwhile: Cancel starts again at step 1).
//
// A recovery run that reads the row before step 2 finds Redis still tracking
// the job, and one that finds Redis without it (after step 3) reads the row
// again first and finds it gone. Redis first would leave, between the two
// steps, a row without its job: a recovery run then would bring the job back.
// If step 3 fails after step 2 (Redis down, or the job claimed meanwhile),
// the job runs as it would have: it is not lost while Redis keeps it, and
// the worker writes its row again when it claims it.
//
// A job Redis has no trace of (its data was lost) but whose row waits for a
// retry is cancelled from that row: it is deleted, fenced by its attempt,
// and Redis is read again, since a recovery run that read the row before it
// went may have put the job back meanwhile (it is then removed as above, or
// ErrInFlight if a worker took it already). A row a worker holds is
// ErrInFlight. Every cancel leaves a tombstone (cancel.lua), even for a job
// Redis had no trace of, so a relay or recovery pass that read the row
// before it went and restores afterwards is refused (restore.lua): no pass
// brings a cancelled job back. A durable topic's waiting jobs all have a
// row (waiting, attempt 0), deleted in step 2 like a retry's.
func (c *Client) Cancel(ctx context.Context, l Ledger, topic, id string) (*Job, error) {
	if l == nil {
		return nil, errors.New("queue: cancel: a Ledger is required")
	}
	if err := ValidateTopic(topic); err != nil {
		return nil, err
	}
	if err := ValidateID(id); err != nil {
		return nil, err
	}
	// A partitioned topic's job is cancelled in the partition that has it.
	name, err := c.nameOf(ctx, l, topic, id)
	if err != nil {
		return nil, err
	}
	topic = name
	var lost *Job // cancelled from its ledger row, Redis having no trace of it
	for range cancelTries {
		info, err := c.getPart(ctx, topic, id)
		if err != nil {
			return nil, err
		}
		attempt := 0
		switch info.State {
		case StateInFlight:
			return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrInFlight)
		case StateDead:
			return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrDead)
		case StateUnknown:
			if lost == nil {
				if lost, err = c.cancelLost(ctx, l, topic, id); err != nil {
					return nil, err
				}
			}
			// The row is gone; cancel.lua now removes the job if a relay or
			// recovery pass put it back meanwhile, and leaves a tombstone
			// that keeps a pass which read the row before it went from
			// putting it back later.
			attempt = lost.Attempt
		default:
			attempt = info.Job.Attempt
			// A retry has a row, and so does every waiting job of a durable
			// topic (its waiting row, attempt 0).
			if attempt > 0 || c.lifecycle(topic).waitsInSQL() {
				if err := l.CancelRows(ctx, []Ref{info.Job.Ref()}); err != nil {
					return nil, fmt.Errorf("queue: cancel %s/%s: delete its ledger row: %w: %w", topic, id, ErrLedger, err)
				}
			} else if err := l.Cancelled(ctx, []*Job{info.Job}); err != nil {
				// Before Redis's step, so that SQL down leaves the job as it
				// was (a retryable error), not cancelled without its history.
				return nil, fmt.Errorf("queue: cancel %s/%s: write its history: %w: %w", topic, id, ErrLedger, err)
			}
		}
		job, err := c.cancelWaiting(ctx, topic, id, attempt)
		switch {
		case lost != nil && (err == nil || errors.Is(err, ErrNotFound)):
			return lost, nil
		case !errors.Is(err, errAttemptChanged):
			return job, err
		}
	}
	return nil, fmt.Errorf("queue: cancel %s/%s: claimed and retried %d times while being cancelled; try again", topic, id, cancelTries)
}

// cancelWaiting removes the Redis entries of a job waiting at attempt.
func (c *Client) cancelWaiting(ctx context.Context, topic, id string, attempt int) (*Job, error) {
	k, err := c.keysFor(topic)
	if err != nil {
		return nil, err
	}
	reply, err := c.scripts.cancel.Run(ctx, c.rdb, append(append([]string{k.due, k.lease, k.job, k.dead, k.gone, k.runs, k.taken}, k.ordered()...), k.wake),
		id, strconv.Itoa(attempt), c.cfg.TombstoneTTL.Milliseconds(), c.lifecycle(topic).takenFor(topic).Milliseconds()).Slice()
	if err != nil {
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, err)
	}
	switch asInt64(reply[0]) {
	case 1:
		c.forgetTraces(ctx, Ref{Topic: topic, ID: id})
		j := &Job{Topic: topic, ID: id}
		if env, ok := reply[1].(string); ok {
			if err := decodeEnvelope([]byte(env), j); err != nil {
				return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, err)
			}
		}
		j.Priority = int(asInt64(reply[2]))
		j.OrderingKey, _ = reply[3].(string)
		return j, nil
	case -1:
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrInFlight)
	case -2:
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrDead)
	case -3:
		return nil, errAttemptChanged
	}
	return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrNotFound)
}

// cancelLost deletes the ledger row of a job Redis has no trace of, if it
// waits for a retry, and returns the job as the row describes it.
func (c *Client) cancelLost(ctx context.Context, l Ledger, topic, id string) (*Job, error) {
	row, err := l.Lookup(ctx, topic, id)
	switch {
	case err != nil:
		return nil, fmt.Errorf("queue: cancel %s/%s: read its ledger row: %w: %w", topic, id, ErrLedger, err)
	case row == nil:
		return nil, fmt.Errorf("queue: cancel %s/%s: %w", topic, id, ErrNotFound)
	case row.State == StateInFlight:
		return nil, fmt.Errorf("queue: cancel %s/%s: not in Redis, and the ledger says a worker holds it: %w", topic, id, ErrInFlight)
	}
	if err := l.CancelRows(ctx, []Ref{{Topic: topic, ID: id, Attempt: row.Attempt}}); err != nil {
		return nil, fmt.Errorf("queue: cancel %s/%s: delete its ledger row: %w: %w", topic, id, ErrLedger, err)
	}
	return &Job{
		Topic: topic, ID: id, Payload: row.Payload, Attempt: row.Attempt, MaxAttempts: row.MaxAttempts,
		RunAt: row.RunAt, LastError: row.LastError, Priority: row.Priority, OrderingKey: row.OrderingKey,
	}, nil
}

// CancelRunning asks the worker that holds a job (its handler running, or
// claimed and about to start) to cancel its run, and returns the job and
// when the cancel was first asked (Redis ms). The worker's process learns
// of it on the job's wake channel, which every worker of the topic
// listens to, whichever process holds the job: the handler's context is
// cancelled (cause ErrCancelRequested), a job not started yet is not
// started, and a run that then ends in an error ends cancelled, never
// retried (history outcome cancelled). A handler that returns nil all the
// same has done its work: the job ends succeeded. A handler that ignores
// its context runs on, the job held and its cancel asked, until it
// returns. Asking again keeps the first ask's time.
//
// It returns ErrNotFound when no worker holds the job: Cancel removes a
// waiting one.
func (c *Client) CancelRunning(ctx context.Context, l Ledger, topic, id string) (*Job, int64, error) {
	if err := ValidateTopic(topic); err != nil {
		return nil, 0, err
	}
	if err := ValidateID(id); err != nil {
		return nil, 0, err
	}
	name, err := c.nameOf(ctx, l, topic, id)
	if err != nil {
		return nil, 0, err
	}
	k, err := c.keysFor(name)
	if err != nil {
		return nil, 0, err
	}
	reply, err := c.scripts.cancelRun.Run(ctx, c.rdb, []string{k.lease, k.job, k.cancel, k.wake}, id).Slice()
	if err != nil {
		return nil, 0, fmt.Errorf("queue: cancel the run of %s/%s: %w", topic, id, err)
	}
	if asInt64(reply[0]) != 1 || len(reply) != 4 {
		return nil, 0, fmt.Errorf("queue: cancel the run of %s/%s: no worker holds it: %w", topic, id, ErrNotFound)
	}
	j := &Job{Topic: topic, ID: id}
	env, _ := reply[1].(string)
	if err := decodeEnvelope([]byte(env), j); err != nil {
		return nil, 0, fmt.Errorf("queue: cancel the run of %s/%s: %w", topic, id, err)
	}
	if name != topic {
		j.Partition = name
	}
	if lease, err := strconv.ParseFloat(fmt.Sprint(reply[3]), 64); err == nil {
		j.LeaseUntil = int64(lease)
	}
	return j, asInt64(reply[2]), nil
}
