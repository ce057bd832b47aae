package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
)

// secRoutes are every route that takes a topic, with a body each accepts.
var secRoutes = []struct {
	method, path, body string // path: %s is the escaped topic
}{
	{"POST", "/v1/topics/%s/jobs", `{"id":"a","payload":{"x":1}}`},
	{"POST", "/v1/topics/%s/jobs:batch", `{"jobs":[{"id":"a"}]}`},
	{"GET", "/v1/topics/%s/jobs", ""},
	{"GET", "/v1/topics/%s/jobs?state=dead", ""},
	{"GET", "/v1/topics/%s/jobs/a", ""},
	{"DELETE", "/v1/topics/%s/jobs/a", ""},
	{"GET", "/v1/topics/%s", ""},
	{"GET", "/v1/topics/%s/dead", ""},
	{"POST", "/v1/topics/%s/dead/requeue", `{"all":true}`},
	{"POST", "/v1/topics/%s/dead/requeue", `{"id":"a"}`},
	{"POST", "/v1/topics/%s/dead/purge", `{}`},
}

// TestBadTopicsWriteNothing sends every topic route topics that would
// break out of the {topic} hash tag or the namespace, or glob other keys:
// each is refused with 400 invalid_topic (or never reaches a route), and
// neither Redis nor the ledger gets anything.
func TestBadTopicsWriteNothing(t *testing.T) {
	const token = "sec-token-0123456789abcdef"
	bad := []string{"a}b", "a{b}", "{x}", "../x", "..%2Fx", "a:b", "x:*", "a*", "a?b", "a b", "a\nb", "a\x00b", "ä", strings.Repeat("t", 65)}
	forEachBackend(t, func(t *testing.T, e *env) {
		for _, topic := range bad {
			for _, r := range secRoutes {
				path := fmt.Sprintf(r.path, url.PathEscape(topic))
				res := e.send(t, req{method: r.method, path: path, body: r.body})
				if res.status != http.StatusBadRequest {
					t.Errorf("%s %s: %d %s, want 400", r.method, path, res.status, res.body)
					continue
				}
				if d := decode[httpapi.ErrorResponse](t, res).Error; d.Code != httpapi.CodeInvalidTopic || d.Field != "topic" {
					t.Errorf("%s %s: %+v, want invalid_topic", r.method, path, d)
				}
			}
			res := e.get(t, "/v1/ledger/inflight?topic="+url.QueryEscape(topic))
			if res.status != http.StatusBadRequest {
				t.Errorf("ledger/inflight?topic=%q: %d %s, want 400", topic, res.status, res.body)
			}
		}
		// Unescaped dot segments: ServeMux cleans the path, so the request
		// never reaches a topic route; whatever it answers, it is no success.
		for _, path := range []string{"/v1/topics/../x/jobs", "/v1/topics/./jobs", "/v1/topics/a/../../x/jobs"} {
			for _, method := range []string{"POST", "GET", "DELETE"} {
				body := ""
				if method == "POST" {
					body = `{"id":"a"}`
				}
				res := e.sendRaw(t, method, path, body)
				if res.status < 300 {
					t.Errorf("%s %s: %d %s, want a refusal", method, path, res.status, res.body)
				}
			}
		}
		if ks := e.keys(t); len(ks) != 0 {
			t.Fatalf("Redis keys written: %q", ks)
		}
		if n, err := e.l.Count(testenv.Context(t)); err != nil || n != 0 {
			t.Fatalf("ledger rows: %d %v", n, err)
		}
		// The same env takes the same requests with a good topic.
		expect(t, e.post(t, "/v1/topics/good/jobs", `{"id":"a","payload":{"x":1}}`), http.StatusAccepted)
	}, withToken(token))
}

// sendRaw sends a request whose path goes on the wire exactly as given
// (dot segments included) and does not follow redirects.
func (e *env) sendRaw(t testing.TB, method, path, body string) resp {
	t.Helper()
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(e.srv.URL, "http://"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n", method, path)
	if e.token != "" {
		fmt.Fprintf(c, "Authorization: Bearer %s\r\n", e.token)
	}
	if body != "" {
		fmt.Fprintf(c, "Content-Type: application/json\r\nContent-Length: %d\r\n", len(body))
	}
	fmt.Fprintf(c, "\r\n%s", body)
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, header: res.Header, body: b}
}

