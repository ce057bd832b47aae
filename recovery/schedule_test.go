package recovery_test

import (
	"context"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/recovery"
)

// Run runs at start, on its cron schedule, and when triggered; a Redis
// reconnect with an epoch marker gone triggers a run that finds the loss.
func TestRunScheduleAndTriggers(t *testing.T) {
	e := newREnv(t)
	var reported testenv.Event // OnReport: a run finished, its report kept
	r := e.recoverer(t, recovery.Config{Schedule: "@every 1s", OnReport: func(recovery.Report) { reported.Notify() }})
	ctx, cancel := context.WithCancel(testenv.Context(t))
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	hasTrigger := func(trigger string) func() bool {
		return func() bool {
			for _, rep := range r.Reports() {
				if rep.Trigger == trigger {
					return true
				}
			}
			return false
		}
	}
	reported.Wait(testenv.Context(t), t, "the run at start", hasTrigger("start"))
	reported.Wait(testenv.Context(t), t, "a scheduled run", hasTrigger("schedule"))
	r.Trigger("operator")
	reported.Wait(testenv.Context(t), t, "the triggered run", hasTrigger("operator"))

	// Nothing missing: a reconnect triggers nothing.
	now := e.redisNow(t)
	e.record(t, []row{{topic: "t", id: "waiting", attempt: 1, runAt: now + 600_000, leaseUntil: now + 630_000, retrying: true}})
	if _, err := e.c.EnsureEpoch(testenv.Context(t), []string{"t"}, "x"); err != nil {
		t.Fatal(err)
	}
	r.Trigger("learn-topics")
	reported.Wait(testenv.Context(t), t, "a run that sees topic t", hasTrigger("learn-topics"))
	r.RedisReconnected(testenv.Context(t))
	if len(e.logged(logrus.InfoLevel, "every epoch marker is there")) != 1 {
		t.Fatal("the reconnect check did not report markers present")
	}
	// Redis lost the topic: the reconnect check runs recovery at once.
	e.dropTopic(t, "t")
	r.RedisReconnected(testenv.Context(t))
	reported.Wait(testenv.Context(t), t, "the run after the reconnect", hasTrigger("redis-reconnect"))
	var rep recovery.Report
	for _, x := range r.Reports() {
		if x.Trigger == "redis-reconnect" {
			rep = x
		}
	}
	if !rep.DataLossDetected() || rep.Reenqueued != 1 {
		t.Fatalf("reconnect run %+v", rep)
	}
}
