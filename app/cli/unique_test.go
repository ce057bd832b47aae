package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// delayq enqueue of a finished job's id inside the topic's uniqueness window
// says duplicate, how the job ended and until when its id is taken, directly
// and through the API; delayq stats shows the window.
func TestEnqueueInsideTheUniquenessWindow(t *testing.T) {
	e := newCLIEnv(t, "queue: {topics: {pay: {unique_for: 1h}}}\n", queue.Config{TopicUniqueFor: map[string]time.Duration{"pay": time.Hour}})
	q, cfgPath, api := e.q, e.cfg, e.api
	ctx := testenv.Context(t)
	for _, id := range []string{"a", "b"} {
		if code, _, errOut := runCLI(t, "enqueue", "pay", id, "--config", cfgPath); code != ExitOK {
			t.Fatalf("enqueue %s: exit %d: %s", id, code, errOut)
		}
	}
	c, err := q.Claim(ctx, "pay", 2, time.Minute)
	if err != nil || len(c.Jobs) != 2 {
		t.Fatalf("claim: %v", err)
	}
	if _, err := q.Ack(ctx, []queue.Ref{c.Jobs[0].Ref(), c.Jobs[1].Ref()}); err != nil {
		t.Fatal(err)
	}
	for _, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		code, out, errOut := runCLI(t, append([]string{"enqueue", "pay", "a", "--json"}, via...)...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", via, code, errOut)
		}
		var got struct {
			Duplicate bool                  `json:"duplicate"`
			Finished  *httpapi.FinishedView `json:"finished"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%v: %v: %s", via, err, out)
		}
		if !got.Duplicate || got.Finished == nil || got.Finished.Outcome != "succeeded" || got.Finished.TakenUntil < time.Now().Add(50*time.Minute).UnixMilli() {
			t.Fatalf("%v: %s", via, out)
		}
		code, out, _ = runCLI(t, append([]string{"enqueue", "pay", "b"}, via...)...)
		if code != ExitOK || !strings.Contains(out, "finished (succeeded); the id is taken until") {
			t.Fatalf("%v: exit %d: %s", via, code, out)
		}
		code, out, _ = runCLI(t, append([]string{"stats", "pay"}, via...)...)
		if code != ExitOK || !strings.Contains(out, "UNIQUE FOR") || !strings.Contains(out, "1h0m0s") {
			t.Fatalf("stats %v: exit %d: %s", via, code, out)
		}
	}
	if code, _, errOut := runCLI(t, "enqueue", "pay", "a", "--config", directConfig(t, e.ns, "queue: {topics: {pay: {unique_for: -1h}}}\n")); code != ExitUsage ||
		!strings.Contains(errOut, "queue.topics.pay.unique_for") {
		t.Fatalf("a bad window: exit %d: %s", code, errOut)
	}
}
