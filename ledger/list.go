package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// ListFilter selects the rows List returns. The zero value with a Limit
// lists every row by id.
type ListFilter struct {
	// State is queue.StateWaiting, StateInFlight or StateRetrying (the
	// states a row can be in); "" means every state.
	State queue.State
	// Topic is one topic; "" means every topic.
	Topic string
	// DueAfter and DueBefore bound run_at (Unix ms), both exclusive:
	// run_at > DueAfter and run_at < DueBefore. 0 means no bound (a job's
	// run_at is a real time, never 0 or less).
	DueAfter, DueBefore int64
	// After is the previous page's Next; nil starts at the beginning.
	After *Cursor
	// Limit is the most rows of a page; it must be positive.
	Limit int
}

// Cursor is where a page ended: the run_at and id of its last row; the next
// page starts after it. List and Scheduled take it. A cursor from a listing
// in one order can be used with the other: by id it resumes after ID, by
// due time after (RunAt, ID). The zero value is the start of the id order.
type Cursor struct {
	RunAt int64
	ID    int64
	// Shard is the ledger shard of the row the page ended on (ListShards);
	// 0 on a ledger of one, where List ignores it.
	Shard int
}

// String is the cursor's text form, "<run_at>_<id>", as the API and the CLI
// pass it on; "<run_at>_<id>_<shard>" past shard 0.
func (c Cursor) String() string {
	s := strconv.FormatInt(c.RunAt, 10) + "_" + strconv.FormatInt(c.ID, 10)
	if c.Shard > 0 {
		s += "_" + strconv.Itoa(c.Shard)
	}
	return s
}

// ParseCursor reads a Cursor's text form. Only the form String produces is
// accepted: two decimal integers in their shortest spelling, the id
// positive, and a shard past 0.
func ParseCursor(s string) (Cursor, error) {
	runAt, id, ok := strings.Cut(s, "_")
	var c Cursor
	var err1, err2, err3 error
	if ok {
		var shard string
		if id, shard, ok = strings.Cut(id, "_"); ok {
			c.Shard, err3 = strconv.Atoi(shard)
			if err3 == nil && (c.Shard < 1 || strconv.Itoa(c.Shard) != shard) {
				err3 = errors.New("shard")
			}
		}
		ok = true
		c.RunAt, err1 = strconv.ParseInt(runAt, 10, 64)
		c.ID, err2 = strconv.ParseInt(id, 10, 64)
	}
	// The round trip refuses what ParseInt takes but String never writes
	// ("+1", "01", "-0"): a cursor has one spelling.
	if !ok || err1 != nil || err2 != nil || err3 != nil || c.ID < 1 || c.String() != s {
		return Cursor{}, fmt.Errorf("ledger: cursor %q: want <run_at>_<id> (or <run_at>_<id>_<shard>) as a page's next cursor gives it", s)
	}
	return c, nil
}

// Page is one page of List: its rows and, when more may follow, the cursor
// of the next page (nil on the last one).
type Page struct {
	Rows []Entry
	Next *Cursor
}

// ValidState reports whether s is a state a row can be in, which List
// can filter on.
func ValidState(s queue.State) bool { return s.Column() != "" }

// List returns a page of ledger rows, in one statement.
//
// With a State, rows come by due time: ORDER BY run_at, id, which is the
// order of the (state, run_at) index (InnoDB and SQLite both append the
// primary key to a secondary index's entries), so the state, the due-time
// bounds and the cursor are one range scan of that index that stops at the
// limit, sorting nothing. Due time is what an operator asks about a waiting
// job ("what is overdue", "what is beyond the horizon"), and for rows in
// progress it is when their run was due.
//
// Without a State, rows come by id, the order of the primary key and of
// InFlight: ids are kept when a claim rewrites a row, so this is the order
// in which jobs first got their row. A Topic alone is served by the unique
// (topic, job_id) index or the primary key; due-time bounds without a State
// filter the rows the primary key walks, so give a State for due-time
// questions over a large ledger.
//
// Paging is by keyset (the cursor), not offset: every row that stays in
// the ledger and in the filter throughout is returned once however rows
// come and go between pages. In due-time order that holds for rows whose
// run_at stays put, which it does while a row keeps its state, except for
// an in-flight row claimed again after its lease expired (its run_at
// becomes the lease's end). One more row than Limit is read to tell
// whether a next page exists.
func (l *Ledger) List(ctx context.Context, f ListFilter) (Page, error) {
	return l.list(ctx, f, false)
}

// list is List; with atCursor a row at the cursor itself is included (a
// shard past the cursor's, ListShards).
func (l *Ledger) list(ctx context.Context, f ListFilter, atCursor bool) (Page, error) {
	q, err := l.listQuery(ctx, f, atCursor)
	if err != nil {
		return Page{}, err
	}
	var rows []Entry
	if err := q.Find(&rows).Error; err != nil {
		return Page{}, fmt.Errorf("ledger: list rows (state %q, topic %q): %w", f.State, f.Topic, err)
	}
	p := Page{Rows: rows}
	if len(rows) > f.Limit {
		p.Rows = rows[:f.Limit]
		last := p.Rows[f.Limit-1]
		p.Next = &Cursor{RunAt: last.RunAt, ID: last.ID}
	}
	return p, nil
}

// listQuery is List's statement: filter, order, cursor and one row more
// than the limit.
func (l *Ledger) listQuery(ctx context.Context, f ListFilter, atCursor bool) (*gorm.DB, error) {
	if err := checkLimit(f.Limit); err != nil {
		return nil, err
	}
	if f.State != "" && !ValidState(f.State) {
		return nil, fmt.Errorf("ledger: state %q: want %s, %s or %s", f.State, queue.StateWaiting, queue.StateInFlight, queue.StateRetrying)
	}
	q := l.conn(ctx).Table(l.ledgerTable)
	if f.State != "" {
		q = q.Where("state = ?", f.State)
	}
	if f.Topic != "" {
		where, vars := topicMatch(f.Topic)
		q = q.Where(where, vars...)
	}
	if f.DueAfter != 0 {
		q = q.Where("run_at > ?", f.DueAfter)
	}
	if f.DueBefore != 0 {
		q = q.Where("run_at < ?", f.DueBefore)
	}
	byDue := f.State != ""
	if c := f.After; c != nil {
		switch {
		case byDue && atCursor:
			q = q.Where(atOrAfterCursor, c.RunAt, c.RunAt, c.ID)
		case byDue:
			q = q.Where(afterCursor, c.RunAt, c.RunAt, c.ID)
		case atCursor:
			q = q.Where("id >= ?", c.ID)
		default:
			q = q.Where("id > ?", c.ID)
		}
	}
	if byDue {
		q = q.Order("run_at").Order("id")
	} else {
		q = q.Order("id")
	}
	read := f.Limit
	if read < math.MaxInt {
		read++ // one more: is there a next page?
	}
	return q.Limit(read), nil
}
