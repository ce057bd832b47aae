package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
)

// A durable topic's window is the ledger's: New refuses a queue config and
// a ledger that disagree on it, and takes them when they agree (a redis
// topic's window is the queue config's alone).
func TestNewChecksTheUniquenessWindows(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	db := testenv.SQLite(t)
	hour := map[string]time.Duration{"d": time.Hour}
	qc := queue.Config{Namespace: ns, TopicUniqueFor: map[string]time.Duration{"d": time.Hour, "r": time.Minute},
		TopicDurability: map[string]queue.Durability{"d": queue.DurabilityDurable}}
	for _, c := range []struct {
		name   string
		ledger map[string]time.Duration
		ok     bool
	}{
		{"ledger without it", nil, false},
		{"ledger with another", map[string]time.Duration{"d": time.Minute}, false},
		{"ledger with the same", hour, true},
	} {
		store, err := ledger.New(db, ledger.Options{UniqueFor: c.ledger})
		if err != nil {
			t.Fatal(err)
		}
		_, err = engine.New(rdb, store, engine.Config{Queue: qc, NoRecovery: true, Logger: testenv.QuietLogger()})
		if c.ok != (err == nil) || (err != nil && !strings.Contains(err.Error(), "durable topic d")) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
