package cli

import (
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
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
