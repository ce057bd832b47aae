package queue

import (
	"time"
)

// Observer is told what a worker does, for metrics: the program's
// Prometheus collectors implement it (queue itself knows nothing of
// Prometheus). A worker calls it from many goroutines at once, so an
// Observer must be safe for concurrent use, quick, and must never block;
// the counting methods are called once per topic per batch.
//
// An outcome is reported once it is settled in both the ledger and Redis,
// so the counts match what an operator then sees in the API.
type Observer interface {
	// Claimed: this worker leased n jobs of topic.
	Claimed(topic string, n int)
	// Started: a handler of topic starts, lateness after the job's due time
	// (Redis's clock; never negative).
	Started(topic string, lateness time.Duration)
	// Handled: a handler of topic returned err (nil: success) after took.
	Handled(topic string, took time.Duration, err error)
	// Completed: n jobs of topic succeeded; their ledger rows and Redis
	// entries are gone.
	Completed(topic string, n int)
	// Retried: n failed jobs of topic went back to due for another attempt.
	Retried(topic string, n int)
	// Dead: n jobs of topic died (out of attempts or failed permanently) and
	// were archived.
	Dead(topic string, n int)
	// Released: n jobs of topic were handed back to due unstarted, their
	// attempt unspent (the ledger could not record them, or shutdown).
	Released(topic string, n int)
	// Heartbeat: the worker named worker is alive at at: called when Run
	// starts and after every heartbeat (every TopicConfig.Heartbeat, the
	// shortest of the topics'), whether or not a job was running.
	Heartbeat(worker string, at time.Time)
}

// PoolObserver is told how full a worker's shared pools of handlers are
// (WorkerConfig.Pools), for metrics: when Run starts and at every
// registry write (WorkerConfig.RegistryEvery). An Observer
// (WorkerConfig.Observer) may implement it. It must be quick.
type PoolObserver interface {
	// PoolUse: pool holds inFlight jobs of its topics (claimed, waiting
	// for a handler or running), of concurrency at most.
	PoolUse(pool string, inFlight int64, concurrency int)
}

// CancelObserver is told about jobs that ended cancelled while a worker
// held them (a cancel asked during their run), for metrics. An Observer
// (WorkerConfig.Observer) may implement it. It must be safe for
// concurrent use and quick.
type CancelObserver interface {
	// CancelledRunning: n jobs of topic a worker held ended cancelled;
	// their ledger rows and Redis entries are gone.
	CancelledRunning(topic string, n int)
}

// EnqueueObserver is told about enqueues, for metrics (Config.Observer).
// It must be safe for concurrent use and quick.
type EnqueueObserver interface {
	// Enqueued: n new jobs were written to topic (duplicates not counted).
	Enqueued(topic string, n int)
}

// TakenObserver, when Config.Observer implements it too, is told of the
// enqueues answered as duplicates because their id's job finished within
// the topic's uniqueness window (Config.TopicUniqueFor): producers
// retrying what already ran. It must be safe for concurrent use and quick.
type TakenObserver interface {
	Taken(topic string, n int)
}

// EnqueueCallObserver, when Config.Observer implements it too, is told of
// every enqueue script call and how many jobs it carried: with coalescing,
// the calls of many callers. Jobs per call is how much coalescing saves.
type EnqueueCallObserver interface {
	EnqueueCall(topic string, jobs int)
}

// RateLimitObserver, when WorkerConfig.Observer implements it too, is told
// of every claim that the topic's rate limit held back (due jobs left
// waiting for lack of tokens). It must be safe for concurrent use and quick.
type RateLimitObserver interface {
	RateLimited(topic string)
}

// UnsettledObserver, when WorkerConfig.Observer implements it too, is told
// at every heartbeat how many finished jobs of the worker wait for their
// settlement: outcomes the completer holds because a store is down (their
// leases renewed meanwhile), or a flush under way. It must be safe for
// concurrent use and quick.
type UnsettledObserver interface {
	Unsettled(worker string, n int)
}

// LedgerObserver, when WorkerConfig.Observer implements it too, is told of
// jobs a claim found finished already (queue.GoneError: their ledger rows
// gone, their history finished; acked unrun) and of the jobs the worker let
// go after WorkerConfig.LedgerHold. It must be safe for concurrent use and
// quick.
type LedgerObserver interface {
	Gone(topic string, n int)
	LetGo(topic string, n int)
}

// NopObserver ignores every event. Embed it in an Observer that cares
// about some events only.
type NopObserver struct{}

// Claimed does nothing.
func (NopObserver) Claimed(string, int) {}

// Started does nothing.
func (NopObserver) Started(string, time.Duration) {}

// Handled does nothing.
func (NopObserver) Handled(string, time.Duration, error) {}

// Completed does nothing.
func (NopObserver) Completed(string, int) {}

// Retried does nothing.
func (NopObserver) Retried(string, int) {}

// Dead does nothing.
func (NopObserver) Dead(string, int) {}

// Released does nothing.
func (NopObserver) Released(string, int) {}

// Heartbeat does nothing.
func (NopObserver) Heartbeat(string, time.Time) {}

// Enqueued does nothing.
func (NopObserver) Enqueued(string, int) {}

var (
	_ Observer        = NopObserver{}
	_ EnqueueObserver = NopObserver{}
)
