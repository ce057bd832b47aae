// Package examples_test keeps docs/http-targets.md and examples/ honest: it
// signs requests the way the request format of an HTTP-target topic says
// (its own implementation, independent of the delivery code), runs every
// verification snippet of the page exactly as written there and the PHP
// receiver example against them, and checks the page's signed example. A
// language whose interpreter is not installed skips and says which.
package examples_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"go/format"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/httptarget"
	"github.com/delayq/delayq/queue"
)

const (
	httpTargetsDoc = "../docs/http-targets.md"
	secret         = "test-secret-5b1f0d2a"
	secretEnv      = "WEBHOOK_SECRET" // the variable the snippets and the receiver read
)

// delivery is one call of an HTTP-target topic, as the request format of
// docs/http-targets.md describes it.
type delivery struct {
	topic, jobID    string
	attempt, max    int
	delivery        int   // Delayq-Delivery; 0 = 1
	dueAt           int64 // Unix ms
	body            []byte
	sentAt          time.Time
	secret          string // "" = no signature
	signedBody      []byte // when set, the body the signature covers (a tampered request)
	timestampHeader string // when set, the Delayq-Timestamp sent instead of sentAt's
}

// sign is the signature scheme: v1= and the lowercase hex HMAC-SHA256, keyed
// with the secret, of the timestamp header's value, a dot and the body.
func sign(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte("."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// headers returns the request's headers, in the order the page's table
// lists them.
func (d delivery) headers() [][2]string {
	ct := "application/octet-stream"
	if json.Valid(d.body) {
		ct = "application/json"
	}
	ts := strconv.FormatInt(d.sentAt.Unix(), 10)
	if d.timestampHeader != "" {
		ts = d.timestampHeader
	}
	h := [][2]string{
		{"Content-Type", ct},
		{"Delayq-Topic", d.topic},
		{"Delayq-Job-Id", d.jobID},
		{"Delayq-Attempt", strconv.Itoa(d.attempt)},
		{"Delayq-Delivery", strconv.Itoa(max(d.delivery, 1))},
		{"Delayq-Max-Attempts", strconv.Itoa(d.max)},
		{"Delayq-Due-At", strconv.FormatInt(d.dueAt, 10)},
		{"Idempotency-Key", d.topic + ":" + d.jobID},
		{"Delayq-Timestamp", ts},
	}
	if d.secret != "" {
		signed := d.body
		if d.signedBody != nil {
			signed = d.signedBody
		}
		h = append(h, [2]string{"Delayq-Signature", sign(d.secret, ts, signed)})
	}
	return h
}

// send posts d to url and returns the answer's status and body.
func send(t *testing.T, ctx context.Context, url string, d delivery) (int, string) {
	t.Helper()
	status, body, err := post(ctx, url, d)
	if err != nil {
		t.Fatal(err)
	}
	return status, body
}

// post is send for goroutines other than the test's.
func post(ctx context.Context, url string, d delivery) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.body))
	if err != nil {
		return 0, "", err
	}
	for _, kv := range d.headers() {
		req.Header.Set(kv[0], kv[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("POST %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, "", fmt.Errorf("POST %s: reading the answer: %w", url, err)
	}
	return resp.StatusCode, string(b), nil
}

func readDoc(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(httpTargetsDoc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// snippetRE finds the page's verification snippets: a marker naming the
// language, then its fenced block.
var snippetRE = regexp.MustCompile("(?s)<!-- verify-snippet: ([a-z]+) -->\n```[a-z]+\n(.*?)```")

// snippets returns the page's snippets by language, failing when one of
// the four is missing or a code block of theirs is not marked (so a new
// snippet cannot go untested).
func snippets(t *testing.T) map[string]string {
	t.Helper()
	doc := readDoc(t)
	out := map[string]string{}
	for _, m := range snippetRE.FindAllStringSubmatch(doc, -1) {
		if _, dup := out[m[1]]; dup {
			t.Fatalf("%s: two %s snippets", httpTargetsDoc, m[1])
		}
		out[m[1]] = m[2]
	}
	for _, lang := range []string{"php", "python", "node", "go"} {
		if out[lang] == "" {
			t.Fatalf("%s has no <!-- verify-snippet: %s --> block", httpTargetsDoc, lang)
		}
	}
	fences := regexp.MustCompile("(?m)^```(php|python|js|go)$").FindAllString(doc, -1)
	if len(fences) != len(out) {
		t.Fatalf("%s has %d php/python/js/go blocks, %d of them after a verify-snippet marker", httpTargetsDoc, len(fences), len(out))
	}
	return out
}

// receiver is a process a test started that serves HTTP on port; it and
// the children it forked are killed (by its process group) on cleanup.
type receiver struct {
	url  string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	done chan struct{}
}

func (r *receiver) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.Write(b)
}

func (r *receiver) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

// startReceiver runs name with args in dir, PORT set to a free port and the
// secret in WEBHOOK_SECRET, and waits until the port takes connections.
func startReceiver(t *testing.T, dir string, env []string, name string, args ...string) *receiver {
	t.Helper()
	port := testenv.FreePort(t)
	r := &receiver{url: fmt.Sprintf("http://127.0.0.1:%d/", port), done: make(chan struct{})}
	for i, a := range args {
		args[i] = strings.ReplaceAll(a, "{port}", strconv.Itoa(port))
	}
	r.cmd = exec.Command(name, args...)
	r.cmd.Dir = dir
	r.cmd.Env = append(os.Environ(), "PORT="+strconv.Itoa(port), secretEnv+"="+secret)
	r.cmd.Env = append(r.cmd.Env, env...)
	r.cmd.Stdout, r.cmd.Stderr = r, r
	r.cmd.WaitDelay = 10 * time.Second // a child that keeps the output open cannot hang the cleanup
	ownGroup(r.cmd)
	if err := r.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	t.Cleanup(func() {
		killGroup(r.cmd)
		<-r.done
		if t.Failed() {
			t.Logf("output of %s %s:\n%s", name, strings.Join(args, " "), r.output())
		}
	})
	exited := func() bool {
		select {
		case <-r.done:
			return true
		default:
			return false
		}
	}
	testenv.WaitFor(testenv.Context(t), t, name+" to listen on port "+strconv.Itoa(port), func() bool {
		if exited() {
			return true
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
	if exited() {
		t.Fatalf("%s exited before it listened:\n%s", name, r.output())
	}
	return r
}

// lookPath returns the path of an interpreter, or skips the test, saying
// what is not run, when it is not installed.
func lookPath(t *testing.T, name, what string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s is not installed: %s is not run", name, what)
	}
	return p
}

func snippetName(lang string) string {
	return "the " + lang + " snippet of " + httpTargetsDoc
}

// TestVerifySnippets runs each verification snippet of docs/http-targets.md,
// as written there, as a receiver and sends it signed requests: the good
// ones must get 200, every forgery 401.
func TestVerifySnippets(t *testing.T) {
	snips := snippets(t)
	start := map[string]func(t *testing.T, dir string) *receiver{
		"php": func(t *testing.T, dir string) *receiver {
			php := lookPath(t, "php", snippetName("php"))
			write(t, dir, "verify.php", snips["php"])
			return startReceiver(t, dir, nil, php, "-S", "127.0.0.1:{port}", "verify.php")
		},
		"python": func(t *testing.T, dir string) *receiver {
			py := lookPath(t, "python3", snippetName("python"))
			write(t, dir, "verify.py", snips["python"])
			return startReceiver(t, dir, nil, py, "verify.py")
		},
		"node": func(t *testing.T, dir string) *receiver {
			node := lookPath(t, "node", snippetName("node"))
			write(t, dir, "verify.js", snips["node"])
			return startReceiver(t, dir, nil, node, "verify.js")
		},
		"go": func(t *testing.T, dir string) *receiver {
			goBin := lookPath(t, "go", snippetName("go"))
			if got, err := format.Source([]byte(snips["go"])); err != nil || string(got) != snips["go"] {
				t.Errorf("the Go snippet is not gofmt'ed (err %v)", err)
			}
			write(t, dir, "main.go", snips["go"])
			write(t, dir, "go.mod", "module verify\n\ngo 1.22\n")
			for _, args := range [][]string{{"vet", "main.go"}, {"build", "-o", "verify", "main.go"}} {
				cmd := exec.Command(goBin, args...)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOFLAGS=", "GOTOOLCHAIN=local")
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
				}
			}
			return startReceiver(t, dir, nil, filepath.Join(dir, "verify"))
		},
	}
	for _, lang := range []string{"php", "python", "node", "go"} {
		t.Run(lang, func(t *testing.T) {
			t.Parallel()
			r := start[lang](t, t.TempDir())
			checkVerifier(t, r.url)
			checkDelayqDelivers(t, r.url)
		})
	}
}

// checkDelayqDelivers sends a receiver that verifies signatures deliveries
// made by delayq's own delivery code (jobs/httptarget), not this file's
// signer: a job with the right secret is done, one with another secret is
// refused for good (401 is permanent).
func checkDelayqDelivers(t *testing.T, url string) {
	t.Helper()
	ctx := testenv.Context(t)
	job := &queue.Job{Topic: "billing", ID: "invoice:42", Payload: []byte(`{"order_no":"42"}`),
		Attempt: 1, MaxAttempts: 5, RunAt: time.Now().UnixMilli()}
	for _, c := range []struct {
		secret string
		ok     bool
	}{{secret, true}, {"another-secret", false}} {
		tg, err := httptarget.New(httptarget.Config{URL: url, Secret: []byte(c.secret), Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		err = tg.Handle(ctx, job)
		tg.Close()
		switch {
		case c.ok && err != nil:
			t.Errorf("delayq's delivery with the right secret: %v", err)
		case !c.ok && !errors.Is(err, queue.ErrSkipRetry):
			t.Errorf("delayq's delivery with another secret: %v, want a permanent failure", err)
		}
	}
}

// checkVerifier sends a receiver that verifies signatures good requests and
// forgeries, each forgery changing one thing of a good one.
func checkVerifier(t *testing.T, url string) {
	ctx := testenv.Context(t)
	now := time.Now()
	good := delivery{topic: "shop_order_close", jobID: "order:1001", attempt: 1, max: 5,
		dueAt: now.UnixMilli(), body: []byte(`{"order_no": "1001"}`), sentAt: now, secret: secret}
	binary := good
	binary.body = []byte{0x00, 0xff, 0xfe, '.', '\n', 0x80}
	retry := good
	retry.attempt, retry.sentAt = 2, now.Add(-time.Minute)
	empty := good
	empty.body = []byte{}

	tampered := good
	tampered.signedBody = good.body
	tampered.body = []byte(`{"order_no": "1002"}`)
	old := good
	old.sentAt = now.Add(-10 * time.Minute)
	future := good
	future.sentAt = now.Add(10 * time.Minute)
	wrongSecret := good
	wrongSecret.secret = "another-secret"
	unsigned := good
	unsigned.secret = ""
	signedMs := good
	signedMs.timestampHeader = strconv.FormatInt(now.UnixMilli(), 10) // milliseconds: far in the future
	notANumber := good
	notANumber.timestampHeader = "1e9"
	uppercase := good // the signature is lowercase hex; another spelling is another signature

	cases := []struct {
		name   string
		d      delivery
		mutate func(h http.Header)
		want   int
	}{
		{"good", good, nil, http.StatusOK},
		{"good, binary body", binary, nil, http.StatusOK},
		{"good, empty body", empty, nil, http.StatusOK},
		{"good, a retry signed a minute ago", retry, nil, http.StatusOK},
		{"tampered body", tampered, nil, http.StatusUnauthorized},
		{"timestamp 10 minutes old", old, nil, http.StatusUnauthorized},
		{"timestamp 10 minutes ahead", future, nil, http.StatusUnauthorized},
		{"wrong secret", wrongSecret, nil, http.StatusUnauthorized},
		{"no signature", unsigned, nil, http.StatusUnauthorized},
		{"no timestamp", good, func(h http.Header) { h.Del("Delayq-Timestamp") }, http.StatusUnauthorized},
		{"timestamp in milliseconds", signedMs, nil, http.StatusUnauthorized},
		{"timestamp not decimal", notANumber, nil, http.StatusUnauthorized},
		{"signature in uppercase hex", uppercase, func(h http.Header) {
			h.Set("Delayq-Signature", "v1="+strings.ToUpper(strings.TrimPrefix(h.Get("Delayq-Signature"), "v1=")))
		}, http.StatusUnauthorized},
		{"signature without v1=", good, func(h http.Header) {
			h.Set("Delayq-Signature", strings.TrimPrefix(h.Get("Delayq-Signature"), "v1="))
		}, http.StatusUnauthorized},
	}
	for _, c := range cases {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(c.d.body))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range c.d.headers() {
			req.Header.Set(kv[0], kv[1])
		}
		if c.mutate != nil {
			c.mutate(req.Header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSignedExample checks the request the page shows: its signature is the
// one for its timestamp, body and the secret its marker names, and its
// headers are the ones of the format, in the table's order.
func TestSignedExample(t *testing.T) {
	doc := readDoc(t)
	m := regexp.MustCompile("(?s)<!-- signed-example: ([^ ]+) -->\n```http\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no <!-- signed-example: SECRET --> http block", httpTargetsDoc)
	}
	head, body, ok := strings.Cut(m[2], "\n\n")
	if !ok {
		t.Fatalf("the example has no blank line between its headers and its body:\n%s", m[2])
	}
	body = strings.TrimSuffix(body, "\n")
	lines := strings.Split(head, "\n")
	if lines[0] != "POST / HTTP/1.1" {
		t.Errorf("request line %q", lines[0])
	}
	got := map[string]string{}
	var names []string
	for _, l := range lines[1:] {
		k, v, ok := strings.Cut(l, ": ")
		if !ok {
			t.Fatalf("header line %q", l)
		}
		got[k] = v
		names = append(names, k)
	}
	atoi := func(k string) int64 {
		n, err := strconv.ParseInt(got[k], 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return n
	}
	d := delivery{topic: got["Delayq-Topic"], jobID: got["Delayq-Job-Id"], attempt: int(atoi("Delayq-Attempt")), delivery: int(atoi("Delayq-Delivery")),
		max: int(atoi("Delayq-Max-Attempts")), dueAt: atoi("Delayq-Due-At"), body: []byte(body),
		sentAt: time.Unix(atoi("Delayq-Timestamp"), 0), secret: m[1]}
	var want []string
	for _, kv := range d.headers() {
		want = append(want, kv[0])
		if got[kv[0]] != kv[1] {
			t.Errorf("%s: %q, want %q", kv[0], got[kv[0]], kv[1])
		}
	}
	if names = slices.DeleteFunc(names, func(n string) bool { return n == "Host" }); !slices.Equal(names, want) {
		t.Errorf("headers %q, want %q", names, want)
	}

	// The page's table of headers lists the same ones (Content-Type is
	// described above it).
	var table []string
	for _, row := range regexp.MustCompile("(?m)^\\| `([A-Za-z-]+)` \\| ").FindAllStringSubmatch(doc, -1) {
		if strings.Contains(row[1], "-") {
			table = append(table, row[1])
		}
	}
	if !slices.Equal(table, want[1:]) {
		t.Errorf("the header table lists %q, want %q", table, want[1:])
	}
}

// TestConfigBlocksAgree checks that the three-line configuration is the
// same in README.md, docs/http-targets.md and the PHP receiver's README, and
// that each page's enqueue sends the payload the page's example shows.
func TestConfigBlocksAgree(t *testing.T) {
	yamlRE := regexp.MustCompile("(?s)```yaml\n(worker:\n  topics:\n.*?)```")
	want := yamlRE.FindStringSubmatch(readDoc(t))
	if want == nil {
		t.Fatalf("%s has no worker.topics yaml block", httpTargetsDoc)
	}
	for _, page := range []string{"../README.md", "php-receiver/README.md"} {
		b, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		got := yamlRE.FindStringSubmatch(string(b))
		if got == nil || got[1] != want[1] {
			t.Errorf("%s: configuration %q, want %s's %q", page, got, httpTargetsDoc, want[1])
		}
		if !strings.Contains(string(b), `"payload": {"order_no":"1001"}`) {
			t.Errorf("%s: no enqueue of the payload {\"order_no\":\"1001\"}", page)
		}
	}
}
