package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/testenv"
)

// With the embedded default and no instance on http.listen, every operator
// command refuses: exit 1, nothing on stdout (no table, no JSON claiming a
// result), and a message that says why and what to do. With --api the
// message names the flag; --api wins over a configured Redis.
func TestOperatorCommandsRefuseWithoutAnInstance(t *testing.T) {
	port := testenv.FreePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	commands := [][]string{
		{"enqueue", "mail", "w:1", "--payload", `{"to":"a@example.com"}`},
		{"cancel", "mail", "w:1"},
		{"reschedule", "mail", "w:1", "--in", "1h"},
		{"get", "mail", "w:1"},
		{"stats"},
		{"stats", "mail"},
		{"dead", "list", "mail"},
		{"jobs", "mail"},
		{"jobs", "mail", "--state", "retrying", "--after", "1_1"},
		{"dead", "requeue", "mail", "--all"},
		{"dead", "requeue", "mail", "w:1"},
		{"dead", "purge", "mail"},
		{"ledger", "list"},
		{"ledger", "stale"},
		{"recover"},
		{"recover", "--dry-run"},
		{"smoke"},
		{"pause", "mail"},
		{"resume", "mail"},
		{"schedules"},
	}
	for _, cmd := range commands {
		for _, jsonFlag := range []bool{false, true} {
			args := append([]string{}, cmd...)
			if jsonFlag {
				args = append(args, "--json")
			}
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, out, errOut := runCLI(t, append(args, "--listen", fmt.Sprintf("127.0.0.1:%d", port))...)
				if code != ExitFailure || out != "" {
					t.Fatalf("exit %d, stdout %q; want exit 1 and nothing on stdout", code, out)
				}
				for _, want := range []string{"no delayq instance answers at " + url, "delayq serve", "--api", "Nothing was done"} {
					if !strings.Contains(errOut, want) {
						t.Errorf("stderr %q lacks %q", errOut, want)
					}
				}
			})
		}
	}
	t.Run("--api", func(t *testing.T) {
		// A configured Redis would mean the direct path; --api says otherwise.
		code, out, errOut := runCLI(t, "enqueue", "mail", "w:1", "--redis", "127.0.0.1:6379", "--api", url)
		if code != ExitFailure || out != "" || !strings.Contains(errOut, "no delayq instance answers at "+url+" (--api, cli.api)") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// Bad input exits 2 before any request: nothing listens, so a request
// would have made it exit 1.
func TestBadInputExitsTwoBeforeAnyRequest(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, args := range [][]string{
		{"enqueue", "bad topic", "x"},
		{"enqueue", "mail", "bad id"},
		{"enqueue", "mail", "x", "--run-at", "yesterday"},
		{"get", "mail"},
		{"get", "mail", "bad id"},
		{"cancel", "bad topic", "x"},
		{"reschedule", "bad topic", "x", "--in", "1h"},
		{"reschedule", "mail", "bad id", "--by", "1h"},
		{"reschedule", "mail", "x"},
		{"reschedule", "mail", "x", "--in", "1h", "--by", "-1m"},
		{"reschedule", "mail", "x", "--at", "yesterday"},
		{"reschedule", "mail", "x", "--in", "-5m"},
		{"reschedule", "mail", "x", "--by", "soon"},
		{"stats", "bad topic"},
		{"pause", "bad topic"},
		{"resume", "a{b"},
		{"pause"},
		{"resume", "a", "b"},
		{"dead", "list", "mail", "--limit", "0"},
		{"jobs", "mail", "--limit", "0"},
		{"jobs", "mail", "--state", "done"},
		{"jobs", "mail", "--prefix", ""},
		{"jobs", "bad topic"},
		{"dead", "requeue", "mail"},
		{"ledger", "list", "--limit", "0"},
		{"ledger", "list", "--topic", "bad topic"},
		{"enqueue", "mail", "x", "--api", "127.0.0.1:8080"}, // not a URL
	} {
		code, out, errOut := runCLI(t, append(args, "--listen", listen)...)
		if code != ExitUsage || out != "" || strings.Contains(errOut, "no delayq instance answers") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 before any request", args, code, out, errOut)
		}
	}
}

func TestListenURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		"localhost:9000": "http://localhost:9000",
		":8080":          "http://127.0.0.1:8080",
		"0.0.0.0:8080":   "http://127.0.0.1:8080",
		"[::]:8080":      "http://[::1]:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"10.0.0.5:80":    "http://10.0.0.5:80",
	} {
		if got := listenURL(addr); got != want {
			t.Errorf("listenURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
