package dataplane

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/otel/trace"

	"github.com/delayq/delayq/queue"
)

// topicRunner is one topic's part of a worker: a fetcher per partition
// that claims and records jobs, and one pool of handler goroutines fed
// through work, which the partitions share (the topic's concurrency).
type topicRunner struct {
	w     *Worker
	topic string
	h     Handler
	cfg   TopicConfig
	log   logrus.FieldLogger

	work chan *Job    // claimed, recorded and due, not started; cap = concurrency + prefetch
	busy atomic.Int64 // jobs claimed (or being claimed), held, in work or running: never above cap(work)
	// claimMu makes a fetcher's count of what it may claim and its taking
	// of those slots one step, so that the fetchers of several partitions
	// never claim more between them than the topic has room for.
	claimMu sync.Mutex
	// parts are the partitions' fetch states, one per partition of every
	// layout the topic has (layout.go); the worker adds to them when an
	// operator raises the partition count.
	parts atomic.Pointer[[]*part]

	// pool and member: the shared pool of handlers the topic is in
	// (queue.Pool), nil for a topic with its own Concurrency.
	pool   *pool
	member *poolMember

	stopping  <-chan struct{} // closed when the worker stops claiming (Run's ctx)
	tokens    chan struct{}   // one per batch being claimed or recorded
	holds     sync.WaitGroup  // recorded batches waiting for their jobs' due times
	recordErr chan error      // the last ledger failure, for the fetchers' backoff

	// runNanos is a moving average of the handlers' run times (ns; 0
	// before the first): prefetch only while they are quick.
	runNanos atomic.Int64

	// mu guards active, queued and the LeaseUntil of queued jobs: the
	// heartbeat renews the leases of both.
	mu     sync.Mutex
	active map[Ref]*activeJob // running handlers
	queued map[Ref]*Job       // recorded, waiting in work for a handler
	// asked are queued jobs whose cancel was asked before their handler
	// started: run settles them cancelled without starting them.
	asked map[Ref]bool
}

// part is one partition's fetcher state: its name (the topic's own for a
// topic of one partition), its wake channel and what its last claim found.
type part struct {
	name  string
	tr    *topicRunner // the topic's runner, for a cancel asked on the wake channel
	log   logrus.FieldLogger
	freed chan struct{} // a handler slot came free (cap 1, never blocks)
	wake  chan struct{} // a job became due earlier (cap 1, never blocks)
	// clock is Redis's clock as this partition's claims tell it: each
	// partition may live on another Cluster master, with its own clock.
	clock redisClock

	// paused: the last claim found the topic paused (the fetcher's own,
	// read and written by it alone).
	paused bool
	// backlog: the last claim left due jobs behind, so the fetcher may
	// claim up to the prefetch beyond its free slots (the fetcher's own).
	backlog bool
	// wants, in a pool: the partition has due work the pool's room held
	// back (set by the pool's reserve, and after each claim to its
	// backlog); read by the other members' reserves (pool.go).
	wants atomic.Bool
}

// activeJob is a running handler: its lease timer ends its context when the
// lease runs out, and the heartbeat moves it on.
type activeJob struct {
	// cancel ends the handler's context with a cause: the lease ran out,
	// or a cancel was asked (cancelAsked).
	cancel   context.CancelCauseFunc
	timer    *time.Timer
	deadline int64     // the lease's deadline, Redis ms
	began    time.Time // for prefetching: is a handler running long?
}

func newTopicRunner(w *Worker, topic string, h Handler, cfg TopicConfig) *topicRunner {
	return &topicRunner{
		w: w, topic: topic, h: h, cfg: cfg,
		log:       w.log.WithField("topic", topic),
		work:      make(chan *Job, cfg.Concurrency+prefetchOf(cfg)),
		tokens:    make(chan struct{}, RecordPipeline),
		recordErr: make(chan error, 1),
		active:    make(map[Ref]*activeJob),
		queued:    make(map[Ref]*Job),
	}
}

// addPart adds partition name's fetcher state, and returns it; nil if the
// topic has it already. Only the worker's start and its layout watch call
// it, one at a time.
func (tr *topicRunner) addPart(name string) *part {
	var old []*part
	if ps := tr.parts.Load(); ps != nil {
		old = *ps
	}
	for _, p := range old {
		if p.name == name {
			return nil
		}
	}
	p := &part{name: name, tr: tr, log: tr.log, freed: make(chan struct{}, 1), wake: make(chan struct{}, 1)}
	if name != tr.topic {
		p.log = tr.log.WithField("partition", name)
	}
	ps := append(old[:len(old):len(old)], p)
	tr.parts.Store(&ps)
	return p
}

// clockOf is the Redis clock of the partition named name (a claimed job's
// Topic, a Ref's): the one its due times and lease are on.
func (tr *topicRunner) clockOf(name string) *redisClock {
	ps := tr.parts.Load()
	if ps == nil {
		return &redisClock{} // no claim yet: nothing is timed on it
	}
	for _, p := range *ps {
		if p.name == name {
			return &p.clock
		}
	}
	return &(*ps)[0].clock
}

