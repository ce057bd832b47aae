package ledger

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/queue"
)

// Durable topics (docs/design.md §4.11): every job has a row from its
// enqueue on. Schedule writes the rows; the relay's and the recoverer's
// queries over them are in scheduled.go.

// The ledger is the SQL side of durable topics, partitioned ones included.
var (
	_ queue.PartitionStore = (*Ledger)(nil)
	_ queue.PartitionStore = txStore{}
	_ queue.PartitionStore = sqlTxStore{}
)

// scheduleTries bounds how often Schedule reads its ids again and repeats
// its INSERT after a concurrent enqueue of one of them took the unique key
// first. Each repeat writes at least the jobs nobody else enqueued, so more
// than a couple only happen under a storm of enqueues of the same ids.
const scheduleTries = 5

// scheduleStmtBytes bounds the ids and payloads of one INSERT of Schedule.
// MySQL refuses a statement longer than max_allowed_packet (4 MiB by default
// on 5.7, 16 MiB on MariaDB), and the interpolated text of a binary payload
// can take twice its size.
const scheduleStmtBytes = 1 << 20

// scheduleRowOverhead is what a row of Schedule's INSERT costs besides its
// id and payload, in bytes of statement text: the inlined numbers and the
// constants (about 135, the worker's padding included).
const scheduleRowOverhead = 160

// scheduleColumns are the columns Schedule's INSERT writes, in the order of
// scheduleRow.
const scheduleColumns = "(topic, job_id, payload, attempt, max_attempts, run_at, claimed_at, lease_until," +
	" worker, state, last_error, updated_at, enqueued_at, trace, priority, ordering_key)"

// Schedule writes one waiting row per job of a durable topic (state
// waiting, attempt 0) and returns one result per job, in order, and the
// SQL server's clock (Unix ms) the due times were computed on
// (queue.DurableStore). Each statement commits on its own; a call that needs
// more than one INSERT (very large batches, see below) runs in a transaction
// of its own, so it writes all of its jobs or none.
//
// Due times come from the SQL server's clock, never this process's: run_at
// is now + Delay, or RunAt if that is later than now. The clock is read in
// the same statement as the ids, so a call costs two round trips, one SELECT
// and one multi-row INSERT, however many jobs it carries:
//
//   - an id with a row already (waiting, in flight, or retrying) is a
//     Duplicate, with the row's run_at when the job waits (waiting or
//     retrying) and 0 when a worker holds it;
//   - a job whose id is earlier in jobs is a Duplicate of that one;
//   - the others are created, written by one INSERT (split in statements of
//     at most about 1 MiB of ids and payloads, or at the placeholder limit).
//
// An enqueue of the same id on another connection between the SELECT and
// the INSERT fails the INSERT on the unique key, which undoes that statement
// only: Schedule then reads the ids again and repeats the INSERT with the
// jobs still new, up to 5 times.
//
// The jobs must be valid already (the engine validates them and fills in
// MaxAttempts); the topic and ids are checked against the column sizes
// before anything is written.
func (l *Ledger) Schedule(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	return l.schedule(ctx, nil, topic, jobs)
}

// ScheduleEach writes jobs[i] to the partition (or topic) topics[i], as
// Schedule does, for every i, in one transaction: one commit for all
// (queue.PartitionStore).
func (l *Ledger) ScheduleEach(ctx context.Context, topics []string, jobs [][]queue.NewJob) ([][]queue.EnqueueResult, int64, error) {
	return l.scheduleEach(ctx, nil, topics, jobs)
}

