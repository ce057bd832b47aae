package bench

import (
	"context"
	"sync/atomic"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// LedgerStats counts the worker's ledger statements during a measured
// phase: the batching that decides how many jobs one SQL commit carries.
type LedgerStats struct {
	Records       int64   `json:"records"`        // Record statements (one per claimed batch)
	RecordedRows  int64   `json:"recorded_rows"`  // rows they wrote
	Completes     int64   `json:"completes"`      // Complete statements (one per completer flush)
	CompletedRows int64   `json:"completed_rows"` // rows they deleted
	RowsPerRecord float64 `json:"rows_per_record"`
	RowsPerDelete float64 `json:"rows_per_complete"`
}

// countingLedger is a dataplane.Ledger that counts the calls it passes on.
type countingLedger struct {
	dataplane.Ledger
	records, recordedRows, completes, completedRows atomic.Int64
}

func (l *countingLedger) Record(ctx context.Context, jobs []*queue.Job, worker string) error {
	l.records.Add(1)
	l.recordedRows.Add(int64(len(jobs)))
	return l.Ledger.Record(ctx, jobs, worker)
}

func (l *countingLedger) Complete(ctx context.Context, refs []queue.Ref) error {
	l.completes.Add(1)
	l.completedRows.Add(int64(len(refs)))
	return l.Ledger.Complete(ctx, refs)
}

func (l *countingLedger) CompleteResults(ctx context.Context, refs []queue.Ref, results [][]byte) error {
	l.completes.Add(1)
	l.completedRows.Add(int64(len(refs)))
	return l.Ledger.CompleteResults(ctx, refs, results)
}

// stats returns the counts so far.
func (l *countingLedger) stats() *LedgerStats {
	s := &LedgerStats{
		Records: l.records.Load(), RecordedRows: l.recordedRows.Load(),
		Completes: l.completes.Load(), CompletedRows: l.completedRows.Load(),
	}
	if s.Records > 0 {
		s.RowsPerRecord = float64(s.RecordedRows) / float64(s.Records)
	}
	if s.Completes > 0 {
		s.RowsPerDelete = float64(s.CompletedRows) / float64(s.Completes)
	}
	return s
}