// slotFreed tells every partition's fetcher that a handler slot came free,
// and, in a pool, every other topic's of the pool.
func (tr *topicRunner) slotFreed() {
	if tr.pool != nil {
		tr.pool.freed()
		return
	}
	tr.signalParts()
}

// signalParts wakes every partition's fetcher waiting for a slot.
func (tr *topicRunner) signalParts() {
	if ps := tr.parts.Load(); ps != nil {
		for _, p := range *ps {
			signal(p.freed)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// fetchLoop claims jobs until stop ends. It never polls at a fixed rate: it
// sleeps until the earliest due time or lease deadline that the last claim
// reported, a wake message, a freed slot, or MaxIdle, whichever comes first.
// While the topic is paused it waits for a wake alone (Resume publishes
// one), or pausedRecheck.
//
// Recording a batch in the ledger (a durable commit) takes longer than
// claiming it, so the fetcher does not wait for it: up to RecordPipeline
// batches are being recorded while it claims the next one.
func (tr *topicRunner) fetchLoop(stop, detached context.Context, p *part) {
	// After a failed claim or record the fetcher waits for the store that
	// failed to answer again, at most errPause (outage.go).
	errPause := time.Duration(0)
	backOff := func(err error) {
		errPause = min(max(2*errPause, tr.w.cfg.ErrorBackoffMin), tr.w.cfg.ErrorBackoffMax)
		logFailure(p.log.WithField("retry_in", errPause), err, "fetch failed")
		awaitStore(detached, stop.Done(), err, errPause)
	}
	for stop.Err() == nil {
		// A batch whose record failed posts the error before its jobs are
		// due again, so looking here first never claims them again at once.
		select {
		case err := <-tr.recordErr:
			backOff(err)
			continue
		default:
		}
		select {
		case tr.tokens <- struct{}{}:
		case <-stop.Done():
			continue
		}
		n, nDue := tr.reserve(p)
		if n <= 0 {
			<-tr.tokens
			select {
			case <-p.freed:
			case <-stop.Done():
			}
			continue
		}
		wait, until, err := tr.fetch(detached, p, n, nDue)
		if err == nil {
			select {
			case err = <-tr.recordErr:
			default:
			}
		}
		if err != nil {
			backOff(err)
			continue
		}
		errPause = 0
		if wait < 0 {
			continue // took a full batch: more may be due
		}
		if until == untilToken {
			tr.waitToken(stop, p, wait)
			continue
		}
		// A handler finishing matters only when claimable jobs were left
		// for want of a slot: otherwise it would wake the fetcher for a
		// claim of the one or two jobs that became claimable since the
		// last, a commit each, instead of one claim at the timer.
		var freed chan struct{}
		if until == untilSlot {
			freed = p.freed
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-p.wake:
		case <-freed:
		case <-stop.Done():
		}
		timer.Stop()
	}
}

// waitToken sleeps until the rate limit's next token (wait), or a wake
// message or shutdown. A freed slot does not end it: without a token the
// claim would take nothing.
func (tr *topicRunner) waitToken(stop context.Context, p *part, wait time.Duration) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-p.wake:
	case <-stop.Done():
	}
}

// settleClaims waits, once every fetcher of the topic has stopped, until
// every batch they claimed is recorded and queued, or released: shutdown
// hands back what is queued next.
func (tr *topicRunner) settleClaims() {
	for i := 0; i < cap(tr.tokens); i++ {
		tr.tokens <- struct{}{}
	}
	tr.holds.Wait()
}

// pausedRecheck is how long a fetcher of a paused topic waits for the
// resume's wake before it claims again anyway: a safety net only, since a
// wake lost while the subscription was down is made up for by the
// re-subscription, which wakes every fetcher.
const pausedRecheck = 30 * time.Second

// untilWhat says what the fetcher waits for after a claim, besides its
// timer, a wake message and shutdown.
type untilWhat int

const (
	untilTime  untilWhat = iota // the next due time (less the claim-ahead) or lease deadline
	untilSlot                   // a freed slot: claimable jobs are left
	untilToken                  // the rate limit's next token: due jobs were held back
)

// reserve takes the slots of the jobs p's fetcher may claim now (n, nDue
// of them due already: claimable), at most a batch, in one step with the
// count: busy includes them from here on, and fetch gives back what the
// claim did not fill.
func (tr *topicRunner) reserve(p *part) (n, nDue int) {
	tr.claimMu.Lock()
	defer tr.claimMu.Unlock()
	n, nDue = tr.claimable(p)
	n, nDue = min(n, tr.cfg.BatchSize), min(nDue, tr.cfg.BatchSize)
	if tr.pool != nil {
		n = tr.pool.reserve(tr.member, p, n, func(k int) { tr.busy.Add(int64(k)) })
		return n, min(nDue, n)
	}
	if n > 0 {
		tr.busy.Add(int64(n))
	}
	return n, nDue
}

// unreserve gives back k slots reserve took that no claimed job fills.
func (tr *topicRunner) unreserve(k int) {
	if k <= 0 {
		return
	}
	if tr.pool != nil {
		tr.pool.refund(tr.member, k)
	}
	tr.busy.Add(-int64(k))
	if ps := tr.parts.Load(); tr.pool != nil || ps != nil && len(*ps) > 1 {
		tr.slotFreed() // another partition's (or pool member's) fetcher may be waiting for them
	}
}

// fetch claims up to n jobs from p, at most nDue of them due already (the
// rest due within the claim-ahead), and starts recording them; the
// recording goroutine queues them for the handlers, each at its due time,
// or hands them back if the ledger fails. It holds one token of tr.tokens
// and gives it back, and the n slots reserve took, and gives back those
// the claim did not fill. It returns how long to wait before the next
// claim, or -1 to claim again at once, and what else ends the wait.
func (tr *topicRunner) fetch(detached context.Context, p *part, n, nDue int) (wait time.Duration, until untilWhat, err error) {
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	ahead := claimAheadOf(tr.cfg)
	sentAt := time.Now()
	cl, err := tr.w.c.claim(ctx, p.name, claimOpts{n: n, nDue: nDue, lease: tr.cfg.Lease, limit: rateLimitOf(tr.cfg),
		ahead: ahead, oldestEvery: tr.cfg.OldestEvery})
	if err = tr.w.redisWatch.result(err); err != nil {
		tr.unreserve(n)
		<-tr.tokens
		return 0, untilTime, err
	}
	backlog := !cl.Paused && cl.NextToken == 0 && cl.NextDue > 0 && cl.NextDue <= cl.Now
	if tr.pool != nil && p.wants.Swap(backlog) && !backlog {
		// Its due work is claimed: what the pool held for it is free for
		// the others. Said before the slots go back, so that the fetchers
		// they wake see it.
		defer tr.pool.freed()
	}
	tr.unreserve(n - len(cl.Jobs))
	// Redis read its clock before the reply travelled back, so its time
	// at replyAt is at least cl.nowMicros: holds measured from here err
	// late, never early (holdUntilDue).
	replyAt := time.Now()
	p.clock.seen(cl.nowMicros, sentAt, replyAt)
	switch {
	case cl.Paused && !p.paused:
		p.log.Info("topic paused: claims stopped until it is resumed")
	case !cl.Paused && p.paused:
		p.log.Info("topic resumed: claiming again")
	}
	p.paused = cl.Paused
	p.backlog = backlog
	if len(cl.Buried) > 0 {
		buried := make([]outcome, len(cl.Buried))
		for i, j := range cl.Buried {
			buried[i] = buriedOutcome(j, cl.Now)
		}
		tr.w.completer.add(buried...)
	}
	if len(cl.Jobs) == 0 {
		<-tr.tokens
	} else {
		for _, j := range cl.Jobs {
			// The topic's own limit is the job's from its claim on: the
			// ledger row, the handler (an HTTP target's header) and the
			// decision to retry all see the one that applies.
			if tr.cfg.MaxAttempts > 0 && j.MaxAttempts > tr.cfg.MaxAttempts {
				j.MaxAttempts = tr.cfg.MaxAttempts
			}
		}
		tr.w.cfg.Observer.Claimed(tr.topic, len(cl.Jobs))
		if len(cl.Asked) > 0 {
			// Cancelled during an earlier claim: run settles them cancelled
			// once recorded, without starting them.
			tr.mu.Lock()
			if tr.asked == nil {
				tr.asked = make(map[Ref]bool, len(cl.Asked))
			}
			for _, j := range cl.Jobs {
				if cl.Asked[j.ID] {
					tr.asked[j.Ref()] = true
				}
			}
			tr.mu.Unlock()
		}
		go tr.record(detached, cl.Jobs, claimClock{cl.Now, cl.nowMicros, replyAt})
		if len(cl.Jobs) == n && n == tr.cfg.BatchSize {
			return -1, untilTime, nil
		}
	}
	if cl.Paused {
		// Nothing was claimed (buried jobs aside): wait for the resume.
		return max(tr.w.cfg.MaxIdle, pausedRecheck), untilTime, nil
	}
	if cl.NextToken > 0 {
		tr.observeRateLimited()
		// MaxIdle still bounds the sleep: a bucket reset meanwhile (Redis
		// lost it) is full again.
		return min(max(time.Duration(cl.NextToken-cl.Now)*time.Millisecond, 0), tr.w.cfg.MaxIdle), untilToken, nil
	}
	wait = tr.w.cfg.MaxIdle
	if cl.NextDue > 0 {
		if cl.NextDue-ahead.Milliseconds() <= cl.Now {
			// Claimable jobs are left but every slot is taken: a freed
			// slot wakes us.
			return wait, untilSlot, nil
		}
		// Claimed once the next job is half the claim-ahead from due, a
		// batch takes what falls due over the next half: a claim (and a
		// commit) per half claim-ahead, not per job, and still half of it
		// for the commit before the first is due.
		claimAt := cl.NextDue - ahead.Milliseconds()/2
		wait = min(wait, time.Duration(claimAt-cl.Now)*time.Millisecond)
	}
	if cl.NextLease > 0 {
		// An expired lease (a dead worker) is put back by the next claim.
		wait = min(wait, time.Duration(cl.NextLease-cl.Now+1)*time.Millisecond)
	}
	return max(wait, 0), untilTime, nil
}

// prefetchQuick is the longest average handler run at which a fetcher
// prefetches: a prefetched job then waits for a slot about as long as a
// ledger commit would have made it wait, never behind slow handlers while
// another process may have a free slot.
const prefetchQuick = 10 * time.Millisecond

// claimable is how many jobs the fetcher may claim now (n), and how many
// of them may be due already (nDue). Due jobs: its free handler slots,
// plus the prefetch while prefetching. With the claim-ahead on, jobs not
// due yet may take what quick handlers start in about 10ms beyond the free
// slots (quickRoom), backlog or not: they need their slots within the
// claim-ahead. Behind slow handlers claims follow the free slots alone, so
// no job, due or coming, waits here for a slot while another worker may
// have one.
func (tr *topicRunner) claimable(p *part) (n, nDue int) {
	busy := int(tr.busy.Load())
	room := cap(tr.work) - busy // what never blocks a push into work
	quick := tr.quickRoom()
	free := tr.cfg.Concurrency - busy
	nDue = free
	if p.backlog {
		nDue += quick // the prefetch
	}
	nDue = max(min(nDue, room), 0)
	if claimAheadOf(tr.cfg) <= 0 {
		return nDue, nDue
	}
	return max(min(free+quick, room), 0), nDue
}

// quickRoom is how many jobs beyond its free slots the fetcher may hold
// now: none unless its handlers are quick; then no more than they start
// in about prefetchQuick at their average run (a held job waits for a
// slot about as long as a commit would have made it wait), and no more
// than the topic's Prefetch. Prefetching (a backlog) and the claim-ahead
// share it.
func (tr *topicRunner) quickRoom() int {
	if !tr.quick() {
		return 0
	}
	quick := int64(tr.cfg.Concurrency) * int64(prefetchQuick) / max(tr.runNanos.Load(), 1)
	return int(min(int64(prefetchOf(tr.cfg)), quick))
}

// quick says whether the topic's handlers are quick, both those that
// finished lately and those running (one running long would hold the
// jobs held back however quick the others were).
func (tr *topicRunner) quick() bool {
	avg := tr.runNanos.Load()
	if avg <= 0 || avg >= int64(prefetchQuick) {
		return false
	}
	slow := time.Now().Add(-prefetchQuick)
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, a := range tr.active {
		if a.began.Before(slow) {
			return false
		}
	}
	return true
}

// ran folds one handler run into the moving average (weight 1/8).
func (tr *topicRunner) ran(d time.Duration) {
	for {
		old := tr.runNanos.Load()
		avg := int64(d)
		if old > 0 {
			avg = old + (int64(d)-old)/8
		}
		if tr.runNanos.CompareAndSwap(old, max(avg, 1)) {
			return
		}
	}
}

// observeRateLimited counts a claim the rate limit held back, if the
// observer cares.
func (tr *topicRunner) observeRateLimited() {
	if o, ok := tr.w.cfg.Observer.(RateLimitObserver); ok {
		o.RateLimited(tr.topic)
	}
}

// record writes claimed jobs to the ledger, then queues them for the
// handlers. No handler runs unrecorded: if the ledger fails, the jobs go
// back to due with their attempt unspent and the fetcher backs off.
// Those claimed before their due time (after the claim's clock) are
// queued at it.
func (tr *topicRunner) record(detached context.Context, jobs []*Job, cc claimClock) {
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	err := tr.w.ledgerWatch.result(tr.w.led.Record(ctx, jobs, tr.w.cfg.ID))
	var gone *queue.GoneError
	if errors.As(err, &gone) {
		_ = tr.w.ledgerWatch.result(nil) // it answered: the rest are recorded
		jobs, err = tr.forgetGone(ctx, jobs, gone), nil
	}
	if err == nil {
		tr.w.hold.answered(tr.log)
	}
	if err != nil {
		tr.unrecorded(ctx, jobs, err)
		<-tr.tokens
		return
	}
	if tr.w.cfg.TracerProvider != nil {
		// Best effort: a job whose trace cannot be read runs in a span
		// without a parent.
		_ = tr.w.c.readTraces(ctx, jobs)
	}
	// From here on the heartbeat renews their leases: the wait for a
	// handler (or for the rate limit's start time) may outlast one.
	tr.mu.Lock()
	for _, j := range jobs {
		tr.queued[j.Ref()] = j
	}
	tr.mu.Unlock()
	tr.holdStart(ctx, cc)
	var early []*Job
	for _, j := range jobs {
		if j.RunAt > cc.now {
			early = append(early, j)
			continue
		}
		tr.work <- j // never blocks: busy <= cap(work)
	}
	// The batch's record is done: its token goes back to the fetcher while
	// the jobs claimed ahead wait for their due times. The hold is counted
	// first, so that a shutdown that has every token back waits for it.
	if len(early) > 0 {
		tr.holds.Add(1)
		defer tr.holds.Done()
	}
	<-tr.tokens
	tr.queueAtDue(detached, early, cc) // the claim handed them out in due order
}

// goneDeadReason is the dead set's reason for a job buried again because
// its history says it died (forgetGone): its own last error is in its
// history row (delayq history), which Redis never heard of.
const goneDeadReason = "died already: its death reached the ledger but not Redis (its history row has its error)"

// forgetGone takes the claimed jobs that finished already (their ledger
// rows gone and their history finished: Redis never got their acks,
// queue.GoneError) out of jobs, which the ledger recorded otherwise, so
// that they do not run again, and settles them in Redis as their history
// says: those that succeeded are forgotten (Ack, which leaves a
// tombstone), those that died are buried again, so that the dead set
// shows them. It returns the jobs to run. If the settling fails, their
// leases expire, and the next claim finds their rows gone again.
func (tr *topicRunner) forgetGone(ctx context.Context, jobs []*Job, gone *queue.GoneError) []*Job {
	died := make(map[Ref]bool, len(gone.Refs)) // gone ref -> it died
	for _, r := range gone.Refs {
		died[r] = false
	}
	for _, r := range gone.Dead {
		died[r] = true
	}
	heldBy := make(map[Ref]string, len(gone.Held)) // held ref -> the ledger's holder of its key
	for i, r := range gone.Held {
		heldBy[r] = ""
		if i < len(gone.HeldBy) {
			heldBy[r] = gone.HeldBy[i]
		}
	}
	keep := jobs[:0:0]
	var dropped []*Job
	var acks, waits []Ref
	var dead []DeadJob
	for _, j := range jobs {
		r := j.Ref()
		d, ok := died[r]
		_, held := heldBy[r]
		switch {
		case held:
			// Not run, not a finish: it waits for its key (§4.24).
			tr.w.jobLog(j).WithFields(logrus.Fields{"ordering_key": j.OrderingKey, "held_by": heldBy[r]}).
				Info("another job of the ordering key is in flight or retrying in the ledger: handed back to wait")
			waits = append(waits, r)
			continue
		case !ok:
			keep = append(keep, j)
			continue
		case d:
			tr.w.jobLog(j).Info("the job died already (its ledger row is gone, its history says dead): buried again, not run")
			dead = append(dead, DeadJob{Job: j, Error: goneDeadReason})
		default:
			tr.w.jobLog(j).Info("the job finished already (its ledger row is gone, its history says so): not run again")
			acks = append(acks, r)
		}
		dropped = append(dropped, j)
	}
	tr.forgetAsked(dropped)
	if o, ok := tr.w.cfg.Observer.(queue.LedgerObserver); ok && len(dropped) > 0 {
		o.Gone(tr.topic, len(dropped))
	}
	if len(waits) > 0 {
		by := make([]string, len(waits))
		for i, r := range waits {
			by[i] = heldBy[r]
		}
		if _, err := tr.w.c.ReleaseLater(ctx, waits, by, tr.w.cfg.KeyWait); err != nil {
			tr.log.WithError(err).WithField("jobs", len(waits)).Warn("handing back jobs that wait for their ordering key failed: their leases expire")
		}
	}
	if len(acks) > 0 {
		if n, err := tr.w.c.Ack(ctx, acks); err != nil {
			tr.log.WithError(err).WithField("jobs", len(acks)).Warn("forgetting finished jobs in Redis failed: their leases expire")
		} else {
			tr.log.WithField("jobs", n).Debug("finished jobs forgotten in Redis")
		}
	}
	if len(dead) > 0 {
		if n, _, err := tr.w.c.Bury(ctx, dead); err != nil {
			tr.log.WithError(err).WithField("jobs", len(dead)).Warn("burying dead jobs again in Redis failed: their leases expire")
		} else {
			tr.log.WithField("jobs", n).Debug("dead jobs buried again in Redis")
		}
	}
	tr.busy.Add(-int64(len(jobs) - len(keep)))
	tr.slotFreed()
	return keep
}

// unrecorded hands back jobs whose record failed, attempt unspent, and
// tells the fetcher.
func (tr *topicRunner) unrecorded(ctx context.Context, jobs []*Job, err error) {
	// The fetcher hears of the failure before the jobs are due again, so it
	// backs off instead of claiming them straight back.
	select {
	case tr.recordErr <- fmt.Errorf("ledger record of %d jobs: %w", len(jobs), err):
	default:
	}
	tr.forgetAsked(jobs)
	if n, rerr := tr.w.c.Release(ctx, refsOf(jobs)); rerr != nil {
		// Their leases expire and they run later.
		tr.log.WithError(rerr).WithField("jobs", len(jobs)).Warn("release after a failed ledger record failed")
	} else if n > 0 {
		tr.w.cfg.Observer.Released(tr.topic, n)
	}
	tr.busy.Add(-int64(len(jobs)))
	tr.slotFreed()
}

// queueAtDue queues jobs claimed ahead of their due times (in due order)
// for the handlers, each once it is due on Redis's clock and never before,
// so that none starts early. At shutdown the rest go back, attempt
// unspent.
func (tr *topicRunner) queueAtDue(detached context.Context, jobs []*Job, cc claimClock) {
	for i, j := range jobs {
		if !tr.holdUntilDue(cc.at(j.RunAt)) {
			tr.handBack(detached, jobs[i:], "shutdown: released jobs claimed ahead of their due times")
			return
		}
		tr.work <- j // never blocks: busy <= cap(work)
	}
}

// claimClock is when a claim ran: Redis's clock, and the local instant
// its reply arrived (with its monotonic reading, so that a step of the
// wall clock moves no hold).
type claimClock struct {
	now     int64 // Redis ms
	micros  int64 // Redis µs
	replyAt time.Time
}

// at is the local instant at which Redis's clock has reached ms: never
// before, since Redis read its clock before the reply travelled back.
func (c claimClock) at(ms int64) time.Time {
	return c.replyAt.Add(time.Duration(ms*1000-c.micros) * time.Microsecond)
}

// holdStart waits, on a rate-limited topic, until RateStartLag after the
// batch's claim (Redis's clock), so that its handlers start at the claims'
// pacing however long its ledger write took (TopicConfig.RateStartLag).
// Measured from the claim's reply (claimClock), which errs late: the
// topic's clock estimate errs ahead, and a start measured on it came up
// to a round trip short of the lag. The fetcher's shutdown waits for this
// goroutine, so the jobs still reach the queue that shutdown hands back.
func (tr *topicRunner) holdStart(ctx context.Context, cc claimClock) {
	if tr.cfg.RateLimit <= 0 || tr.cfg.RateStartLag <= 0 {
		return
	}
	wait := time.Until(cc.replyAt.Add(tr.cfg.RateStartLag))
	if wait <= 0 {
		return
	}
	sleep(ctx, wait)
}

// releaseQueued hands back every job claimed but not started (shutdown).
func (tr *topicRunner) releaseQueued(detached context.Context) {
	var jobs []*Job
	for {
		select {
		case j := <-tr.work:
			jobs = append(jobs, j)
			continue
		default:
		}
		break
	}
	tr.handBack(detached, jobs, "shutdown: released jobs not started")
}

// handBack returns recorded jobs that never started to due, attempt
// unspent (shutdown), and logs done on success.
func (tr *topicRunner) handBack(detached context.Context, jobs []*Job, done string) {
	if len(jobs) == 0 {
		return
	}
	tr.mu.Lock()
	for _, j := range jobs {
		delete(tr.queued, j.Ref())
		delete(tr.asked, j.Ref())
	}
	tr.mu.Unlock()
	tr.busy.Add(-int64(len(jobs)))
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	refs := refsOf(jobs)
	n, err := tr.w.c.Release(ctx, refs)
	if err == nil {
		if n > 0 {
			tr.w.cfg.Observer.Released(tr.topic, n)
		}
		err = tr.w.unclaimRows(ctx, refs)
	}
	if err != nil {
		tr.log.WithError(err).WithField("jobs", len(jobs)).Error("shutdown: release failed; the jobs run again after their lease")
		return
	}
	tr.log.WithField("jobs", n).Info(done)
}

// holdUntilDue waits until due, the local instant of a job's due time
// (claimClock.at), when it was claimed ahead of it (TopicConfig.ClaimAhead);
// the job stays queued meanwhile, its lease renewed by the heartbeat. It
// reports false once the worker is stopping: the job goes back rather than
// to a handler that might still take it.
func (tr *topicRunner) holdUntilDue(due time.Time) bool {
	select {
	case <-tr.stopping:
		return false
	default:
	}
	d := time.Until(due)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-tr.stopping:
		return false
	}
}