// slowServer is the API behind httpapi.NewServer (timeouts and the
// concurrency cap) on a real listener, on the embedded backends.
type slowServer struct {
	addr  string
	token string
	env   *env
}

func newSlowServer(t *testing.T, cfg httpapi.ServerConfig, maxBody int64) *slowServer {
	t.Helper()
	rdb, ns := testenv.MiniRedis(t)
	q, err := dataplane.New(rdb, queue.Config{Namespace: ns, MaxPayloadBytes: 1024})
	if err != nil {
		t.Fatal(err)
	}
	l, err := ledger.New(testenv.SQLite(t), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(testenv.Context(t)); err != nil {
		t.Fatal(err)
	}
	const token = "slow-token-0123456789abcdef"
	logs := &testenv.SyncBuffer{}
	h, err := httpapi.New(httpapi.Deps{Queue: q, Ledger: l, Token: token, MaxBodyBytes: maxBody, Logger: testLogger(logs)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httpapi.NewServer(cfg, h)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return &slowServer{addr: ln.Addr().String(), token: token,
		env: &env{q: q, l: l, rdb: rdb, ns: ns, token: token, logs: logs}}
}

// slowClient is a connection that sends its request a byte at a time.
type slowClient struct {
	conn   net.Conn
	closed chan struct{} // closed when the server answered or hung up
	answer string        // what the server sent, if anything; read after closed
	sent   chan int      // bytes sent before the writer gave up, once closed
	going  chan struct{} // closed once the head and the first trickled byte are written
}

// startSlow dials addr, sends head at once, then rest one byte per gap;
// it returns at once. The connection ends when the test does.
func startSlow(t *testing.T, addr, head, rest string, gap time.Duration) *slowClient {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := &slowClient{conn: conn, closed: make(chan struct{}), sent: make(chan int, 1), going: make(chan struct{})}
	go func() {
		defer close(c.closed)
		b, _ := io.ReadAll(conn) // until the server closes (or the test does)
		c.answer = string(b)
	}()
	go func() {
		n := 0
		var once sync.Once
		going := func() { once.Do(func() { close(c.going) }) }
		defer func() { going(); c.sent <- n }()
		if _, err := io.WriteString(conn, head); err != nil {
			return
		}
		for i := 0; i < len(rest); i++ {
			if i == 1 {
				going()
			}
			select {
			case <-c.closed:
				return
			case <-time.After(gap):
			}
			if _, err := conn.Write([]byte{rest[i]}); err != nil {
				return
			}
			n++
		}
	}()
	return c
}

// cutWithin waits for the server to end c's connection, failing the test
// if it is still open after limit (a generous bound, not a measurement).
func (c *slowClient) cutWithin(t *testing.T, what string, limit time.Duration) {
	t.Helper()
	select {
	case <-c.closed:
	case <-time.After(limit):
		t.Fatalf("%s: the server still holds the connection after %v", what, limit)
	}
}

func (c *slowClient) hanging() bool {
	select {
	case <-c.closed:
		return false
	default:
		return true
	}
}

// TestSlowClientsCannotHoldTheServer runs the API behind NewServer on a
// real listener with short timeouts: clients that send their headers or
// their bodies a byte at a time are cut by the server (read_header_timeout,
// read_timeout), while they hang a normal request still succeeds, an
// oversized body gets 413 and oversized headers 431, and nothing the slow
// or oversized requests carried is written.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	t.Parallel()
	const (
		maxBody   = 4096
		slowHeads = 8 // slowloris clients: more than MaxConcurrent
		slowBody  = 2 // clients holding a request slot while their body trickles in
	)
	s := newSlowServer(t, httpapi.ServerConfig{
		ReadHeaderTimeout: 1500 * time.Millisecond,
		ReadTimeout:       3 * time.Second,
		WriteTimeout:      5 * time.Second,
		IdleTimeout:       5 * time.Second,
		MaxConcurrent:     4,
	}, maxBody)
	const gap = 20 * time.Millisecond
	never := strings.Repeat("a", 10000) // 200 s of bytes at gap: the server must cut first

	var heads, bodies []*slowClient
	for i := 0; i < slowHeads; i++ {
		heads = append(heads, startSlow(t, s.addr,
			"POST /v1/topics/t/jobs HTTP/1.1\r\nHost: x\r\nX-Slow: ", never, gap))
	}
	for i := 0; i < slowBody; i++ {
		head := fmt.Sprintf("POST /v1/topics/t/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"id\":\"slow%d\",\"payload\":\"", s.token, 3000, i)
		bodies = append(bodies, startSlow(t, s.addr, head, never[:2900], gap))
	}
	for _, c := range append(append([]*slowClient(nil), heads...), bodies...) {
		<-c.going // its head and a first trickled byte are on the wire
	}

	// While they hang, a normal request gets through.
	e := s.env
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(body string, chunked bool) (int, string) {
		var rd io.Reader = strings.NewReader(body)
		if chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
		r, err := http.NewRequest("POST", "http://"+s.addr+"/v1/topics/t/jobs", rd)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "Bearer "+s.token)
		r.Header.Set("Content-Type", "application/json")
		res, err := client.Do(r)
		if err != nil {
			t.Fatalf("POST: %v", err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := post(`{"id":"normal","payload":{"ok":true}}`, false); code != http.StatusAccepted {
		t.Fatalf("normal request while slow clients hang: %d %s", code, body)
	}
	stillHanging := 0
	for _, c := range append(append([]*slowClient(nil), heads...), bodies...) {
		if c.hanging() {
			stillHanging++
		}
	}
	if stillHanging == 0 {
		t.Fatal("every slow client was gone before the normal request: the test proved nothing (machine too slow?)")
	}

	// Oversized bodies: 413, declared or chunked; oversized headers: 431.
	big := fmt.Sprintf(`{"id":"big","payload":%q}`, strings.Repeat("p", maxBody))
	if code, body := post(big, false); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, httpapi.CodeBodyTooLarge) {
		t.Errorf("oversized body: %d %s", code, body)
	}
	if code, body := post(big, true); code != http.StatusRequestEntityTooLarge || !strings.Contains(body, httpapi.CodeBodyTooLarge) {
		t.Errorf("oversized chunked body: %d %s", code, body)
	}
	r, _ := http.NewRequest("GET", "http://"+s.addr+"/v1/topics", nil)
	r.Header.Set("Authorization", "Bearer "+s.token)
	r.Header.Set("X-Big", strings.Repeat("h", 128<<10))
	if res, err := client.Do(r); err != nil {
		t.Errorf("oversized headers: %v", err)
	} else {
		res.Body.Close()
		if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
			t.Errorf("oversized headers: %d, want 431", res.StatusCode)
		}
	}

	// The slow ones are cut: headers by read_header_timeout, bodies by
	// read_timeout, long before they would have finished.
	for i, c := range heads {
		c.cutWithin(t, fmt.Sprintf("slow headers %d", i), 20*time.Second)
		if strings.HasPrefix(c.answer, "HTTP/1.1 2") {
			t.Errorf("slow headers %d answered %q", i, c.answer)
		}
	}
	for i, c := range bodies {
		c.cutWithin(t, fmt.Sprintf("slow body %d", i), 20*time.Second)
		if strings.HasPrefix(c.answer, "HTTP/1.1 2") {
			t.Errorf("slow body %d answered %q", i, c.answer)
		}
		if n := <-c.sent; n >= 2900 {
			t.Errorf("slow body %d: its whole body went through (%d bytes)", i, n)
		}
	}

	ks := e.keys(t)
	for _, k := range ks {
		if !strings.HasPrefix(k, e.ns+":{t}:") && k != e.ns+":topics" {
			t.Errorf("unexpected key %q", k)
		}
	}
	page, err := e.q.List(context.Background(), "t", queue.StateWaiting, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if page.Total != 1 || page.Jobs[0].Job.ID != "normal" {
		t.Fatalf("jobs written: %d, want only the normal one", page.Total)
	}
	if strings.Contains(e.logs.String(), s.token) {
		t.Fatal("the token appears in the log")
	}
}
