package dataplane

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// probeTimeout bounds one ping of a store that failed: a store that does
// not answer within it counts as down for this probe.
const probeTimeout = time.Second

// storeWatch follows the outages of one store (Redis or the ledger) for a
// worker. A call that failed makes its caller (the completer, a fetcher)
// wait on the watch instead of sleeping out a pause grown during the
// outage: while anyone waits, the watch pings the store every
// ErrorBackoffMin and wakes every waiter the moment it answers again. A
// store that answers pings but fails the call itself (a bad statement, a
// script error) is tried again on the caller's error backoff, as without
// a watch. While an outage is known (a ping failed) a wait lasts until the
// store answers, at most ErrorBackoffMax: a fetcher whose claims succeed
// but whose records fail does not claim and hand back a batch every
// ErrorBackoffMin meanwhile.
//
// An outage (a ping failed) is logged once when it begins and once when it
// ends, with the store's name; the probes themselves log nothing.
type storeWatch struct {
	store string                          // "redis" or "ledger", the logs' store field
	ping  func(ctx context.Context) error // nil: no probe, waits are the pause alone
	every time.Duration                   // ErrorBackoffMin: between two pings
	most  time.Duration                   // ErrorBackoffMax: the longest wait
	log   logrus.FieldLogger

	down atomic.Bool   // an outage is known: a ping failed and nothing answered since
	oks  atomic.Uint64 // calls that succeeded: a ping that fails while one does is stale

	mu      sync.Mutex
	waiters int
	probing bool
	back    chan struct{} // closed when the store answers after an outage
	downAt  time.Time
}

func newStoreWatch(store string, ping func(ctx context.Context) error, every, most time.Duration, log logrus.FieldLogger) *storeWatch {
	return &storeWatch{store: store, ping: ping, every: every, most: most, log: log.WithField("store", store), back: make(chan struct{})}
}

// storeErr is a failed call to one store: the caller waits on its watch.
type storeErr struct {
	watch *storeWatch
	err   error
}

func (e *storeErr) Error() string { return e.err.Error() }
func (e *storeErr) Unwrap() error { return e.err }

// result passes on a call's result: an error marked as this store's, or,
// on success, the news that the store answers (an outage known is over).
func (s *storeWatch) result(err error) error {
	if err == nil {
		s.oks.Add(1)
		if s.down.Load() {
			s.answered()
		}
		return nil
	}
	var se *storeErr
	if errors.As(err, &se) {
		return err
	}
	return &storeErr{watch: s, err: err}
}

// isDown reports whether an outage of the store is known: the callers then
// log their failures at debug level, the outage's own line said it.
func (s *storeWatch) isDown() bool { return s.down.Load() }

// watchOf returns the watch of the store err came from, or nil.
func watchOf(err error) *storeWatch {
	var se *storeErr
	if errors.As(err, &se) {
		return se.watch
	}
	return nil
}

// logFailure logs a failed call at warn level, or at debug level while the
// outage of its store is known (its beginning was logged once).
func logFailure(log logrus.FieldLogger, err error, msg string) {
	if s := watchOf(err); s != nil && s.isDown() {
		log.WithError(err).Debug(msg)
		return
	}
	log.WithError(err).Warn(msg)
}

// awaitStore waits after a failed call: until the store err came from
// answers again, or pause (ErrorBackoffMax while the store is known down),
// or done; a failure of no known store waits the pause. ctx carries the
// values for the probes' calls; done ends the wait.
func awaitStore(ctx context.Context, done <-chan struct{}, err error, pause time.Duration) {
	s := watchOf(err)
	if s == nil || s.ping == nil {
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		}
		return
	}
	s.wait(ctx, done, pause)
}

func (s *storeWatch) wait(ctx context.Context, done <-chan struct{}, pause time.Duration) {
	s.mu.Lock()
	// Read with back, under mu: answered closes the back of the outage
	// seen here.
	if s.down.Load() {
		pause = max(pause, s.most)
	}
	s.waiters++
	back := s.back
	if !s.probing {
		s.probing = true
		go s.probe(context.WithoutCancel(ctx))
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
	}()
	t := time.NewTimer(pause)
	defer t.Stop()
	select {
	case <-back:
	case <-t.C:
	case <-done:
	}
}

// probe pings the store every s.every while someone waits. It ends when
// the store answers (waking the waiters if an outage was known) or when
// nobody waits any more.
func (s *storeWatch) probe(ctx context.Context) {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for range t.C {
		s.mu.Lock()
		if s.waiters == 0 {
			s.probing = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		oks := s.oks.Load()
		pctx, cancel := context.WithTimeout(ctx, probeTimeout)
		err := s.ping(pctx)
		cancel()
		// A call that succeeded while the ping was out outranks it: the
		// ping may have failed on a connection from before the store came
		// back.
		if err != nil && s.oks.Load() == oks {
			s.failed(err)
			continue
		}
		s.mu.Lock()
		s.probing = false
		s.mu.Unlock()
		// A store that answers the first ping was not down: the call failed
		// for another reason, and its caller waits its pause.
		s.answered()
		return
	}
}

// failed notes a failed ping: the first one of an outage is logged.
func (s *storeWatch) failed(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down.Load() {
		return
	}
	s.downAt = time.Now()
	s.down.Store(true)
	s.log.WithError(err).Warn(s.store + " not answering: claims and settlements wait for it, probed every " + s.every.String())
}

// answered notes that the store answered: if an outage was known it is
// over, logged once, and every waiter wakes at once.
func (s *storeWatch) answered() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down.Load() {
		return
	}
	s.down.Store(false)
	close(s.back)
	s.back = make(chan struct{})
	s.log.WithField("down_for", time.Since(s.downAt).Round(time.Millisecond).String()).
		Info(s.store + " answers again: claims and settlements resume")
}

// Pinger is a Ledger that can tell cheaply whether its database answers
// (*ledger.Ledger is one). After a failed ledger write the worker pings it
// every ErrorBackoffMin and writes again as soon as it answers; a Ledger
// without Ping is tried again after the error backoff alone.
type Pinger interface {
	Ping(ctx context.Context) error
}
