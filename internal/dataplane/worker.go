package dataplane

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// Worker claims jobs of its registered topics, records them in the ledger,
// runs their handlers and settles the outcome. docs/design.md, §4 Lifecycle,
// describes the lifecycle it implements.
type Worker struct {
	c   *Client
	led Ledger
	cfg WorkerConfig
	log logrus.FieldLogger

	topics    map[string]*topicRunner
	pools     []*pool // WorkerConfig.Pools, built at Run
	completer *completer
	// redisWatch and ledgerWatch follow the two stores' outages: after a
	// failed call the completer and the fetchers wait on them, and resume
	// as soon as the store answers again (outage.go).
	redisWatch, ledgerWatch *storeWatch
	// hold is how long the ledger has refused the heartbeat's extensions
	// (WorkerConfig.LedgerHold).
	hold ledgerHold
	ran  atomic.Bool

	// wakeParts maps a wake channel to its partition's fetcher state
	// (*part); newWake hands the wake listener the channels of partitions
	// added while it runs (layout.go).
	wakeParts sync.Map
	newWake   chan string
}

// NewWorker returns a worker over c that records every claimed job in led
// before its handler runs. Register handlers with Handle, then call Run.
func NewWorker(c *Client, led Ledger, cfg WorkerConfig) (*Worker, error) {
	if led == nil {
		return nil, fmt.Errorf("queue: worker: a Ledger is required")
	}
	cfg, err := cfg.WithDefaults()
	if err != nil {
		return nil, err
	}
	w := &Worker{
		c:      c,
		led:    led,
		cfg:    cfg,
		log:    cfg.Logger.WithField("worker", cfg.ID),
		topics: make(map[string]*topicRunner),
		// Buffered for a raise to MaxPartitions of a few topics at once;
		// the layout watch waits when it is full.
		newWake: make(chan string, 4*MaxPartitions),
	}
	w.completer = newCompleter(w)
	w.redisWatch = newStoreWatch("redis", c.Ping, cfg.ErrorBackoffMin, cfg.ErrorBackoffMax, w.log)
	var ping func(context.Context) error
	if p, ok := led.(Pinger); ok {
		ping = p.Ping
	}
	w.ledgerWatch = newStoreWatch("ledger", ping, cfg.ErrorBackoffMin, cfg.ErrorBackoffMax, w.log)
	return w, nil
}

// Handle registers h for topic with tc (zero fields take the worker's
// defaults). It must be called before Run.
func (w *Worker) Handle(topic string, h Handler, tc TopicConfig) error {
	if w.ran.Load() {
		return fmt.Errorf("queue: worker: Handle(%s) after Run", topic)
	}
	if err := ValidateTopic(topic); err != nil {
		return err
	}
	if _, dup := w.topics[topic]; dup {
		return fmt.Errorf("queue: worker: topic %s registered twice", topic)
	}
	tc, err := tc.Resolve(w.cfg.Topic)
	if err != nil {
		return fmt.Errorf("queue: worker: topic %s: %w", topic, err)
	}
	w.topics[topic] = newTopicRunner(w, topic, h, tc)
	return nil
}

// ID is the worker's name in the ledger and logs.
func (w *Worker) ID() string { return w.cfg.ID }