// scheduleEach is ScheduleEach in tx when tx is set, otherwise in a
// transaction of its own.
func (l *Ledger) scheduleEach(ctx context.Context, tx *gorm.DB, topics []string, jobs [][]queue.NewJob) ([][]queue.EnqueueResult, int64, error) {
	if len(topics) != len(jobs) {
		return nil, 0, fmt.Errorf("ledger: schedule: %d topics for %d lists of jobs", len(topics), len(jobs))
	}
	for n, topic := range topics {
		for i := range jobs[n] {
			if err := checkKey(topic, jobs[n][i].ID); err != nil {
				return nil, 0, fmt.Errorf("ledger: schedule: job %d of %s: %w", i, topic, err)
			}
		}
	}
	if tx == nil {
		if out, now, ok, err := l.scheduleEachAtOnce(ctx, topics, jobs); ok || err != nil {
			return out, now, err
		}
	}
	out := make([][]queue.EnqueueResult, len(topics))
	var now int64
	run := func(db *gorm.DB) error {
		now = 0
		for n, topic := range topics {
			res, at, err := l.scheduleOn(db, topic, jobs[n])
			if err != nil {
				return fmt.Errorf("%s: %w", topic, err)
			}
			out[n] = res
			if now == 0 || at < now {
				now = at
			}
		}
		return nil
	}
	var err error
	if tx != nil {
		err = run(tx)
	} else {
		err = l.transaction(ctx, run)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: schedule the jobs of %d partitions: %w", len(topics), err)
	}
	return out, now, nil
}

// scheduleEachAtOnce is ScheduleEach's common case, as cheap as an
// unpartitioned Schedule: with a fresh estimate of the SQL clock, and the
// jobs of every partition fitting one statement, it inserts them all in one
// INSERT of its own (atomic alone: no transaction). ok is false, and
// nothing was written, when the case does not apply or an id already had a
// row (the unique key refused the statement): the caller then takes the
// general path, which reads the ids.
func (l *Ledger) scheduleEachAtOnce(ctx context.Context, topics []string, jobs [][]queue.NewJob) (out [][]queue.EnqueueResult, now int64, ok bool, err error) {
	now, fresh := l.clock.now()
	if !fresh {
		return nil, 0, false, nil
	}
	if !l.insertFitsOne(jobs...) || !slices.ContainsFunc(jobs, func(js []queue.NewJob) bool { return len(js) > 0 }) {
		return nil, 0, false, nil // too many, or none: the general path
	}
	if slices.ContainsFunc(topics, func(t string) bool { return l.uniqueFor(t) > 0 }) {
		return nil, 0, false, nil // the history must be read: the general path
	}
	out = make([][]queue.EnqueueResult, len(topics))
	var rows []newRow
	for p, topic := range topics {
		res, fresh := planSchedule(jobs[p], nil, map[string]int64{}, now)
		out[p] = res
		for _, i := range fresh {
			rows = append(rows, newRow{topic: topic, job: &jobs[p][i], runAt: res[i].RunAt})
		}
	}
	// In the unique key's order, as Schedule inserts: two INSERTs that
	// meet lock their rows in one order.
	slices.SortFunc(rows, func(a, b newRow) int {
		return cmp.Or(strings.Compare(a.topic, b.topic), strings.Compare(a.job.ID, b.job.ID))
	})
	err = l.autocommit(ctx, func() error { return l.insertRows(l.conn(ctx), rows, now, func([]newRow) {}) })
	switch {
	case err == nil:
		return out, now, true, nil
	case isDuplicateKey(err):
		return nil, 0, false, nil
	default:
		return nil, 0, false, fmt.Errorf("ledger: schedule the jobs of %d partitions: %w", len(topics), err)
	}
}

// Tx returns the ledger's DurableStore bound to tx, a transaction the caller
// runs on the ledger's database (Engine.EnqueueTx): Schedule then
// writes in tx, opens no transaction of its own, and its rows exist exactly
// when tx commits. A unique key race is handled inside tx as Schedule does
// it (the failed statement alone is undone), reading the ids again with a
// locking read so that REPEATABLE READ's snapshot cannot hide the row that
// won. A deadlock rolls back all of tx on MySQL: the error is returned, and
// running the transaction again is the caller's choice.
func (l *Ledger) Tx(tx *gorm.DB) queue.DurableStore { return txStore{l: l, tx: tx} }

