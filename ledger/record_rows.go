package ledger

import (
	"strings"

	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// claimRow is one claim Record writes: the row as it must be after the
// claim, and whether the row is expected to exist already (a durable
// topic's job has had one since its enqueue).
type claimRow struct {
	Entry
	known bool
}

// claimUpdatePerRow is how many variables recordOn's UPDATE binds per row
// (topic, job_id, attempt), claimUpdateFixed the others (lease_until,
// worker, claimed_at, updated_at, and claimed_at again for a first claim). Both are under entryColumns per row, so
// a span that fits the upsert fits the UPDATE.
const (
	claimUpdatePerRow = 3
	claimUpdateFixed  = 5
)

// recordOn writes the claims of rows (sorted by key, distinct) on db, a
// connection or a transaction, in one statement, two at most:
//
//   - the rows expected to exist (known: a durable topic's, whose waiting
//     or retrying row has waited since its enqueue) are moved by a plain
//     UPDATE matched on (topic, job_id, attempt - 1): state in flight,
//     attempt one more, the claim's lease_until, worker, claimed_at and
//     updated_at. The row keeps the rest (payload, max_attempts, run_at,
//     last_error, enqueued_at), which is what the claimed job carries
//     anyway: the envelope in Redis was written from the same enqueue or
//     retry. Over an existing row this costs InnoDB less than the upsert
//     below, which first inserts into the clustered index, meets the
//     unique key, undoes the insert, then updates, rewriting every column;
//   - the others (a redis topic's, recorded when first claimed), and the
//     known rows when the UPDATE matched fewer than all of them (a topic
//     made durable after its jobs were enqueued, a row at another
//     attempt), are written by one multi-row upsert on (topic, job_id),
//     which inserts the missing rows and rewrites the others whole, as
//     Record always did;
//   - except a known row that is missing (any attempt) of a job whose
//     history says it succeeded or died since its enqueue: Redis still
//     held it (a worker committed its transactional completion, then lost
//     the ledger or died before telling Redis), or gave it back as never
//     claimed (a failover lost its claim and its ack; a redis topic's
//     first claim has no row to miss, so only its later claims are asked). Writing it again would run a finished job twice; it
//     is returned in gone instead, for the worker to forget
//     (queue.GoneError). Telling costs two SELECTs (splitGone), only when
//     the UPDATE matched fewer rows than it was given.
//
// The two statements are not one transaction unless db is: a failure
// between them leaves the UPDATE's rows as this claim's, which is what an
// ambiguous failure of a single statement can leave too, and what the
// worker's release and the recoverer handle (fenced by attempt).
func (l *Ledger) recordOn(db *gorm.DB, rows []claimRow) (gone, dead, held []queue.Ref, by []string, err error) {
	if rows, held, by, err = l.heldOn(db, rows); err != nil || len(rows) == 0 {
		return nil, nil, held, by, err
	}
	// ask: claims whose rows may be missing. A claim after the first that
	// the UPDATE does not take (a redis topic's, or a durable one's with a
	// lease of its own) is asked at once: a lost ack after a committed
	// transactional completion leaves its job in Redis with its row gone
	// (a retry's row exists). The UPDATE's claims are asked when it
	// missed some (those that exist are written again, to the same claim).
	var known, ask, fresh []Entry
	for i := range rows {
		e := rows[i].Entry
		switch {
		// The UPDATE binds one lease for all: a claimed batch has one (the
		// claim's deadline); a row with another goes by the upsert.
		case rows[i].known && e.Attempt > 0 && (len(known) == 0 || e.LeaseUntil == known[0].LeaseUntil):
			known = append(known, e)
		case e.Attempt > 1 && l.keepsHistory(e.Topic):
			ask = append(ask, e)
		default:
			fresh = append(fresh, e)
		}
	}
	if len(known) > 0 {
		n, err := l.updateClaims(db, known)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		if n < int64(len(known)) {
			ask = append(ask, known...)
		}
	}
	if len(ask) > 0 {
		// One SELECT for them all, a second when a row is missing.
		var written []Entry
		if written, gone, dead, err = l.splitGone(db, ask); err != nil {
			return nil, nil, nil, nil, err
		}
		fresh = append(fresh, written...)
		sortEntries(fresh)
	}
	if len(fresh) == 0 {
		return gone, dead, held, by, nil
	}
	return gone, dead, held, by, l.upsertOn(db, fresh)
}

// heldOn takes out of rows the claims whose ordering key another job of
// the key holds in the ledger, in flight or retrying (docs/design.md
// §4.24): Redis lost the key's state, so it handed out a job of a busy
// key; the ledger, which keeps every claimed job, says no. A second claim
// of one key in the batch is held too. It returns the rows to write and
// the held claims; rows without a key cost nothing.
func (l *Ledger) heldOn(db *gorm.DB, rows []claimRow) ([]claimRow, []queue.Ref, []string, error) {
	keysOf := make(map[string][]string) // topic -> its claims' keys
	for i := range rows {
		if k := rows[i].OrderingKey; k != "" {
			keysOf[rows[i].Topic] = append(keysOf[rows[i].Topic], k)
		}
	}
	if len(keysOf) == 0 {
		return rows, nil, nil, nil
	}
	type topicKey struct{ topic, key string }
	holder := make(map[topicKey]string)
	q := "SELECT ordering_key, job_id FROM `" + l.ledgerTable + "` WHERE topic = ? AND ordering_key IN ? AND state IN (?, ?)"
	for topic, keys := range keysOf {
		found, err := db.Raw(q, topic, keys, queue.StateInFlight.Column(), queue.StateRetrying.Column()).Rows()
		if err != nil {
			return nil, nil, nil, err
		}
		for found.Next() {
			var k, id string
			if err := found.Scan(&k, &id); err != nil {
				_ = found.Close()
				return nil, nil, nil, err
			}
			holder[topicKey{topic, k}] = id
		}
		if err := found.Close(); err != nil {
			return nil, nil, nil, err
		}
	}
	keep := rows[:0:0]
	var held []queue.Ref
	var by []string
	for _, r := range rows {
		tk := topicKey{r.Topic, r.OrderingKey}
		if r.OrderingKey != "" {
			if h, ok := holder[tk]; ok && h != r.JobID {
				held = append(held, queue.Ref{Topic: r.Topic, ID: r.JobID, Attempt: r.Attempt})
				by = append(by, h)
				continue
			}
			holder[tk] = r.JobID
		}
		keep = append(keep, r)
	}
	return keep, held, by, nil
}

// splitGone sorts claims whose rows may be missing (a durable topic's that
// its UPDATE did not find, whatever its attempt: a failover of Redis can
// lose a finished job's ack and its claim, and give it back as never
// claimed; a redis topic's after the first): a claim whose row is gone and
// whose job's history says it succeeded or died since this claim's enqueue
// (finished_at at or after its EnqueuedAt) is gone; every other one goes
// to the upsert (rest). The history is what tells a finished job from one
// whose row was deleted for another reason: a redis topic's job released
// at a shutdown (its row deleted, its attempt not given back), one claimed
// and never recorded before its topic became durable, or one whose cancel
// lost the race against this claim (its history says cancelled: the
// cancel answered that it was in flight, so it runs). A topic without
// history (Options.NoHistory) cannot tell: its rows are written back, as
// before. One statement, two when a row is missing.
func (l *Ledger) splitGone(db *gorm.DB, known []Entry) (rest []Entry, gone, dead []queue.Ref, err error) {
	vars := make([]any, 0, 2*len(known))
	for i := range known {
		vars = append(vars, known[i].Topic, known[i].JobID)
	}
	exists := make(map[refKey]bool, len(known))
	err = l.scanKeys(db, "SELECT topic, job_id, 0 FROM `"+l.ledgerTable+"` WHERE "+
		l.dialect.tupleIn(len(known), "topic", "job_id"), vars, func(k refKey, _ int64) { exists[k] = true })
	if err != nil {
		return nil, nil, nil, err
	}
	var missing []Entry
	for _, e := range known {
		if !exists[refKey{e.Topic, e.JobID}] && l.keepsHistory(e.Topic) {
			missing = append(missing, e)
		}
	}
	finished := map[refKey]int64{}
	if len(missing) > 0 {
		vars = vars[:0]
		for i := range missing {
			vars = append(vars, missing[i].Topic, missing[i].JobID)
		}
		// The latest finish and whether it was a death, in one number:
		// finished_at × 2, plus 1 for a death (a tie goes to the death).
		vars = append([]any{OutcomeDead}, vars...)
		// A dead job purged since (its history row says purged, not dead)
		// finished too: forgotten, not buried again.
		vars = append(vars, OutcomeSucceeded, OutcomeDead, OutcomePurged)
		err = l.scanKeys(db, "SELECT topic, job_id, MAX(finished_at * 2 + CASE WHEN outcome = ? THEN 1 ELSE 0 END) FROM `"+
			l.historyTable+"` WHERE "+l.dialect.tupleIn(len(missing), "topic", "job_id")+" AND outcome IN (?, ?, ?) GROUP BY topic, job_id",
			vars, func(k refKey, v int64) { finished[k] = v })
		if err != nil {
			return nil, nil, nil, err
		}
	}
	for _, e := range known {
		if v, ok := finished[refKey{e.Topic, e.JobID}]; ok && v/2 >= e.EnqueuedAt {
			r := queue.Ref{Topic: e.Topic, ID: e.JobID, Attempt: e.Attempt}
			gone = append(gone, r)
			if v%2 == 1 {
				dead = append(dead, r)
			}
			continue
		}
		rest = append(rest, e)
	}
	return rest, gone, dead, nil
}

// scanKeys runs q, whose rows are (topic, job_id, a number), and calls f
// on each.
func (l *Ledger) scanKeys(db *gorm.DB, q string, vars []any, f func(refKey, int64)) error {
	rows, err := db.Raw(q, vars...).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var k refKey
		var n int64
		if err := rows.Scan(&k.topic, &k.id, &n); err != nil {
			return err
		}
		f(k, n)
	}
	return rows.Err()
}

