package recovery

import (
	"math"
	"strings"
	"testing"
)

// The history purge's settings default to the ledger's (500 rows, 5% of
// the time) and are refused out of range, naming the field.
func TestConfigHistoryPurge(t *testing.T) {
	c, _, err := Config{}.WithDefaults("ns")
	if err != nil || c.HistoryPurgeBatch != 500 || c.HistoryPurgeDuty != 0.05 {
		t.Fatalf("defaults: batch %d, duty %v, %v; want 500, 0.05", c.HistoryPurgeBatch, c.HistoryPurgeDuty, err)
	}
	for _, bad := range []Config{{HistoryPurgeBatch: -1}, {HistoryPurgeBatch: 10_001}, {HistoryPurgeDuty: -1},
		{HistoryPurgeDuty: 2}, {HistoryPurgeDuty: math.NaN()}} {
		_, _, err := bad.WithDefaults("ns")
		if err == nil || !strings.Contains(err.Error(), "HistoryPurge") {
			t.Errorf("%+v: %v; want an error naming the field", bad, err)
		}
	}
}