// handleLoop runs queued jobs until work is closed.
func (tr *topicRunner) handleLoop(base context.Context) {
	for j := range tr.work {
		tr.run(base, j)
	}
}

// run runs one job's handler and passes the outcome to the completer.
func (tr *topicRunner) run(base context.Context, j *Job) {
	ctx, cancel := context.WithCancelCause(base)
	defer cancel(nil)
	ctx, result := queue.WithResultRecorder(ctx)
	ref := j.Ref()
	// From the queue to the running jobs in one step, so that no heartbeat
	// misses the job; its LeaseUntil is the heartbeat's while it is queued.
	clock := tr.clockOf(j.Topic)
	tr.mu.Lock()
	delete(tr.queued, ref)
	if tr.asked[ref] {
		// Cancelled before it started: it never runs.
		delete(tr.asked, ref)
		tr.mu.Unlock()
		tr.w.jobLog(j).Info("cancel asked before the handler started: not running it")
		tr.w.completer.add(cancelledOutcome(j))
		tr.busy.Add(-1)
		tr.slotFreed()
		return
	}
	leaseUntil := j.LeaseUntil
	if clock.until(leaseUntil) <= 0 {
		tr.mu.Unlock()
		// The lease ran out before the handler could start (a stalled
		// process): another worker may own the job now. Leave it to the
		// lease expiry; its ledger row is rewritten by the next claim, or
		// dropped here if another claim has had the job already.
		tr.w.jobLog(j).Warn("lease expired before the handler started: not running it")
		tr.dropSuperseded(context.WithoutCancel(base), j)
		tr.busy.Add(-1)
		tr.slotFreed()
		return
	}
	a := &activeJob{cancel: cancel, deadline: leaseUntil, began: time.Now(),
		timer: time.AfterFunc(clock.until(leaseUntil), func() { cancel(ErrLeaseExpired) })}
	tr.active[ref] = a
	tr.mu.Unlock()
	if tr.cfg.Timeout > 0 {
		var c context.CancelFunc
		ctx, c = context.WithTimeout(ctx, tr.cfg.Timeout)
		defer c()
	}

	late := time.Duration(clock.now()-j.RunAt) * time.Millisecond
	tr.w.cfg.Observer.Started(tr.topic, max(late, 0))
	var span trace.Span
	if tp := tr.w.cfg.TracerProvider; tp != nil {
		ctx, span = runSpan(ctx, tp, tr.topic, handlerJob(j), max(late, 0), time.UnixMilli(j.ClaimedAt))
	}
	began := time.Now()
	err := runHandler(ctx, tr.h, handlerJob(j))
	took := time.Since(began)
	tr.ran(took)
	tr.w.cfg.Observer.Handled(tr.topic, took, err)

	tr.mu.Lock()
	a.timer.Stop()
	a.deadline = 0 // returned: a beat now renews its lease, not its timer
	tr.mu.Unlock()
	var outcome string
	switch {
	case err != nil && errors.Is(context.Cause(ctx), ErrCancelRequested):
		// Asked to stop and it did: cancelled, never retried.
		tr.w.jobLog(j).WithError(err).Info("cancelled while running")
		tr.w.completer.add(cancelledOutcome(j))
		outcome = "cancelled"
	case err != nil && errors.Is(context.Cause(ctx), ErrShutdown):
		// Cut off by shutdown, not failed: back to due, attempt unspent.
		tr.w.jobLog(j).WithError(err).Warn("shutdown interrupted the handler: job handed back")
		tr.w.completer.add(releasedOutcome(j))
		outcome = "released"
	case err != nil && errors.Is(context.Cause(ctx), ErrLeaseExpired) && tr.w.hold.lettingGo():
		// Let go (WorkerConfig.LedgerHold): an outcome would be held
		// again, waiting for the ledger; the job is another worker's.
		tr.w.jobLog(j).WithError(err).Warn("the ledger did not answer and the lease ran out: the job is left to a worker that reaches the ledger")
		if o, ok := tr.w.cfg.Observer.(queue.LedgerObserver); ok {
			o.LetGo(tr.topic, 1)
		}
		outcome = "let go"
	default:
		outcome = tr.settle(j, err, result())
	}
	if span != nil {
		endRunSpan(span, outcome, err)
	}
	// The completer has the outcome before the job leaves the running
	// ones: the heartbeat renews its lease until it is settled.
	tr.mu.Lock()
	delete(tr.active, ref)
	tr.mu.Unlock()
	tr.busy.Add(-1)
	tr.slotFreed()
}