// SQLTx is Tx for a *sql.Tx of database/sql, opened on the ledger's
// database (the *sql.DB under DB()).
func (l *Ledger) SQLTx(tx *sql.Tx) queue.DurableStore { return sqlTxStore{l: l, tx: tx} }

type txStore struct {
	l  *Ledger
	tx *gorm.DB
}

func (s txStore) ScheduleEach(ctx context.Context, topics []string, jobs [][]queue.NewJob) ([][]queue.EnqueueResult, int64, error) {
	if s.tx == nil {
		return nil, 0, fmt.Errorf("ledger: schedule in a transaction: nil *gorm.DB")
	}
	return s.l.scheduleEach(ctx, s.tx.Session(&gorm.Session{NewDB: true, Context: ctx}), topics, jobs)
}

func (s txStore) Schedule(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	if s.tx == nil {
		return nil, 0, fmt.Errorf("ledger: schedule in a transaction: nil *gorm.DB")
	}
	// A new statement on tx's connection: whatever the caller chained on
	// tx (a table, conditions) stays out of the ledger's statements.
	return s.l.schedule(ctx, s.tx.Session(&gorm.Session{NewDB: true, Context: ctx}), topic, jobs)
}

type sqlTxStore struct {
	l  *Ledger
	tx *sql.Tx
}

func (s sqlTxStore) ScheduleEach(ctx context.Context, topics []string, jobs [][]queue.NewJob) ([][]queue.EnqueueResult, int64, error) {
	if s.tx == nil {
		return nil, 0, fmt.Errorf("ledger: schedule in a transaction: nil *sql.Tx")
	}
	db := s.l.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	db.Statement.ConnPool = s.tx
	return s.l.scheduleEach(ctx, db, topics, jobs)
}

func (s sqlTxStore) Schedule(ctx context.Context, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	if s.tx == nil {
		return nil, 0, fmt.Errorf("ledger: schedule in a transaction: nil *sql.Tx")
	}
	// The ledger's gorm handle with its connection pool swapped for tx,
	// as gorm's own Begin does: a Session with a Context has a Statement of
	// its own, so the swap does not leak into the ledger's handle.
	db := s.l.db.Session(&gorm.Session{NewDB: true, Context: ctx})
	db.Statement.ConnPool = s.tx
	return s.l.schedule(ctx, db, topic, jobs)
}

// schedule is Schedule in tx when tx is set (the caller's transaction),
// otherwise on the ledger's own connections.
func (l *Ledger) schedule(ctx context.Context, tx *gorm.DB, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	for i := range jobs {
		if err := checkKey(topic, jobs[i].ID); err != nil {
			return nil, 0, fmt.Errorf("ledger: schedule: job %d: %w", i, err)
		}
	}
	if len(jobs) == 0 {
		db := tx
		if db == nil {
			db = l.conn(ctx)
		}
		now, err := l.sqlNow(db)
		if err != nil {
			return nil, 0, fmt.Errorf("ledger: schedule: %w", err)
		}
		return nil, now, nil
	}
	var out []queue.EnqueueResult
	var now int64
	run := func(db *gorm.DB) (err error) {
		out, now, err = l.scheduleOn(db, topic, jobs)
		return err
	}
	var err error
	switch {
	case tx != nil:
		err = run(tx)
	case l.scheduleFitsOne(jobs):
		// Two statements, each atomic on its own: nothing to roll back.
		err = l.autocommit(ctx, func() error { return run(l.conn(ctx)) })
	default:
		err = l.transaction(ctx, run)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("ledger: schedule %d jobs of %s: %w", len(jobs), topic, err)
	}
	return out, now, nil
}

// scheduleFitsOne says whether jobs take one SELECT and one INSERT.
func (l *Ledger) scheduleFitsOne(jobs []queue.NewJob) bool {
	return len(jobs) <= l.batchSize(1, 1) && l.insertFitsOne(jobs)
}

