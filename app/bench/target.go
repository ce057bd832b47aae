package bench

import (
	"context"
	"crypto/hmac"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/queue"
)

// targetSecret signs a target run's requests: a fixed bench value, so the
// figures include the signature's HMAC on the sender and its check on the
// receiver.
var targetSecret = []byte("delayq-bench-target-secret")

// NoopBaseline is a target run's same-minute baseline (Options.HTTPTarget):
// the same scenario with the same options and a no-op handler, right
// before and right after the measured run, so the cost of the HTTP calls
// can be told from the machine's speed in that minute.
type NoopBaseline struct {
	Before NoopRun `json:"before"`
	After  NoopRun `json:"after"`
}

// NoopRun is one no-op run of a NoopBaseline: its Rate (jobs/s for drain,
// due/s for lateness) and, for lateness, its handler start minus due time.
type NoopRun struct {
	Rate    float64  `json:"rate"`
	Latency *Latency `json:"latency,omitempty"`
}

// phase is one measured part of a drain or lateness run on topic, with the
// tracker as the handler or, with target set, an HTTP target whose
// receiver feeds the tracker.
type phase func(ctx context.Context, s *sandbox, o Options, topic string, target bool, r *Result) error

// withNoopBaseline runs ph on an HTTP target between two no-op runs of the
// same options, each on a topic of its own, and fills r with the target
// run and r.NoopBaseline with the two others.
func withNoopBaseline(ctx context.Context, s *sandbox, o Options, r *Result, topic string, ph phase) error {
	var before, after Result
	if err := ph(ctx, s, o, topic+".noop_before", false, &before); err != nil {
		return fmt.Errorf("bench: no-op baseline before: %w", err)
	}
	if err := ph(ctx, s, o, topic+".target", true, r); err != nil {
		return err
	}
	if err := ph(ctx, s, o, topic+".noop_after", false, &after); err != nil {
		return fmt.Errorf("bench: no-op baseline after: %w", err)
	}
	r.NoopBaseline = &NoopBaseline{
		Before: NoopRun{Rate: before.Rate, Latency: before.Latency},
		After:  NoopRun{Rate: after.Rate, Latency: after.Latency},
	}
	for _, b := range []Result{before, after} {
		if !b.OK() || b.Duplicates > 0 {
			r.Notes = append(r.Notes, fmt.Sprintf("a no-op baseline run had %d missing and %d duplicate jobs", b.Missing, b.Duplicates))
		}
	}
	if r.Unit == "jobs/s" {
		// The drain's ratio: jobs/s on the target over the no-op handler's.
		if mean := (before.Rate + after.Rate) / 2; mean > 0 {
			r.Ratio = r.Rate / mean
		}
	}
	return nil
}

// handlerFor returns the handler of a phase: t itself, or with target an
// httptarget.Target (signing with targetSecret) pointed at a loopback
// receiver that checks each request's signature and feeds t, so t counts
// what the receiver got and when. Call stop once the worker stopped.
func (s *sandbox) handlerFor(ctx context.Context, o Options, t *tracker, target bool, f *failures) (h queue.Handler, stop func(), err error) {
	if !target {
		return t, func() {}, nil
	}
	addr, stopServer, err := serveLoopback(ctx, receiver(t, f))
	if err != nil {
		return nil, nil, err
	}
	tg, err := httptarget.New(httptarget.Config{
		URL:         "http://" + addr + "/hook",
		Secret:      targetSecret,
		Concurrency: o.Concurrency,
		Version:     "bench",
		Observer:    failedCalls{f},
		Logger:      s.log,
	})
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("bench: target: %w", err)
	}
	return tg, func() { tg.Close(); stopServer() }, nil
}

// receiver is the target's endpoint: it answers 200 at once, after
// checking the signature (a bad one is answered 401 and counted as a
// failure) and telling t the job's id and due time, so t counts every
// delivery, duplicates and early ones, and the lateness of each arrival
// against the Delayq-Due-At header: the receiver's clock against Redis's,
// corrected by the sandbox's measured offset (0 on one host).
func receiver(t *tracker, f *failures) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		job := queue.Job{ID: r.Header.Get(httptarget.HeaderJobID)}
		due, err := strconv.ParseInt(r.Header.Get(httptarget.HeaderDueAt), 10, 64)
		body, rerr := io.ReadAll(r.Body)
		ts := r.Header.Get(httptarget.HeaderTimestamp)
		sig := r.Header.Get(httptarget.HeaderSignature)
		switch {
		case err != nil || rerr != nil:
			f.add("receiver: no due time or body")
			w.WriteHeader(http.StatusBadRequest)
			return
		case !hmac.Equal([]byte(sig), []byte(httptarget.Sign(targetSecret, ts, body))):
			f.add("receiver: bad signature")
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		job.RunAt = due
		_ = t.Handle(r.Context(), &job)
		w.WriteHeader(http.StatusOK)
	})
}

// failedCalls counts the target's requests that did not get a 2xx.
type failedCalls struct{ f *failures }

func (c failedCalls) TargetRequest(_, class string, _ time.Duration) {
	if class != "2xx" {
		c.f.add("target: " + class)
	}
}

// progressName is a phase's progress label: the scenario, and the part of
// a target run it is ("drain noop_before").
func progressName(scenario, topic string) string {
	if rest, ok := strings.CutPrefix(topic, "bench."+scenario+"."); ok {
		return scenario + " " + rest
	}
	return scenario
}
