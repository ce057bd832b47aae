package recoverer_test

import (
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/recoverer"
	"github.com/delayq/delayq/internal/testenv"
)

// Run runs at start, on its cron schedule, and when triggered; a Redis
// reconnect with an epoch marker gone triggers a run that finds the loss.
func TestRunScheduleAndTriggers(t *testing.T) {
	e := newREnv(t)
	r, reported := runRecoverer(t, e, recoverer.Config{Schedule: "@every 1s"})
	reported.Wait(testenv.Context(t), t, "the run at start", hasTrigger(r, "start"))
	reported.Wait(testenv.Context(t), t, "a scheduled run", hasTrigger(r, "schedule"))
	r.Trigger("operator")
	reported.Wait(testenv.Context(t), t, "the triggered run", hasTrigger(r, "operator"))
	r.stop()

	// The reconnect checks run on a recoverer whose schedule never fires
	// during the test: a scheduled run between the loss and the reconnect
	// would find the loss first.
	r, reported = runRecoverer(t, e, recoverer.Config{Schedule: "@every 1h", SkipRunOnStart: true})
	// Nothing missing: a reconnect triggers nothing.
	now := e.redisNow(t)
	e.record(t, []row{{topic: "t", id: "waiting", attempt: 1, runAt: now + 600_000, leaseUntil: now + 630_000, retrying: true}})
	if _, err := e.c.EnsureEpoch(testenv.Context(t), []string{"t"}, "x"); err != nil {
		t.Fatal(err)
	}
	r.Trigger("learn-topics")
	reported.Wait(testenv.Context(t), t, "a run that sees topic t", hasTrigger(r, "learn-topics"))
	r.RedisReconnected(testenv.Context(t))
	if len(e.logged(logrus.InfoLevel, "every epoch marker is there")) != 1 {
		t.Fatal("the reconnect check did not report markers present")
	}
	// Redis lost the topic: the reconnect check runs recovery at once.
	e.dropTopic(t, "t")
	r.RedisReconnected(testenv.Context(t))
	reported.Wait(testenv.Context(t), t, "the run after the reconnect", hasTrigger(r, "redis-reconnect"))
	var rep recoverer.Report
	for _, x := range r.Reports() {
		if x.Trigger == "redis-reconnect" {
			rep = x
		}
	}
	if !rep.DataLossDetected() || rep.Reenqueued != 1 {
		t.Fatalf("reconnect run %+v", rep)
	}
}

// running is a recoverer whose Run the test started.
type running struct {
	*recoverer.Recoverer
	stop func()
}

// runRecoverer starts Run of a recoverer of cfg until stop is called or
// the test ends; reported is notified after each report is kept.
func runRecoverer(t *testing.T, e renv, cfg recoverer.Config) (r running, reported *testenv.Event) {
	t.Helper()
	reported = &testenv.Event{}
	cfg.OnReport = func(recoverer.Report) { reported.Notify() }
	rec := e.recoverer(t, cfg)
	run := testenv.Start(t, rec.Run)
	var once sync.Once
	stop := func() {
		once.Do(func() {
			if err := run.Stop(); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(stop)
	return running{Recoverer: rec, stop: stop}, reported
}

// hasTrigger says whether r kept a report of a run trigger started.
func hasTrigger(r running, trigger string) func() bool {
	return func() bool {
		for _, rep := range r.Reports() {
			if rep.Trigger == trigger {
				return true
			}
		}
		return false
	}
}
