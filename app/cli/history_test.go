package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// history shows what became of a job after it left Redis and the ledger:
// here a cancel, by id and for the topic; bad flags are exit 2.
func TestHistoryCommand(t *testing.T) {
	_, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "")
	if code, _, errOut := runCLI(t, "migrate", "--config", cfgPath); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	for _, c := range [][]string{{"enqueue", "mail", "welcome:1", "--delay", "1h"}, {"cancel", "mail", "welcome:1"}} {
		if code, _, errOut := runCLI(t, append(c, "--config", cfgPath)...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c, code, errOut)
		}
	}
	code, out, errOut := runCLI(t, "history", "mail", "welcome:1", "--json", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, `"outcome": "cancelled"`) || !strings.Contains(out, `"id": "welcome:1"`) {
		t.Fatalf("history --json: exit %d, %s %s", code, out, errOut)
	}
	code, out, _ = runCLI(t, "history", "mail", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, "welcome:1") || !strings.Contains(out, "cancelled") || !strings.Contains(out, "FIRST CLAIMED") {
		t.Fatalf("history table: exit %d, %s", code, out)
	}
	if code, out, _ := runCLI(t, "history", "mail", "nope", "--config", cfgPath); code != ExitOK || !strings.Contains(out, "no history of mail/nope") {
		t.Fatalf("history of nothing: exit %d, %s", code, out)
	}
	for _, c := range [][]string{
		{"history", "mail", "--outcome", "done"},
		{"history", "mail", "a", "--prefix", "b"},
		{"history", "mail", "--limit", "0"},
		{"history", "mail", "--since", "1h", "--from", "2026-01-01T00:00:00Z"},
		{"history", "mail", "--until", "yesterday"},
		{"history", "bad topic"},
		{"history"},
	} {
		if code, _, errOut := runCLI(t, append(c, "--config", cfgPath)...); code != ExitUsage {
			t.Errorf("%v: exit %d, %s; want 2", c, code, errOut)
		}
	}
}

// An enqueue or a pause of a topic no live worker handles works, and says
// so in one line on stderr; stats flags the topic once it has jobs due;
// workers lists the registry. With a worker for the topic, no note.
func TestNobodyConsumesIsSaid(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	cfgPath := directConfig(t, ns, "")
	if code, _, errOut := runCLI(t, "migrate", "--config", cfgPath); code != ExitOK {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	const note = "no running worker handles emails"
	code, _, errOut := runCLI(t, "enqueue", "emails", "w:1", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(errOut, note) {
		t.Fatalf("enqueue: exit %d, stderr %s", code, errOut)
	}
	code, out, _ := runCLI(t, "stats", "emails", "--json", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, `"consumers": 0`) || !strings.Contains(out, `"unconsumed": true`) {
		t.Fatalf("stats --json: exit %d, %s", code, out)
	}
	if code, out, _ := runCLI(t, "stats", "emails", "--config", cfgPath); code != ExitOK || !strings.Contains(out, "none: its due jobs wait") {
		t.Fatalf("stats: exit %d, %s", code, out)
	}
	if code, out, _ := runCLI(t, "workers", "--config", cfgPath); code != ExitOK || !strings.Contains(out, "no workers") {
		t.Fatalf("workers: exit %d, %s", code, out)
	}
	// A live worker of emails, as a running process writes it.
	now, err := rdb.Time(testenv.Context(t)).Result()
	if err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf(`{"id":"h:1","host":"h","pid":1,"started_at":%d,"heartbeat":%d,"every_ms":60000,"topics":[{"topic":"emails","concurrency":4,"in_flight":0}]}`,
		now.UnixMilli(), now.UnixMilli())
	if err := rdb.HSet(testenv.Context(t), ns+":workers", "h:1", entry).Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range [][]string{{"enqueue", "emails", "w:2"}, {"pause", "emails"}} {
		if code, _, errOut := runCLI(t, append(c, "--config", cfgPath)...); code != ExitOK || strings.Contains(errOut, note) {
			t.Errorf("%v with a worker: exit %d, stderr %s", c, code, errOut)
		}
	}
	if code, _, errOut := runCLI(t, "pause", "emials", "--config", cfgPath); code != ExitOK || !strings.Contains(errOut, "no running worker handles emials") {
		t.Errorf("pause of a typo: exit %d, stderr %s", code, errOut)
	}
	code, out, _ = runCLI(t, "workers", "--json", "--config", cfgPath)
	if code != ExitOK || !strings.Contains(out, `"state": "live"`) || !strings.Contains(out, `"topic": "emails"`) {
		t.Fatalf("workers --json: exit %d, %s", code, out)
	}
	if code, out, _ := runCLI(t, "stats", "emails", "--json", "--config", cfgPath); code != ExitOK || !strings.Contains(out, `"consumers": 1`) {
		t.Fatalf("stats with a worker: %s", out)
	}
}

// The table shows a job's result as its JSON, cut at resultMax characters,
// and "-" for none.
func TestResultText(t *testing.T) {
	long := `{"note":"` + strings.Repeat("é", 80) + `"}`
	for _, c := range []struct {
		in   ledger.JobResult
		want string
	}{
		{nil, "-"},
		{ledger.JobResult(`{"did":"closed"}`), `{"did":"closed"}`},
		{ledger.JobResult(long), string([]rune(long)[:resultMax-1]) + "…"},
	} {
		if got := resultText(c.in); got != c.want {
			t.Errorf("resultText(%s) = %q, want %q", c.in, got, c.want)
		}
	}
}
