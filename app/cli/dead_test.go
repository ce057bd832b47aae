package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// dead delete removes one dead job, on Redis directly and through an
// instance's API; a job that is not dead exits 3 and is left alone; --json
// answers as the API does.
func TestDeadDeleteRemovesOneJob(t *testing.T) {
	q, cfgPath, api := directAndAPI(t)
	ctx := testenv.Context(t)
	for _, id := range []string{"d:1", "d:2"} {
		if _, err := q.Enqueue(ctx, "mail", queue.NewJob{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Enqueue(ctx, "mail", queue.NewJob{ID: "alive", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	cl, err := q.Claim(ctx, "mail", 2, time.Minute)
	if err != nil || len(cl.Jobs) != 2 {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	if _, _, err := q.Bury(ctx, []queue.DeadJob{{Job: cl.Jobs[0], Error: "x"}, {Job: cl.Jobs[1], Error: "x"}}); err != nil {
		t.Fatal(err)
	}

	code, out, errOut := runCLI(t, "dead", "delete", "mail", "d:1", "--config", cfgPath)
	if code != ExitOK || out != "deleted dead job d:1 of mail\n" {
		t.Fatalf("direct: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runCLI(t, "dead", "delete", "mail", "d:2", "--json", "--api", api)
	if code != ExitOK || !strings.Contains(out, `"deleted": true`) || !strings.Contains(out, `"id": "d:2"`) {
		t.Fatalf("via the API: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, id := range []string{"d:1", "d:2"} {
		if info, err := q.Get(ctx, "mail", id); err != nil || info.State != queue.StateUnknown {
			t.Errorf("%s after dead delete: %+v %v", id, info, err)
		}
	}
	for _, via := range [][]string{{"--config", cfgPath}, {"--api", api}} {
		code, out, errOut := runCLI(t, append([]string{"dead", "delete", "mail", "alive"}, via...)...)
		if code != ExitNotFound || out != "" || !strings.Contains(errOut, "no dead job alive in mail") {
			t.Errorf("a waiting job %v: exit %d, stdout %q, stderr %q", via[0], code, out, errOut)
		}
	}
	if info, err := q.Get(ctx, "mail", "alive"); err != nil || info.State != queue.StateWaiting {
		t.Errorf("the waiting job after a refused delete: %+v %v", info, err)
	}
}