// updateClaims runs recordOn's UPDATE over rows, which share their lease,
// worker and clock, and returns how many rows it changed (every row it
// matches changes: its attempt grows).
func (l *Ledger) updateClaims(db *gorm.DB, rows []Entry) (int64, error) {
	first := rows[0]
	q := "UPDATE `" + l.ledgerTable + "` SET state = '" + queue.StateInFlight.Column() + "', attempt = attempt + 1," +
		" lease_until = ?, worker = ?, claimed_at = ?, updated_at = ?," +
		" first_claimed_at = CASE WHEN first_claimed_at = 0 THEN ? ELSE first_claimed_at END WHERE " +
		l.dialect.tupleIn(len(rows), "topic", "job_id", "attempt")
	vars := make([]any, 0, claimUpdateFixed+claimUpdatePerRow*len(rows))
	vars = append(vars, first.LeaseUntil, first.Worker, first.ClaimedAt, first.UpdatedAt, first.ClaimedAt)
	for i := range rows {
		vars = append(vars, rows[i].Topic, rows[i].JobID, rows[i].Attempt-1)
	}
	res := db.Exec(q, vars...)
	return res.RowsAffected, res.Error
}

// upsertOn writes rows with Record's upsert: one multi-row INSERT whose
// conflict clause (on recordUpdates) rewrites a row the job has already. The
// statement is built here, not by gorm's Create: on the claim path, for
// every job a worker runs, gorm's reflection over each row cost about a
// third of the record's CPU in the process.
func (l *Ledger) upsertOn(db *gorm.DB, rows []Entry) error {
	var b strings.Builder
	b.Grow(len(l.upsertHead) + len(rows)*(2*entryColumns+3) + len(l.upsertTail))
	b.WriteString(l.upsertHead)
	vars := make([]any, 0, entryColumns*len(rows))
	for i := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(entryPlaceholders)
		r := &rows[i]
		vars = append(vars, r.Topic, r.JobID, r.Payload, r.Attempt, r.MaxAttempts, r.RunAt, r.ClaimedAt,
			r.LeaseUntil, r.Worker, r.State, r.LastError, r.UpdatedAt, r.EnqueuedAt, r.ClaimedAt, r.Priority, nullText(r.OrderingKey))
	}
	b.WriteString(l.upsertTail)
	return db.Exec(b.String(), vars...).Error
}