// handlerJob is the job as its handler (and the OnDead hook) sees it: a
// partition's job names its topic, and the partition in Job.Partition
// (which its Ref uses).
func handlerJob(j *Job) *Job {
	if !IsPartition(j.Topic) {
		return j
	}
	hj := *j
	hj.Topic, hj.Partition = TopicOf(j.Topic), j.Topic
	return &hj
}

// cancelAsked cancels the run of job id of partition name (the topic's
// own name for a topic of one) if this worker holds it: a running
// handler's context ends with cause ErrCancelRequested, a queued job is
// settled cancelled instead of started. A job this worker does not hold
// is another's (or settled): nothing to do.
func (tr *topicRunner) cancelAsked(name, id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for ref, a := range tr.active {
		if ref.Topic == name && ref.ID == id {
			a.cancel(ErrCancelRequested)
		}
	}
	for ref := range tr.queued {
		if ref.Topic == name && ref.ID == id {
			if tr.asked == nil {
				tr.asked = make(map[Ref]bool, 1)
			}
			tr.asked[ref] = true
		}
	}
}

// forgetAsked drops the cancel asks of jobs that go back unstarted: their
// next claim reads the mark again.
func (tr *topicRunner) forgetAsked(jobs []*Job) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, j := range jobs {
		delete(tr.asked, j.Ref())
	}
}