// Run works until ctx ends, then shuts down gracefully: it stops claiming,
// hands jobs claimed but not started back at once, waits for running
// handlers up to the shutdown timeout (then cancels their contexts), and
// flushes the completer. It returns nil after a clean shutdown.
func (w *Worker) Run(ctx context.Context) error {
	if !w.ran.CompareAndSwap(false, true) {
		return errors.New("queue: worker: Run called twice")
	}
	if len(w.topics) == 0 {
		return errors.New("queue: worker: no topic registered")
	}
	pools, err := newPools(w.cfg.Pools, w.topics)
	if err != nil {
		return err
	}
	w.pools = pools
	// I/O outlives ctx: a claim or ledger write cut off half way would leave
	// jobs leased for nothing. Every call derives its own timeout from
	// detached instead (withOpTimeout).
	detached := context.WithoutCancel(ctx)
	handlerCtx, stopHandlers := context.WithCancelCause(detached)
	defer stopHandlers(ErrShutdown)

	completerDone := make(chan struct{})
	go func() { defer close(completerDone); w.completer.run(detached) }()

	// Heartbeats go on until the last handler returned.
	bg, stopBG := context.WithCancel(detached)
	defer stopBG()
	var bgWG sync.WaitGroup
	bgWG.Add(2)
	go func() { defer bgWG.Done(); w.heartbeat(bg, detached) }()
	go func() { defer bgWG.Done(); w.register(bg, detached) }()

	var fetchers, handlers sync.WaitGroup
	startFetch := func(tr *topicRunner, name string) {
		p := tr.addPart(name)
		if p == nil {
			return
		}
		w.wakeParts.Store(w.c.WakeChannel(name), p)
		fetchers.Add(1)
		go func() { defer fetchers.Done(); tr.fetchLoop(ctx, detached, p) }()
	}
	for _, tr := range w.topics {
		tr.stopping = ctx.Done()
		for i := 0; i < tr.cfg.Concurrency; i++ {
			handlers.Add(1)
			go func() { defer handlers.Done(); tr.handleLoop(handlerCtx) }()
		}
		for _, name := range w.partitionsOf(ctx, tr.topic) {
			startFetch(tr, name)
		}
	}
	bgWG.Add(1) // once the first partitions are known
	go func() { defer bgWG.Done(); w.listenWake(bg) }()
	// The layout watch adds the fetchers of partitions an operator adds;
	// it ends with ctx, and before fetchers.Wait, which no Add may follow.
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); w.watchLayouts(ctx, startFetch) }()
	w.log.WithField("topics", len(w.topics)).Info("worker started")

	<-ctx.Done()
	w.log.Info("worker stopping: no more claims")
	<-watchDone
	fetchers.Wait()
	for _, tr := range w.topics {
		tr.settleClaims()
	}
	for _, tr := range w.topics {
		tr.releaseQueued(detached)
		close(tr.work)
	}
	handlersDone := make(chan struct{})
	go func() { handlers.Wait(); close(handlersDone) }()
	timer := time.NewTimer(w.cfg.ShutdownTimeout)
	select {
	case <-handlersDone:
		timer.Stop()
	case <-timer.C:
		w.log.Warn("shutdown timeout: cancelling running handlers")
		stopHandlers(ErrShutdown)
		<-handlersDone
	}
	stopBG()
	bgWG.Wait()
	w.completer.close()
	<-completerDone
	w.log.Info("worker stopped")
	return nil
}

// partitionsOf returns the partitions of topic's layout, or the topic's
// own name alone when Redis cannot tell (the layout watch adds the rest
// once it can): its own partition is always claimed from.
func (w *Worker) partitionsOf(ctx context.Context, topic string) []string {
	names, err := w.c.Partitions(ctx, topic)
	if err != nil {
		logFailure(w.log.WithField("topic", topic), err, "reading the topic's partitions failed: claiming from its own until it answers")
		return []string{topic}
	}
	if !slices.Contains(names, topic) {
		names = append(names, topic)
	}
	return names
}

// watchLayouts reads every topic's layout again every Config.LayoutRefresh
// until ctx ends, and starts a fetcher (start) for each partition it has
// not seen, and subscribes to its wake channel.
func (w *Worker) watchLayouts(ctx context.Context, start func(tr *topicRunner, name string)) {
	t := time.NewTicker(w.c.cfg.LayoutRefresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, tr := range w.topics {
			names, err := w.c.Partitions(ctx, tr.topic)
			if err != nil {
				continue // the store's outage is someone else's to report
			}
			for _, name := range names {
				if _, known := w.wakeParts.Load(w.c.WakeChannel(name)); known {
					continue
				}
				start(tr, name)
				tr.log.WithField("partition", name).Info("new partition: claiming from it")
				select {
				case w.newWake <- w.c.WakeChannel(name):
				case <-ctx.Done():
					return
				}
			}
		}
	}
}

// opTimeout bounds one Redis or ledger call of the runtime.
const opTimeout = 10 * time.Second

func withOpTimeout(detached context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(detached, opTimeout)
}

// jobLog returns a logger with the job's fields.
func (w *Worker) jobLog(j *Job) logrus.FieldLogger {
	return w.log.WithFields(logrus.Fields{"topic": j.Topic, "job": j.ID, "attempt": j.Attempt})
}

// sleep waits d or until ctx ends; it reports whether ctx is still live.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// unclaimRows is the ledger step of every release (completer, shutdown),
// after the jobs are due again in Redis: the rows of a redis topic are
// debris and are deleted (fenced: a later claim's row stays); those of a
// durable topic are the jobs' durable copies and go back to waiting
// (Ledger.Unclaim).
func (w *Worker) unclaimRows(ctx context.Context, refs []Ref) error {
	var durable, other []Ref
	for _, r := range refs {
		if w.c.lifecycle(r.Topic).waitsInSQL() {
			durable = append(durable, r)
		} else {
			other = append(other, r)
		}
	}
	var errs []error
	if len(other) > 0 {
		errs = append(errs, w.led.DropRows(ctx, other))
	}
	if len(durable) > 0 {
		errs = append(errs, w.led.Unclaim(ctx, durable))
	}
	return errors.Join(errs...)
}