// insertFitsOne says whether the rows of jobs (of every list) take one
// INSERT: the placeholder limit and scheduleStmtBytes.
func (l *Ledger) insertFitsOne(jobs ...[]queue.NewJob) bool {
	n, size := 0, 0
	for _, js := range jobs {
		n += len(js)
		for i := range js {
			size += scheduleRowBytes(&js[i])
		}
	}
	return n <= l.batchSize(3, 0) && size <= scheduleStmtBytes
}

func scheduleRowBytes(j *queue.NewJob) int {
	return len(j.ID) + len(j.Payload) + len(j.OrderingKey) + scheduleRowOverhead
}

// existingRow is what Schedule needs of a row its job's id has already:
// a ledger row's state and run_at, or, for a job that finished within the
// topic's uniqueness window, its history row's outcome and when the window
// ends.
type existingRow struct {
	state string
	runAt int64
	// finished: a history row; state is its outcome, runAt the window's end.
	finished bool
}

// scheduleOn runs one Schedule on db: a connection or a transaction.
func (l *Ledger) scheduleOn(db *gorm.DB, topic string, jobs []queue.NewJob) ([]queue.EnqueueResult, int64, error) {
	// mine are the ids this call has inserted already, with their run_at:
	// in a transaction, an INSERT after the first may lose a race while the
	// earlier ones stand, and reading the ids again then finds those rows.
	mine := make(map[string]int64)
	window := l.uniqueFor(topic)
	// New ids are the common case: with a fresh estimate of the SQL clock
	// (never behind it), the INSERT goes first, alone. An id that has a
	// row fails it on the unique key, which undoes that statement only;
	// the ids are then read, with the clock, as below. A topic with a
	// uniqueness window reads them first: no key holds a finished job's id.
	if now, ok := l.clock.now(); ok && window == 0 {
		out, fresh := planSchedule(jobs, nil, mine, now)
		err := l.insertScheduled(db, topic, jobs, fresh, out, now, mine)
		if err == nil {
			return out, now, nil
		}
		if !isDuplicateKey(err) {
			return nil, 0, err
		}
	}
	// The ids to read, distinct: only a call that reads them needs them.
	ids := make([]string, 0, len(jobs))
	for i := range jobs {
		ids = append(ids, jobs[i].ID)
	}
	slices.Sort(ids) // the unique key's order: locking reads lock in it
	ids = slices.Compact(ids)
	sentAt := time.Now()
	now, existing, err := l.readIDs(db, topic, ids, true, window)
	if err != nil {
		return nil, 0, err
	}
	l.clock.observe(now, sentAt)
	for try := 1; ; try++ {
		out, fresh := planSchedule(jobs, existing, mine, now)
		err := l.insertScheduled(db, topic, jobs, fresh, out, now, mine)
		if err == nil {
			return out, now, nil
		}
		if !isDuplicateKey(err) || try == scheduleTries {
			return nil, 0, err
		}
		if _, existing, err = l.readIDs(db, topic, ids, false, window); err != nil {
			return nil, 0, err
		}
	}
}

// UniqueFor is the uniqueness window the ledger keeps for topic (a topic's
// or a partition's name): Options.UniqueFor; 0 for none.
func (l *Ledger) UniqueFor(topic string) time.Duration {
	return time.Duration(l.uniqueFor(topic)) * time.Millisecond
}

// UniqueForAll returns the ledger's uniqueness windows by topic
// (Options.UniqueFor), a copy.
func (l *Ledger) UniqueForAll() map[string]time.Duration { return maps.Clone(l.opts.UniqueFor) }

// uniqueFor is the uniqueness window of topic (a topic's or a partition's
// name) in ms: Options.UniqueFor; 0 for none.
func (l *Ledger) uniqueFor(topic string) int64 {
	if len(l.opts.UniqueFor) == 0 {
		return 0
	}
	return l.opts.UniqueFor[queue.TopicOf(topic)].Milliseconds()
}

