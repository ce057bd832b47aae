package httpapi_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// A partitioned topic reads as one topic everywhere a user looks: the
// ledger listing by topic takes its partitions' rows, and every row, job
// view and history row shows the topic's name with its partition beside
// it.
func TestPartitionedTopicListsAsOneTopic(t *testing.T) {
	e := newEnv(t, embedded, withDurable(time.Hour, "pt"))
	r := e.send(t, req{method: "PUT", path: "/v1/topics/pt/partitions", body: `{"partitions":4}`})
	expect(t, r, http.StatusOK)
	const jobs = 12
	for i := 0; i < jobs; i++ {
		expect(t, e.post(t, "/v1/topics/pt/jobs", fmt.Sprintf(`{"id":"o%d","delay_ms":60000}`, i)), http.StatusAccepted)
	}
	isPart := func(p string) bool { return strings.HasPrefix(p, "pt~4.") }

	page := decode[httpapi.LedgerPage](t, e.get(t, "/v1/ledger?topic=pt&limit=100"))
	parts := map[string]bool{}
	for _, row := range page.Rows {
		if row.Topic != "pt" || !isPart(row.Partition) {
			t.Fatalf("ledger row %s: topic %q partition %q", row.JobID, row.Topic, row.Partition)
		}
		parts[row.Partition] = true
	}
	if len(page.Rows) != jobs || len(parts) < 2 {
		t.Fatalf("GET /v1/ledger?topic=pt: %d rows over %d partitions, want %d over several", len(page.Rows), len(parts), jobs)
	}

	v := decode[httpapi.JobView](t, e.get(t, "/v1/topics/pt/jobs/o3"))
	if v.Topic != "pt" || !isPart(v.Partition) {
		t.Fatalf("job view: topic %q partition %q", v.Topic, v.Partition)
	}
	expect(t, e.del(t, "/v1/topics/pt/jobs/o3"), http.StatusOK)
	h := decode[httpapi.HistoryPage](t, e.get(t, "/v1/topics/pt/history"))
	if len(h.History) != 1 || h.History[0].JobID != "o3" || h.History[0].Topic != "pt" || h.History[0].Partition != v.Partition {
		t.Fatalf("history of pt: %+v, want o3's cancel in %s", h.History, v.Partition)
	}
}
