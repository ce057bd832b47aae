package recoverer

import (
	"context"

	"github.com/delayq/delayq/ledger"
)

// pages calls fn with every page of ledger rows whose lease_until is before
// olderThan, in id order. Paging by id (the next page starts after the last
// id seen) means a page of rows that need nothing never hides later ones,
// and rows coming and going meanwhile shift nothing. The next page is read
// while fn works on the current one (fn runs in the caller's goroutine).
func (r *Recoverer) pages(ctx context.Context, olderThan int64, fn func(rows []ledger.Entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	type page struct {
		rows []ledger.Entry
		err  error
	}
	next := make(chan page, 1)
	go func() {
		defer close(next)
		afterID := int64(0)
		for {
			rows, err := r.store.Stale(ctx, olderThan, afterID, r.cfg.PageSize)
			select {
			case next <- page{rows, err}:
			case <-ctx.Done():
				return
			}
			if err != nil || len(rows) < r.cfg.PageSize {
				return
			}
			afterID = rows[len(rows)-1].ID
		}
	}()
	defer func() {
		cancel()
		for range next { // the reader is gone before the run goes on
		}
	}()
	for p := range next {
		if p.err != nil {
			return p.err
		}
		if len(p.rows) == 0 {
			return nil
		}
		if err := fn(p.rows); err != nil {
			return err
		}
	}
	return nil
}