// dropSuperseded deletes the ledger row of a claim whose lease ran out
// before its handler started, once Redis shows the job dead or settled
// (Client.claimSuperseded). A worker that stalled between its claim and
// its record wrote that row after another worker had the job: left, it
// would outlive the job (dead in Redis, the recoverer keeps it forever;
// settled, the recoverer runs the job again). The delete is fenced on the
// claim itself (Ledger.DropClaim: attempt, worker, in progress), so no
// other claim's row goes. On an error the row stays: the recoverer's rules
// apply to it, as before.
func (tr *topicRunner) dropSuperseded(detached context.Context, j *Job) {
	ctx, cancel := withOpTimeout(detached)
	defer cancel()
	log := tr.w.jobLog(j)
	gone, err := tr.w.c.claimSuperseded(ctx, j.Ref())
	if err = tr.w.redisWatch.result(err); err != nil {
		log.WithError(err).Warn("could not tell whether the job is dead or settled: its ledger row stays")
		return
	}
	if !gone {
		return
	}
	if err := tr.w.ledgerWatch.result(tr.w.led.DropClaim(ctx, j.Ref(), tr.w.cfg.ID)); err != nil {
		log.WithError(err).Warn("dropping the ledger row of a superseded claim failed")
		return
	}
	log.Info("the job is dead or settled elsewhere: this claim's ledger row dropped")
}