// entryPlaceholders are one row's values in upsertOn's INSERT.
var entryPlaceholders = "(" + strings.TrimSuffix(strings.Repeat("?,", entryColumns), ",") + ")"

// upsertSQL returns the parts of upsertOn's statement around its rows on
// table: the INSERT with its columns (every Entry column but id, in the
// order upsertOn binds them), and the conflict clause over recordUpdates,
// guarded by attempt, in the dialect's words.
func upsertSQL(d dialect, table string) (head, tail string) {
	cols := []string{"topic", "job_id", "payload", "attempt", "max_attempts", "run_at", "claimed_at",
		"lease_until", "worker", "state", "last_error", "updated_at", "enqueued_at", "first_claimed_at", "priority", "ordering_key"}
	head = "INSERT INTO `" + table + "` (`" + strings.Join(cols, "`,`") + "`) VALUES "
	// A row the job had keeps its first claim's time; one that had none
	// (a durable job's waiting row) takes this claim's. It reads only its
	// own column and the new values, so MySQL's left-to-right order does not
	// matter, nor does the attempt guard.
	first := "`first_claimed_at`=IF(`first_claimed_at`=0,VALUES(`claimed_at`),`first_claimed_at`)"
	if d.name != "mysql" {
		first = "`first_claimed_at`=CASE WHEN `first_claimed_at`=0 THEN excluded.`claimed_at` ELSE `first_claimed_at` END"
	}
	sets := make([]string, len(recordUpdates), len(recordUpdates)+1)
	for i, c := range recordUpdates {
		if d.name == "mysql" {
			sets[i] = "`" + c + "`=IF(VALUES(`attempt`)>=`attempt`,VALUES(`" + c + "`),`" + c + "`)"
		} else {
			sets[i] = "`" + c + "`=excluded.`" + c + "`"
		}
	}
	sets = append([]string{first}, sets...)
	if d.name == "mysql" {
		return head, " ON DUPLICATE KEY UPDATE " + strings.Join(sets, ",")
	}
	return head, " ON CONFLICT (`topic`,`job_id`) DO UPDATE SET " + strings.Join(sets, ",") +
		" WHERE excluded.`attempt`>=`" + table + "`.`attempt`"
}