// readIDs returns the rows topic has for ids (sorted, distinct), in
// statements of as many ids as the placeholder limit allows. The first
// statement also reads the SQL server's clock when withNow is set: one
// round trip for both. Without it (reading again after a lost race), the
// rows are read with a shared lock, so that in a transaction the read sees
// the row that won, not the transaction's snapshot; that row is committed
// (the INSERT waited for it), so the lock waits for nobody.
//
// With a uniqueness window (ms, > 0) the ids' history rows that finished
// within it are read too (in the same statement as the clock, or in one
// of their own after a locked read: a lock on history rows that do not
// exist would hold gaps against the completer), and returned for the ids
// that have no ledger row: a live job's row decides.
func (l *Ledger) readIDs(db *gorm.DB, topic string, ids []string, withNow bool, window int64) (int64, map[string]existingRow, error) {
	var now int64
	existing := make(map[string]existingRow)
	per, fixed := 1, 1
	if window > 0 {
		per, fixed = 2, 2 // each id in both IN lists, and the topic twice
	}
	err := forSpans(len(ids), l.batchSize(per, fixed), func(lo, hi int) error {
		part := ids[lo:hi]
		first := withNow && lo == 0
		var b strings.Builder
		b.Grow(160 + 2*len(part))
		vars := make([]any, 0, 2+2*len(part))
		if first {
			// run_at comes first so that the column is a BIGINT in both
			// halves of the UNION; the clock's row is the one without an id.
			b.WriteString("SELECT " + l.dialect.now + " AS run_at, NULL AS job_id, NULL AS state, 0 AS finished UNION ALL ")
			if window > 0 {
				vars = l.finishedSelect(&b, vars, topic, part, window)
				b.WriteString(" UNION ALL ")
			}
		}
		b.WriteString("SELECT run_at, job_id, state, 0 AS finished FROM `" + l.ledgerTable + "` WHERE topic = ? AND job_id IN (")
		vars = append(vars, topic)
		writeIn(&b, &vars, part)
		if !withNow {
			b.WriteString(l.dialect.shareLock)
		}
		sawNow, err := scanIDs(db.Raw(b.String(), vars...), &now, existing)
		if err != nil {
			return err
		}
		if first && !sawNow {
			return fmt.Errorf("read ids: the clock's row is missing")
		}
		if !first && window > 0 {
			var hb strings.Builder
			hvars := l.finishedSelect(&hb, nil, topic, part, window)
			_, err := scanIDs(db.Raw(hb.String(), hvars...), &now, existing)
			return err
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	return now, existing, nil
}

// finishedSelect writes to b the SELECT of the history rows of ids of topic
// that finished within window (ms) of the SQL clock, in readIDs' columns:
// the window's end as run_at, the outcome as state. It returns vars with
// its bound values added.
func (l *Ledger) finishedSelect(b *strings.Builder, vars []any, topic string, ids []string, window int64) []any {
	w := strconv.FormatInt(window, 10)
	b.WriteString("SELECT finished_at + " + w + " AS run_at, job_id, outcome AS state, 1 AS finished FROM `" +
		l.historyTable + "` WHERE topic = ? AND finished_at > " + l.dialect.now + " - " + w + " AND job_id IN (")
	vars = append(vars, topic)
	writeIn(b, &vars, ids)
	return vars
}

// writeIn writes the placeholders of ids and a closing parenthesis to b,
// and adds the ids to vars.
func writeIn(b *strings.Builder, vars *[]any, ids []string) {
	for i, id := range ids {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('?')
		*vars = append(*vars, id)
	}
	b.WriteByte(')')
}

// scanIDs reads the rows of readIDs' statement q into existing (a ledger
// row wins over a history row; of several history rows, the latest
// finish), and the clock's row into now. It says whether the clock's row
// was there.
func scanIDs(q *gorm.DB, now *int64, existing map[string]existingRow) (bool, error) {
	rows, err := q.Rows()
	if err != nil {
		return false, fmt.Errorf("read ids: %w", err)
	}
	defer func() { _ = rows.Close() }()
	sawNow := false
	for rows.Next() {
		var runAt, finished int64
		var id, state sql.NullString
		if err := rows.Scan(&runAt, &id, &state, &finished); err != nil {
			return false, fmt.Errorf("read ids: %w", err)
		}
		if !id.Valid {
			*now, sawNow = runAt, true
			continue
		}
		e, had := existing[id.String]
		switch {
		case finished == 0:
			existing[id.String] = existingRow{state: state.String, runAt: runAt}
		case !had || (e.finished && runAt > e.runAt):
			existing[id.String] = existingRow{state: state.String, runAt: runAt, finished: true}
		}
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read ids: %w", err)
	}
	return sawNow, nil
}

// planSchedule decides each job's result from the rows that exist and the
// ids this call inserted already (mine), and returns the indexes in jobs of
// the jobs to insert, sorted by id (the unique key's order, so concurrent
// INSERTs take their locks in the same order).
func planSchedule(jobs []queue.NewJob, existing map[string]existingRow, mine map[string]int64, now int64) ([]queue.EnqueueResult, []int) {
	out := make([]queue.EnqueueResult, len(jobs))
	first := make(map[string]int, len(jobs))
	fresh := make([]int, 0, len(jobs))
	for i := range jobs {
		j := &jobs[i]
		out[i].ID = j.ID
		if k, dup := first[j.ID]; dup {
			out[i].Duplicate, out[i].RunAt, out[i].Finished = true, out[k].RunAt, out[k].Finished
			continue
		}
		first[j.ID] = i
		if at, ok := mine[j.ID]; ok {
			out[i].RunAt = at
			continue
		}
		if e, ok := existing[j.ID]; ok {
			out[i].Duplicate = true
			switch {
			case e.finished:
				out[i].Finished = &queue.Finished{Outcome: e.state, TakenUntil: e.runAt}
			case e.state == queue.StateWaiting.Column() || e.state == queue.StateRetrying.Column():
				out[i].RunAt = e.runAt
			}
			continue
		}
		out[i].RunAt = dueAt(j, now)
		fresh = append(fresh, i)
	}
	slices.SortFunc(fresh, func(a, b int) int { return strings.Compare(jobs[a].ID, jobs[b].ID) })
	return out, fresh
}

// dueAt is a new job's run_at on the SQL server's clock now: now + Delay,
// or RunAt when that is later (a time in the past means now).
func dueAt(j *queue.NewJob, now int64) int64 {
	if j.RunAt != 0 {
		return max(j.RunAt, now)
	}
	return now + j.Delay.Milliseconds()
}

// insertScheduled inserts the rows of jobs[fresh], whose run_at are in out,
// in as few multi-row INSERTs as insertRows makes, and adds each
// statement's ids to mine once it succeeded.
func (l *Ledger) insertScheduled(db *gorm.DB, topic string, jobs []queue.NewJob, fresh []int, out []queue.EnqueueResult, now int64, mine map[string]int64) error {
	rows := make([]newRow, len(fresh))
	for k, i := range fresh {
		rows[k] = newRow{topic: topic, job: &jobs[i], runAt: out[i].RunAt}
	}
	return l.insertRows(db, rows, now, func(done []newRow) {
		for _, r := range done {
			mine[r.job.ID] = r.runAt
		}
	})
}

// traceParentRE is a W3C traceparent as a row keeps it (version 00, or a
// later one of the same form): nothing else is written to the column.
var traceParentRE = regexp.MustCompile(`^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$`)

// newRow is a waiting row to insert: its topic (a partition's name for a
// partitioned topic), its job and its run_at.
type newRow struct {
	topic string
	job   *queue.NewJob
	runAt int64
}

// insertRows inserts rows in as few multi-row INSERTs as the placeholder
// limit and scheduleStmtBytes allow, calling done with each statement's
// rows once it succeeded. Only the strings are bound: the numbers are
// integers this process computed, written into the statement, which keeps
// a row at three placeholders and the statement cheap to build.
func (l *Ledger) insertRows(db *gorm.DB, rows []newRow, now int64, done func([]newRow)) error {
	perStmt := l.batchSize(3, 0)
	nowText := strconv.FormatInt(now, 10)
	head := "INSERT INTO `" + l.ledgerTable + "` " + scheduleColumns + " VALUES "
	for lo := 0; lo < len(rows); {
		hi, size := lo, 0
		for hi < len(rows) && hi-lo < perStmt {
			n := scheduleRowBytes(rows[hi].job)
			if hi > lo && size+n > scheduleStmtBytes {
				break
			}
			size += n
			hi++
		}
		part := rows[lo:hi]
		b := make([]byte, 0, len(head)+len(part)*scheduleRowOverhead)
		b = append(b, head...)
		vars := make([]any, 0, 3*len(part))
		for k, r := range part {
			j := r.job
			if k > 0 {
				b = append(b, ',')
			}
			// topic, job_id, payload, attempt, max_attempts, run_at,
			// claimed_at, lease_until (NeverStale: a waiting job is the
			// relay's, not the recoverer's), worker, state, last_error,
			// updated_at, enqueued_at, trace (a traceparent is hex and
			// dashes, checked: inlined, as the numbers are), priority
			b = append(b, "(?,?,?,0,"...)
			b = strconv.AppendInt(b, int64(j.MaxAttempts), 10)
			b = append(b, ',')
			b = strconv.AppendInt(b, r.runAt, 10)
			b = append(b, ",0,"...)
			b = strconv.AppendInt(b, NeverStale, 10)
			b = append(b, ",'"+waitingWorker+"','"+queue.StateWaiting.Column()+"','',"...)
			b = append(b, nowText...)
			b = append(b, ',')
			b = append(b, nowText...)
			if traceParentRE.MatchString(j.TraceParent) {
				b = append(b, ",'"...)
				b = append(b, j.TraceParent...)
				b = append(b, "',"...)
			} else {
				b = append(b, ",NULL,"...)
			}
			// priority: validated, 0 to queue.MaxPriority, inlined too
			b = strconv.AppendInt(b, int64(min(max(j.Priority, 0), queue.MaxPriority)), 10)
			// ordering key: an id's characters (validated before any
			// Schedule, checked again): inlined too
			if j.OrderingKey != "" && dataplane.ValidateID(j.OrderingKey) == nil {
				b = append(b, ",'"...)
				b = append(b, j.OrderingKey...)
				b = append(b, "')"...)
			} else {
				b = append(b, ",NULL)"...)
			}
			// The payload's placeholder must not follow a "(": gorm
			// expands a slice bound there into a list.
			vars = append(vars, r.topic, j.ID, nonNil(j.Payload))
		}
		if err := db.Exec(string(b), vars...).Error; err != nil {
			return err
		}
		done(part)
		lo = hi
	}
	return nil
}

// sqlNow reads the SQL server's clock on db.
func (l *Ledger) sqlNow(db *gorm.DB) (int64, error) {
	var now int64
	if err := db.Raw("SELECT " + l.dialect.now).Row().Scan(&now); err != nil {
		return 0, fmt.Errorf("read the SQL clock: %w", err)
	}
	return now, nil
}

// SQLNow returns the SQL server's clock, Unix ms: the clock of every due
// time Schedule computes, and so the one the relay compares them with.
func (l *Ledger) SQLNow(ctx context.Context) (int64, error) {
	now, err := l.sqlNow(l.conn(ctx))
	if err != nil {
		return 0, fmt.Errorf("ledger: %w", err)
	}
	return now, nil
}
