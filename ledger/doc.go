// Package ledger is delayq's SQL ledger: the durable record of every job a
// worker has claimed and not yet finished for good, plus the dead-letter
// archive of jobs that died.
//
// The worker in package queue writes a job's row before its handler runs and
// deletes it only after the handler succeeded, so whatever a worker crash or a
// Redis data loss drops, the recoverer can find here and put back. Because it
// sits on the hot path of every job, each write method is one SQL statement per
// call (one transaction for Bury), however many jobs it carries: the ledger's
// cost grows with the number of batches, not with the number of jobs.
//
// Every statement against the ledger's two tables is a method here: the
// worker's writes (queue.Ledger), the row lookup and fenced delete that
// queue.Client.Cancel makes, the recoverer's reads (recovery.Store: Stale,
// TopicCounts, Claims), the audit queries, Migrate and Drop. Other packages
// get none of the tables' SQL; DB is the handle for a caller's own tables in
// the same database (Transactional).
//
// The package runs on MySQL/MariaDB (production) and SQLite (tests, local
// development) through gorm; the few places where the two dialects differ are
// kept in dialect.go.
package ledger
