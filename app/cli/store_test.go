package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
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
		{"dead", "purge", "mail", "--all"},
		{"dead", "delete", "mail", "w:1"},
		{"ledger", "list"},
		{"ledger", "stale"},
		{"recover"},
		{"recover", "--dry-run"},
		{"smoke"},
		{"pause", "mail"},
		{"resume", "mail"},
		{"partitions", "mail"},
		{"partitions", "mail", "4"},
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
		{"partitions", "bad topic"},
		{"partitions", "mail", "0"},
		{"partitions", "mail", "257"},
		{"partitions", "mail", "four"},
		{"partitions", "mail", "4", "5"},
		{"enqueue", "mail", "x", "--partition-key", "bad key"},
		{"enqueue", "mail", "x", "--priority", "4"},
		{"enqueue", "mail", "x", "--priority", "-1"},
		{"dead", "list", "mail", "--limit", "0"},
		{"jobs", "mail", "--limit", "0"},
		{"jobs", "mail", "--state", "done"},
		{"jobs", "mail", "--prefix", ""},
		{"jobs", "bad topic"},
		{"dead", "requeue", "mail"},
		{"dead", "purge", "mail"},
		{"dead", "purge", "mail", "--all", "--older-than", "-1h"},
		{"dead", "list"},
		{"dead", "delete", "mail"},
		{"dead", "delete", "mail", "bad id"},
		{"dead", "delete", "bad topic", "x"},
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

// What is wrong with the arguments is said in the command's own words:
// which one is missing or extra, and its usage line; never cobra's count
// of arguments alone.
func TestArgumentProblemsSayWhatIsWrong(t *testing.T) {
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"dead", "list"}, []string{"missing TOPIC", "usage: delayq dead list TOPIC"}},
		{[]string{"get", "mail"}, []string{"missing ID", "usage: delayq get TOPIC ID"}},
		{[]string{"get", "mail", "a", "b"}, []string{`too many arguments: "b"`}},
		{[]string{"dead", "requeue", "mail"}, []string{"give the id of the dead job to requeue, or --all"}},
		{[]string{"dead", "requeue", "mail", "w:1", "--all"}, []string{"not both"}},
		{[]string{"dead", "purge", "mail"}, []string{"give --all"}},
	} {
		code, out, errOut := runCLI(t, append(c.args, "--listen", listen)...)
		if code != ExitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q", c.args, code, out)
		}
		for _, w := range c.want {
			if !strings.Contains(errOut, w) {
				t.Errorf("%v: stderr %q, want %q in it", c.args, errOut, w)
			}
		}
		if strings.Contains(errOut, "arg(s)") {
			t.Errorf("%v: cobra's wording: %q", c.args, errOut)
		}
	}
}

// A configuration file with a key delayq does not know, a value of the
// wrong type or out of range, or no such file, is bad configuration: exit
// 2, naming it.
func TestBadConfigurationFileExitsTwo(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct{ yaml, want string }{
		"unknown key": {"queue:\n  nosuch: 1\n", "nosuch"},
		"wrong type":  {"queue:\n  max_batch: lots\n", "max_batch"},
		"not YAML":    {"queue: [\n", "file"},
		"bad value":   {"worker:\n  topics:\n    sms: {oldest_every: 5000}\n", "worker.topics.sms.oldest_every"},
		"no file":     {"", "no such file"},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "_")+".yaml")
		if c.yaml != "" {
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		code, out, errOut := runCLI(t, "stats", "--config", path)
		if code != ExitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 2 naming %q", name, code, out, errOut, c.want)
		}
	}
}

// The root's help says where the operator commands find the jobs and names
// every one of them; each command's own help points there in two lines
// instead of repeating it, and shows an example.
func TestHelpNamesEveryOperatorCommandOnceWithExamples(t *testing.T) {
	code, root, _ := runCLI(t, "--help")
	if code != ExitOK || !strings.Contains(root, "Where the operator commands (") {
		t.Fatalf("root help: exit %d, %q", code, root)
	}
	where := root[strings.Index(root, "Where the operator commands ("):strings.Index(root, "find the jobs")]
	for _, c := range [][]string{
		{"enqueue"}, {"cancel"}, {"reschedule"}, {"get"}, {"jobs"}, {"stats"},
		{"dead", "list"}, {"dead", "requeue"}, {"dead", "purge"}, {"ledger", "list"}, {"ledger", "stale"},
		{"recover"}, {"smoke"}, {"pause"}, {"resume"}, {"schedules"},
	} {
		if !regexp.MustCompile(`[( \n]` + c[0] + `[,)]`).MatchString(where) {
			t.Errorf("root help leaves out %s: %q", c[0], where)
		}
		code, help, _ := runCLI(t, append(c, "--help")...)
		if code != ExitOK {
			t.Errorf("%v --help: exit %d", c, code)
		}
		if strings.Contains(help, "Where the operator commands") || !strings.Contains(help, "see delayq --help") {
			t.Errorf("%v --help repeats the root's paragraph or does not point at it:\n%s", c, help)
		}
		if !strings.Contains(help, "Examples:\n  delayq "+strings.Join(c, " ")) {
			t.Errorf("%v --help shows no example:\n%s", c, help)
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
