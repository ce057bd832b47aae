package dataplane_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/ledgerops"
	"github.com/delayq/delayq/internal/testenv"
)

// badTopics are names that would break out of the {topic} hash tag or the
// namespace, or glob over other keys, if they reached a key.
var badTopics = []string{"", "a}b", "a{b", "../x", "a:b", "a*", "a?b", "a[b]", "a b", "a\nb", "ä", "a/b"}

// TestEveryTopicMethodRefusesBadNames calls every Client method that builds
// a topic's keys with bad topic names: each returns ErrInvalidTopic and no
// key appears. The settle methods get a good topic along with the bad one,
// and must leave the good topic's claim alone too: they check every topic
// before they write.
func TestEveryTopicMethodRefusesBadNames(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		mustEnqueue(t, e, "ok", dataplane.NewJob{ID: "j"})
		held := mustClaim(t, e, "ok", 1, time.Hour).Jobs
		if len(held) != 1 {
			t.Fatalf("claimed %d jobs", len(held))
		}
		good := held[0].Ref()
		led := sqliteLedger(t)
		before := keysOf(t, e)
		slices.Sort(before)

		for _, topic := range badTopics {
			bad := dataplane.Ref{Topic: topic, ID: "j", Attempt: 1}
			calls := map[string]func() error{
				"Enqueue": func() error { _, err := e.c.Enqueue(ctx, topic, dataplane.NewJob{ID: "j"}); return err },
				"EnqueueBatch": func() error {
					_, err := e.c.EnqueueBatch(ctx, topic, []dataplane.NewJob{{ID: "j"}})
					return err
				},
				"Claim":          func() error { _, err := e.c.Claim(ctx, topic, 1, time.Second); return err },
				"Get":            func() error { _, err := e.c.Get(ctx, topic, "j"); return err },
				"Stats":          func() error { _, err := e.c.Stats(ctx, topic); return err },
				"List":           func() error { _, err := e.c.List(ctx, topic, dataplane.StateWaiting, 0, 10); return err },
				"Cancel":         func() error { _, err := e.c.Cancel(ctx, ledgerops.Of(led), topic, "j"); return err },
				"RequeueDead":    func() error { return e.c.RequeueDead(ctx, topic, "j") },
				"RequeueAllDead": func() error { _, err := e.c.RequeueAllDead(ctx, topic); return err },
				"PurgeDead":      func() error { _, err := e.c.PurgeDead(ctx, topic, time.Now().UnixMilli()); return err },
				"EpochMissing":   func() error { _, err := e.c.EpochMissing(ctx, []string{"ok", topic}); return err },
				"EnsureEpoch":    func() error { _, err := e.c.EnsureEpoch(ctx, []string{"ok", topic}, "x"); return err },
				"EnqueueTick": func() error {
					_, err := e.c.EnqueueTick(ctx, nil, topic, "s", time.Now().UnixMilli(), dataplane.NewJob{ID: "s:1"})
					return err
				},
				"LastTicks": func() error { _, err := e.c.LastTicks(ctx, nil, topic, "s"); return err },
				"Ack":       func() error { _, err := e.c.Ack(ctx, []dataplane.Ref{good, bad}); return err },
				"Release":   func() error { _, err := e.c.Release(ctx, []dataplane.Ref{good, bad}); return err },
				"Extend":    func() error { _, _, err := e.c.Extend(ctx, []dataplane.Ref{good, bad}, time.Minute); return err },
				"Retry": func() error {
					_, err := e.c.Retry(ctx, []dataplane.RetryRequest{{Ref: good}, {Ref: bad}})
					return err
				},
				"Bury": func() error {
					_, _, err := e.c.Bury(ctx, []dataplane.DeadJob{{Job: held[0]}, {Job: &dataplane.Job{Topic: bad.Topic, ID: bad.ID, Attempt: bad.Attempt}}})
					return err
				},
			}
			for name, call := range calls {
				if err := call(); !errors.Is(err, dataplane.ErrInvalidTopic) {
					t.Errorf("%s(%q): %v, want ErrInvalidTopic", name, topic, err)
				}
			}
			// Restore reports the bad row and restores nothing for it.
			out, err := e.c.Restore(ctx, []dataplane.RestoreRow{{Topic: topic, ID: "j", Attempt: 1, MaxAttempts: 3}}, dataplane.RestoreOptions{})
			if !errors.Is(err, dataplane.ErrInvalidTopic) || len(out) != 1 || out[0] == dataplane.RestoreCreated {
				t.Errorf("Restore(%q): %v %v, want ErrInvalidTopic and nothing created", topic, out, err)
			}
			if ch := e.c.WakeChannel(topic); ch != "" {
				t.Errorf("WakeChannel(%q) = %q, want \"\"", topic, ch)
			}
		}

		after := keysOf(t, e)
		slices.Sort(after)
		if !slices.Equal(before, after) {
			t.Fatalf("keys changed:\nbefore %v\nafter  %v", before, after)
		}
		info := mustGet(t, e, "ok", "j")
		if info.State != dataplane.StateInFlight || info.Job.Attempt != 1 {
			t.Fatalf("the good claim changed: %+v", info)
		}
		topics, err := e.c.Topics(context.Background())
		if err != nil || !slices.Equal(topics, []string{"ok"}) {
			t.Fatalf("topics %v %v", topics, err)
		}
	})
}

// TestTopicsLeavesOutBadNames: a name someone with Redis access put into
// the topics set is not handed out as a topic (every caller would build
// keys from it).
func TestTopicsLeavesOutBadNames(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		mustEnqueue(t, e, "ok", dataplane.NewJob{ID: "j"})
		if err := e.rdb.SAdd(testenv.Context(t), e.ns+":topics", "a}b", "../x", "").Err(); err != nil {
			t.Fatal(err)
		}
		topics, err := e.c.Topics(testenv.Context(t))
		if err != nil || !slices.Equal(topics, []string{"ok"}) {
			t.Fatalf("topics %q %v, want [ok]", topics, err)
		}
	})
}
