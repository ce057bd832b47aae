package metrics

import (
	"time"

	"github.com/delayq/delayq/queue"
)

// Metrics is the worker's queue.Observer and queue.UnsettledObserver, and
// the queue client's queue.EnqueueObserver and queue.PushObserver.
var (
	_ queue.Observer          = (*Metrics)(nil)
	_ queue.UnsettledObserver = (*Metrics)(nil)
	_ queue.EnqueueObserver   = (*Metrics)(nil)
	_ queue.PushObserver      = (*Metrics)(nil)
	_ queue.CancelObserver    = (*Metrics)(nil)
	_ queue.PoolObserver      = (*Metrics)(nil)
)

// PoolUse sets a shared pool's gauges (queue.PoolObserver).
func (m *Metrics) PoolUse(pool string, inFlight int64, concurrency int) {
	m.poolInFlight.WithLabelValues(pool).Set(float64(inFlight))
	m.poolSize.WithLabelValues(pool).Set(float64(concurrency))
}

// InitTopic creates a topic's counter and histogram series at zero, so
// that rate() and increase() see the first event of a topic this process
// handles (a series born at 1 would hide it).
func (m *Metrics) InitTopic(topic string) {
	m.enqueued.WithLabelValues(topic)
	m.claimed.WithLabelValues(topic)
	m.completed.WithLabelValues(topic)
	m.retried.WithLabelValues(topic)
	m.dead.WithLabelValues(topic)
	m.released.WithLabelValues(topic)
	m.cancelledRunning.WithLabelValues(topic)
	m.taken.WithLabelValues(topic)
	m.recovered.WithLabelValues(topic)
	m.handlerDuration.WithLabelValues(topic)
	m.lateness.WithLabelValues(topic)
	m.live.topic(topic)
}

// Enqueued counts new jobs (queue.EnqueueObserver).
func (m *Metrics) Enqueued(topic string, n int) {
	m.enqueued.WithLabelValues(topic).Add(float64(n))
	m.live.topic(topic).enqueued.Add(int64(n))
}

// Taken counts enqueues refused by the topic's uniqueness window
// (queue.TakenObserver).
func (m *Metrics) Taken(topic string, n int) {
	m.taken.WithLabelValues(topic).Add(float64(n))
}

// EnqueueCall observes the jobs of one enqueue script call
// (queue.EnqueueCallObserver).
func (m *Metrics) EnqueueCall(topic string, jobs int) {
	m.enqueueCallJobs.WithLabelValues(topic).Observe(float64(jobs))
}

// Claimed counts claimed jobs (queue.Observer).
func (m *Metrics) Claimed(topic string, n int) {
	m.claimed.WithLabelValues(topic).Add(float64(n))
}

// Started observes a handler's lateness (queue.Observer).
func (m *Metrics) Started(topic string, lateness time.Duration) {
	m.lateness.WithLabelValues(topic).Observe(lateness.Seconds())
	m.live.topic(topic).started(lateness)
}

// Handled observes a handler's duration (queue.Observer).
func (m *Metrics) Handled(topic string, took time.Duration, _ error) {
	m.handlerDuration.WithLabelValues(topic).Observe(took.Seconds())
}

// Completed counts settled successes (queue.Observer).
func (m *Metrics) Completed(topic string, n int) {
	m.completed.WithLabelValues(topic).Add(float64(n))
	m.live.topic(topic).completed.Add(int64(n))
}

// Retried counts retries (queue.Observer).
func (m *Metrics) Retried(topic string, n int) {
	m.retried.WithLabelValues(topic).Add(float64(n))
	m.live.topic(topic).retried.Add(int64(n))
}

// Dead counts deaths (queue.Observer).
func (m *Metrics) Dead(topic string, n int) {
	m.dead.WithLabelValues(topic).Add(float64(n))
	m.live.topic(topic).dead.Add(int64(n))
}

// Released counts jobs handed back unstarted (queue.Observer).
func (m *Metrics) Released(topic string, n int) {
	m.released.WithLabelValues(topic).Add(float64(n))
}

// CancelledRunning counts held jobs that ended cancelled
// (queue.CancelObserver).
func (m *Metrics) CancelledRunning(topic string, n int) {
	m.cancelledRunning.WithLabelValues(topic).Add(float64(n))
}

// Unsettled records how many finished jobs wait for their settlement
// (queue.UnsettledObserver), at every heartbeat.
func (m *Metrics) Unsettled(worker string, n int) {
	m.unsettled.WithLabelValues(worker).Set(float64(n))
}

// Gone counts claimed jobs found finished already (queue.LedgerObserver).
func (m *Metrics) Gone(topic string, n int) { m.gone.WithLabelValues(topic).Add(float64(n)) }

// LetGo counts jobs let go after the ledger hold (queue.LedgerObserver).
func (m *Metrics) LetGo(topic string, n int) { m.letGo.WithLabelValues(topic).Add(float64(n)) }

// Heartbeat records a worker's heartbeat (queue.Observer).
func (m *Metrics) Heartbeat(worker string, at time.Time) {
	m.heartbeatAt.WithLabelValues(worker).Set(float64(at.UnixNano()) / 1e9)
	m.heartbeats.WithLabelValues(worker).Inc()
}
