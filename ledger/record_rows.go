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
//     known rows when the UPDATE matched fewer than all of them (a row
//     deleted meanwhile, a topic made durable after its jobs were enqueued,
//     a row at another attempt), are written by one multi-row upsert on
//     (topic, job_id), which inserts the missing rows and rewrites the
//     others whole, as Record always did.
//
// The two statements are not one transaction unless db is: a failure
// between them leaves the UPDATE's rows as this claim's, which is what an
// ambiguous failure of a single statement can leave too, and what the
// worker's release and the recoverer handle (fenced by attempt).
func (l *Ledger) recordOn(db *gorm.DB, rows []claimRow) error {
	var known, fresh []Entry
	for i := range rows {
		// The UPDATE binds one lease for all: a claimed batch has one (the
		// claim's deadline); a row with another goes by the upsert.
		if rows[i].known && rows[i].Attempt > 0 && (len(known) == 0 || rows[i].LeaseUntil == known[0].LeaseUntil) {
			known = append(known, rows[i].Entry)
		} else {
			fresh = append(fresh, rows[i].Entry)
		}
	}
	if len(known) > 0 {
		n, err := l.updateClaims(db, known)
		if err != nil {
			return err
		}
		if n < int64(len(known)) {
			// Which rows were missing is unknown: the upsert writes them
			// all (the updated ones again, to the same claim).
			fresh = append(fresh, known...)
			sortEntries(fresh)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	return l.upsertOn(db, fresh)
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
			r.LeaseUntil, r.Worker, r.State, r.LastError, r.UpdatedAt, r.EnqueuedAt, r.ClaimedAt)
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
		"lease_until", "worker", "state", "last_error", "updated_at", "enqueued_at", "first_claimed_at"}
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
