package recovery

// Counters are the recoverer's running totals since it was created, for
// metrics.
type Counters struct {
	Runs       int64 // runs that held the lock
	Skipped    int64 // runs skipped: another recoverer held the lock
	Failed     int64 // runs with at least one error
	Scanned    int64 // ledger rows looked at
	Reenqueued int64 // jobs put back (in dry-run mode: that would have been)
	DataLoss   int64 // topics found to have lost data, once per detection
}
