package ledger

import (
	"context"
	"errors"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// PeriodicTable returns the name of the periodic schedules' table
// (dq_periodic by default).
func (l *Ledger) PeriodicTable() string { return l.opts.TablePrefix + "periodic" }

// EnqueueTick enqueues the job of one tick (Unix ms) of the periodic
// schedule name on a durable topic, unless the schedule's last tick in
// dq_periodic is at or after it. The conditional update of last_tick and
// the job's waiting row commit in one transaction, so a tick is enqueued
// once however many processes run the schedule, and one killed half-way
// leaves either both or neither. After the commit the job is pushed to
// Redis (dataplane.Client.Push; a failed push is the relay's).
//
// The transaction is run again if it was a deadlock victim: two processes
// inserting a schedule's first row can deadlock on MySQL's gap locks; the
// run again then finds the other's row and answers Duplicate.
func (l ops) EnqueueTick(ctx context.Context, q *dataplane.Client, topic, name string, tick int64, j queue.NewJob) (queue.TickResult, error) {
	if q == nil {
		return queue.TickResult{}, errors.New("ledger: enqueue tick: a *dataplane.Client is required")
	}
	if err := checkKey(topic, j.ID); err != nil {
		return queue.TickResult{}, err
	}
	if err := checkText("schedule name", name, maxTopicLen); err != nil {
		return queue.TickResult{}, err
	}
	var out queue.TickResult
	var staged *dataplane.Staged
	err := l.transaction(ctx, func(tx *gorm.DB) error {
		out, staged = queue.TickResult{}, nil
		now := l.nowMs()
		res := tx.Table(l.PeriodicTable()).Where("name = ? AND last_tick < ?", name, tick).
			Updates(map[string]any{"last_tick": tick, "topic": topic, "updated_at": now})
		if res.Error != nil {
			return fmt.Errorf("claim tick: %w", res.Error)
		}
		if res.RowsAffected == 0 {
			res = tx.Table(l.PeriodicTable()).Clauses(clause.OnConflict{DoNothing: true}).
				Create(&PeriodicTick{Name: name, Topic: topic, LastTick: tick, UpdatedAt: now})
			if res.Error != nil {
				return fmt.Errorf("claim tick: %w", res.Error)
			}
			if res.RowsAffected == 0 {
				// The row is there with last_tick >= tick: a duplicate.
				out.Duplicate = true
				return tx.Table(l.PeriodicTable()).Select("last_tick").Where("name = ?", name).
					Row().Scan(&out.LastTick)
			}
		}
		s, err := q.EnqueueTx(ctx, l.Tx(tx), topic, j)
		if err != nil {
			return err
		}
		r := s.Results()[0]
		if r.Status == queue.BatchInvalid {
			return r.Err
		}
		out.Job = queue.EnqueueResult{ID: r.ID, RunAt: r.RunAt, Duplicate: r.Status == queue.BatchDuplicate}
		staged = s
		return nil
	})
	if err != nil {
		return queue.TickResult{}, fmt.Errorf("ledger: tick of %s on %s: %w", name, topic, err)
	}
	// The push's error is the relay's business, as in Transaction.
	_ = q.Push(ctx, staged)
	return out, nil
}

// LastTicks returns the last tick enqueued (Unix ms) of each named periodic
// schedule that has a row in dq_periodic.
func (l *Ledger) LastTicks(ctx context.Context, names ...string) (map[string]int64, error) {
	out := make(map[string]int64, len(names))
	if len(names) == 0 {
		return out, nil
	}
	var rows []PeriodicTick
	if err := l.conn(ctx).Table(l.PeriodicTable()).Where("name IN ?", names).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: last ticks: %w", err)
	}
	for _, r := range rows {
		out[r.Name] = r.LastTick
	}
	return out, nil
}