// settle decides what a handler's result means and queues it for the
// completer.
func (tr *topicRunner) settle(j *Job, err error, result []byte) string {
	if err == nil {
		tr.w.completer.add(completedOutcome(j, result))
		return "succeeded"
	}
	log := tr.w.jobLog(j).WithError(err)
	var pe *PanicError
	if errors.As(err, &pe) {
		log = log.WithField("stack", string(pe.Stack))
	}
	if errors.Is(err, ErrSkipRetry) || j.Attempt >= j.MaxAttempts { // the topic's limit applied at the claim
		log.Error("job failed for good: dead")
		tr.w.completer.add(deadOutcome(j, err, tr.clockOf(j.Topic).now()))
		return "dead"
	}
	now := tr.clockOf(j.Topic).now()
	runAt := now + tr.cfg.Backoff.Delay(j.Attempt).Milliseconds()
	if at, ok := RetryRequested(err, now); ok {
		runAt = at
	}
	log.WithField("retry_at", time.UnixMilli(runAt).UTC().Format(time.RFC3339Nano)).Warn("job failed: retrying")
	tr.w.completer.add(retryOutcome(j, err, runAt, runAt+tr.cfg.Lease.Milliseconds()))
	return "retry"
}

// leasedRefs lists the jobs whose leases the heartbeat renews: the running
// ones, the ones queued for a handler, and unsettled, the ones whose outcome
// waits in the completer. Each once.
func (tr *topicRunner) leasedRefs(unsettled []Ref) []Ref {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	refs := make([]Ref, 0, len(tr.active)+len(tr.queued)+len(unsettled))
	for r := range tr.active {
		refs = append(refs, r)
	}
	for r := range tr.queued {
		if _, ok := tr.active[r]; !ok {
			refs = append(refs, r)
		}
	}
	for _, r := range unsettled {
		_, running := tr.active[r]
		_, queued := tr.queued[r]
		if !running && !queued {
			refs = append(refs, r)
		}
	}
	return refs
}

// extended moves the leases of the running and queued jobs among refs to
// deadline (Redis ms), as extend.lua just did at Redis time now. Only a
// lease still running at now was surely this claim's: one that had run out
// may have been claimed again by another worker (extend.lua renews any
// lease of the id), so its job keeps its old deadline and its handler's
// context ends there, or it does not start.
func (tr *topicRunner) extended(refs []Ref, now, deadline int64) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, r := range refs {
		d := tr.clockOf(r.Topic).until(deadline)
		if a, ok := tr.active[r]; ok && a.deadline > now {
			a.deadline = deadline
			a.timer.Reset(d)
		} else if j, ok := tr.queued[r]; ok && j.LeaseUntil > now {
			j.LeaseUntil = deadline
		}
	}
}

func refsOf(jobs []*Job) []Ref {
	refs := make([]Ref, len(jobs))
	for i, j := range jobs {
		refs[i] = j.Ref()
	}
	return refs
}
