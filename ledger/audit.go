package ledger

import (
	"context"
	"errors"
	"fmt"

	"github.com/delayq/delayq/internal/dataplane"
)

// The audit queries answer "what is in flight, what is stuck and since when,
// which worker held it, what died and why". Each returns at most limit rows
// in a stable order (by id unless said otherwise), so a listing does not
// shuffle between two calls; limit must be positive.

func checkLimit(limit int) error {
	if limit <= 0 {
		return fmt.Errorf("ledger: limit %d: must be positive", limit)
	}
	return nil
}

// InFlight lists ledger rows, oldest first; topic "" means every topic.
func (l *Ledger) InFlight(ctx context.Context, topic string, limit int) ([]Entry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	q := l.conn(ctx).Table(l.ledgerTable)
	if topic != "" {
		where, vars := topicMatch(topic)
		q = q.Where(where, vars...)
	}
	var rows []Entry
	if err := q.Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: in-flight rows of topic %q: %w", topic, err)
	}
	return rows, nil
}

// Stale lists rows whose lease_until is before olderThan (Unix ms) and whose
// id is greater than afterID, by id. The recoverer pages through all of them
// by passing the last id it got as the next afterID (0 to start): ids never
// change, so every row stale throughout is returned exactly once, however
// rows come and go between pages.
func (l *Ledger) Stale(ctx context.Context, olderThan, afterID int64, limit int) ([]Entry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	var rows []Entry
	err := l.conn(ctx).Table(l.ledgerTable).
		Where("lease_until < ? AND id > ?", olderThan, afterID).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("ledger: stale rows (lease before %d, after id %d): %w", olderThan, afterID, err)
	}
	return rows, nil
}

// ByWorker lists the rows a worker (host:pid) holds, by id: what a dead
// process left behind.
func (l *Ledger) ByWorker(ctx context.Context, worker string, limit int) ([]Entry, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	var rows []Entry
	err := l.conn(ctx).Table(l.ledgerTable).
		Where("worker = ?", worker).
		Order("id").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("ledger: rows of worker %q: %w", worker, err)
	}
	return rows, nil
}

// DeadLetters lists the jobs of topic that died in [dayStart, dayEnd) (Unix
// ms), by time of death then id, which is the order of the (topic, died_at)
// index; topic "" means every topic.
func (l *Ledger) DeadLetters(ctx context.Context, topic string, dayStart, dayEnd int64, limit int) ([]DeadLetter, error) {
	if err := checkLimit(limit); err != nil {
		return nil, err
	}
	q := l.conn(ctx).Table(l.deadTable).Where("died_at >= ? AND died_at < ?", dayStart, dayEnd)
	if topic != "" {
		where, vars := topicMatch(topic)
		q = q.Where(where, vars...)
	}
	var rows []DeadLetter
	if err := q.Order("died_at").Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: dead letters of topic %q in [%d, %d): %w", topic, dayStart, dayEnd, err)
	}
	return rows, nil
}

// Row returns the ledger row of one job, or an error wrapping ErrNotFound.
func (l *Ledger) Row(ctx context.Context, topic, id string) (Entry, error) {
	var rows []Entry
	// Find, not First: a missing row is an expected answer here, and First
	// would also log it as an error.
	where, vars := topicMatch(topic)
	err := l.conn(ctx).Table(l.ledgerTable).
		Where(where, vars...).Where("job_id = ?", id).
		Order("id DESC").Limit(1).Find(&rows).Error
	if err != nil {
		return Entry{}, fmt.Errorf("ledger: row %s/%s: %w", topic, id, err)
	}
	if len(rows) == 0 {
		return Entry{}, fmt.Errorf("ledger: row %s/%s: %w", topic, id, ErrNotFound)
	}
	return rows[0], nil
}

// Lookup returns the row of one job as the queue reads it (dataplane.Ledger),
// or nil when there is none.
func (l ops) Lookup(ctx context.Context, topic, id string) (*dataplane.RestoreRow, error) {
	e, err := l.Row(ctx, topic, id)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	r := e.RestoreRow()
	return &r, nil
}

// RestoreRow is the row as the queue's restore takes it (Client.Restore):
// the job as Redis would hold it again.
func (e Entry) RestoreRow() dataplane.RestoreRow {
	return dataplane.RestoreRow{
		Topic: e.Topic, ID: e.JobID, State: e.State,
		RunAt: e.RunAt, EnqueuedAt: e.EnqueuedAt, Attempt: e.Attempt, MaxAttempts: e.MaxAttempts, LastError: e.LastError, Payload: e.Payload,
		TraceParent: e.Trace, Priority: e.Priority, OrderingKey: e.OrderingKey,
	}
}

// Count returns how many jobs are in flight (rows in the ledger).
func (l *Ledger) Count(ctx context.Context) (int64, error) {
	var n int64
	if err := l.conn(ctx).Table(l.ledgerTable).Count(&n).Error; err != nil {
		return 0, fmt.Errorf("ledger: count rows: %w", err)
	}
	return n, nil
}

// CountStale returns how many rows have lease_until before olderThan (Unix
// ms): the recoverer's backlog, worth a metric.
func (l *Ledger) CountStale(ctx context.Context, olderThan int64) (int64, error) {
	var n int64
	err := l.conn(ctx).Table(l.ledgerTable).Where("lease_until < ?", olderThan).Count(&n).Error
	if err != nil {
		return 0, fmt.Errorf("ledger: count rows with lease before %d: %w", olderThan, err)
	}
	return n, nil
}
