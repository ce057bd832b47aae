package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// enqueue --priority reaches the queue, on Redis directly and through an
// instance's API: of two due jobs the one of priority 3 is claimed first,
// though enqueued last. get, jobs and dead list show each job's priority,
// in a PRIORITY column and as "priority" in --json.
func TestEnqueuePriorityIsKeptAndShown(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	ctx := testenv.Context(t)
	for i, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		topic := fmt.Sprintf("pri%d", i)
		cli := func(args ...string) (int, string, string) { return runCLI(t, append(args, via...)...) }
		for _, args := range [][]string{
			{"enqueue", topic, "low"},
			{"enqueue", topic, "high", "--priority", "3"},
			{"enqueue", topic, "later", "--priority", "2", "--delay", "1h"},
		} {
			if code, out, errOut := cli(args...); code != ExitOK {
				t.Fatalf("%v %v: exit %d, stdout %q, stderr %q", args, via[0], code, out, errOut)
			}
		}

		code, out, errOut := cli("get", topic, "later")
		if code != ExitOK || cell(out, "PRIORITY", 1) != "2" {
			t.Errorf("get %v: exit %d, stdout %q, stderr %q; want 2 under PRIORITY", via[0], code, out, errOut)
		}
		code, out, errOut = cli("get", topic, "later", "--json")
		if code != ExitOK || !strings.Contains(out, `"priority": 2`) {
			t.Errorf("get --json %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
		code, out, errOut = cli("jobs", topic)
		if code != ExitOK {
			t.Fatalf("jobs %v: exit %d, stderr %q", via[0], code, errOut)
		}
		got := map[string]string{}
		for n := 1; cell(out, "ID", n) != ""; n++ {
			got[cell(out, "ID", n)] = cell(out, "PRIORITY", n)
		}
		if want := map[string]string{"low": "0", "high": "3", "later": "2"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("jobs %v: priorities %v, want %v; stdout %q", via[0], got, want, out)
		}
		code, out, errOut = cli("jobs", topic, "--json")
		if code != ExitOK || strings.Count(out, `"priority": 3`) != 1 || strings.Count(out, `"priority": 0`) != 1 {
			t.Errorf("jobs --json %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}

		cl, err := q.Claim(ctx, topic, 1, time.Minute)
		if err != nil || len(cl.Jobs) != 1 || cl.Jobs[0].ID != "high" || cl.Jobs[0].Priority != 3 {
			t.Fatalf("claim %v: %+v, %v; want high, of priority 3, before the older low", via[0], cl, err)
		}
		// Dead, it shows the priority a requeue puts it back at.
		if _, _, err := q.Bury(ctx, []queue.DeadJob{{Job: cl.Jobs[0], Error: "x"}}); err != nil {
			t.Fatal(err)
		}
		code, out, errOut = cli("dead", "list", topic)
		if code != ExitOK || cell(out, "ID", 1) != "high" || cell(out, "PRIORITY", 1) != "3" {
			t.Errorf("dead list %v: exit %d, stdout %q, stderr %q; want high with 3 under PRIORITY", via[0], code, out, errOut)
		}
		code, out, errOut = cli("dead", "list", topic, "--json")
		if code != ExitOK || !strings.Contains(out, `"priority": 3`) {
			t.Errorf("dead list --json %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
	}
}

// A priority out of range is refused by the flag's name, exit 2, and
// nothing is written.
func TestEnqueueRefusesABadPriority(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	for _, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		for _, p := range []string{"4", "-1", "high", "0x3", "010", "1.5"} {
			code, out, errOut := runCLI(t, append([]string{"enqueue", "mail", "x", "--priority", p}, via...)...)
			if code != ExitUsage || out != "" || !strings.Contains(errOut, "--priority") || strings.Contains(errOut, "invalid_priority") {
				t.Errorf("--priority %s %v: exit %d, stdout %q, stderr %q; want exit 2 naming --priority", p, via[0], code, out, errOut)
			}
		}
	}
	if info, err := q.Get(testenv.Context(t), "mail", "x"); err != nil || info.State != queue.StateUnknown {
		t.Errorf("after the refused enqueues: %+v, %v; want no job", info, err)
	}
}

// cell is the text under column name in the n-th line after the header
// (n from 1) of a table the CLI printed, "" past its last line. tabwriter
// pads every column to one start, so the cell starts where its name does.
func cell(out, name string, n int) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	at := strings.Index(lines[0], name)
	if at < 0 || n >= len(lines) || len(lines[n]) <= at || lines[n][at] == ' ' || lines[n][at] == '(' {
		return ""
	}
	if f := strings.Fields(lines[n][at:]); len(f) > 0 {
		return f[0]
	}
	return ""
}
