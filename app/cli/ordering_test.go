package cli

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// enqueue --ordering-key reaches the queue, on Redis directly and through
// an instance's API: of two due jobs of one key only the first is claimed
// while it runs; get and jobs show the key and the second as parked, in
// columns and in --json.
func TestEnqueueOrderingKeyIsKeptAndShown(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	ctx := testenv.Context(t)
	for i, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		topic := fmt.Sprintf("ord%d", i)
		cli := func(args ...string) (int, string, string) { return runCLI(t, append(args, via...)...) }
		for _, args := range [][]string{
			{"enqueue", topic, "first", "--ordering-key", "order:1"},
			{"enqueue", topic, "second", "--ordering-key", "order:1"},
			{"enqueue", topic, "other", "--ordering-key", "order:2"},
		} {
			if code, out, errOut := cli(args...); code != ExitOK {
				t.Fatalf("%v %v: exit %d, stdout %q, stderr %q", args, via[0], code, out, errOut)
			}
		}
		code, out, errOut := cli("get", topic, "second")
		if code != ExitOK || cell(out, "ORDERING KEY", 1) != "order:1" || !strings.Contains(out, "(parked)") {
			t.Errorf("get %v: exit %d, stdout %q, stderr %q; want order:1, parked", via[0], code, out, errOut)
		}
		code, out, errOut = cli("jobs", topic, "--json")
		if code != ExitOK || strings.Count(out, `"ordering_key": "order:1"`) != 2 || strings.Count(out, `"parked": true`) != 1 {
			t.Errorf("jobs --json %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
		cl, err := q.Claim(ctx, topic, 10, time.Minute)
		if err != nil || len(cl.Jobs) != 2 || cl.Jobs[0].ID == "second" || cl.Jobs[1].ID == "second" {
			t.Fatalf("claim %v: %+v, %v; want first and other, not second", via[0], cl, err)
		}
	}
}

// A bad --ordering-key, or a --partition-key that differs from it, is
// refused by the flag's name (exit 2), and nothing is written.
func TestEnqueueRefusesABadOrderingKey(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	for _, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		for _, args := range [][]string{
			{"--ordering-key", "a|b"}, {"--ordering-key", ""}, {"--ordering-key", strings.Repeat("k", 201)},
			{"--ordering-key", "k", "--partition-key", "p"},
		} {
			code, out, errOut := runCLI(t, append(append([]string{"enqueue", "mail", "x"}, args...), via...)...)
			flag := args[len(args)-2]
			if code != ExitUsage || out != "" || !strings.Contains(errOut, flag) {
				t.Errorf("%v %v: exit %d, stdout %q, stderr %q; want exit 2 naming %s", args, via[0], code, out, errOut, flag)
			}
		}
	}
	if info, err := q.Get(testenv.Context(t), "mail", "x"); err != nil || info.State != queue.StateUnknown {
		t.Errorf("after the refused enqueues: %+v, %v; want no job", info, err)
	}
}
