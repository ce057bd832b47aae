package httpapi_test

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// TestPauseResume: pause and resume answer the state, are idempotent, show
// in the topic stats, write the audit line, and the claims obey them.
func TestPauseResume(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		expect(t, e.post(t, "/v1/topics/t/jobs", `{"id":"a"}`), http.StatusAccepted)
		p := decode[httpapi.PauseResponse](t, e.post(t, "/v1/topics/t/pause", ""))
		if !p.Paused || !p.Changed || p.ChangedBy != "anonymous" || p.ChangedAt == 0 || p.Topic != "t" {
			t.Fatalf("pause: %+v", p)
		}
		if jobs := e.claimAll(t, "t"); len(jobs) != 0 {
			t.Fatalf("claimed %d jobs of a paused topic", len(jobs))
		}
		again := decode[httpapi.PauseResponse](t, e.post(t, "/v1/topics/t/pause", ""))
		if !again.Paused || again.Changed || again.ChangedAt != p.ChangedAt {
			t.Fatalf("pause again: %+v, want the first pause unchanged", again)
		}
		s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t"))
		if !s.Paused || s.PausedAt != p.ChangedAt || s.PausedBy != "anonymous" || s.Due != 1 {
			t.Fatalf("stats while paused: %+v", s)
		}
		l := decode[httpapi.TopicList](t, e.get(t, "/v1/topics"))
		if len(l.Topics) != 1 || !l.Topics[0].Paused {
			t.Fatalf("topic list while paused: %+v", l)
		}
		r := decode[httpapi.PauseResponse](t, e.post(t, "/v1/topics/t/resume", ""))
		if r.Paused || !r.Changed || r.ChangedAt <= p.ChangedAt {
			t.Fatalf("resume: %+v", r)
		}
		if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t")); s.Paused || s.PausedAt != 0 || s.PausedBy != "" {
			t.Fatalf("stats after the resume: %+v", s)
		}
		if jobs := e.claimAll(t, "t"); len(jobs) != 1 {
			t.Fatalf("claimed %d jobs after the resume, want 1", len(jobs))
		}
		logs := e.logs.String()
		for _, want := range []string{`action=pause`, `action=resume`, `actor=anonymous`, `topic=t`, `remote=`} {
			if !strings.Contains(logs, want) {
				t.Errorf("audit log lacks %q:\n%s", want, logs)
			}
		}

		// A topic never paused (a typo of a name, say): its resume changes
		// nothing and leaves no state behind to list.
		never := decode[httpapi.PauseResponse](t, e.post(t, "/v1/topics/typo/resume", ""))
		if never.Paused || never.Changed || never.ChangedAt != 0 || never.Topic != "typo" {
			t.Fatalf("resume of a topic never paused: %+v", never)
		}
		if l := decode[httpapi.TopicList](t, e.get(t, "/v1/topics")); len(l.Topics) != 1 || l.Topics[0].Topic != "t" {
			t.Fatalf("topics after a resume of a topic never paused: %+v", l)
		}

		expectError(t, e.post(t, "/v1/topics/a%7Bb/pause", ""), http.StatusBadRequest, httpapi.CodeInvalidTopic, "topic")
		expectError(t, e.post(t, "/v1/topics/t/pause", `{}`), http.StatusBadRequest, httpapi.CodeUnexpectedBody, "")
		expectError(t, e.get(t, "/v1/topics/t/pause"), http.StatusMethodNotAllowed, httpapi.CodeMethodNotAllowed, "")
	})
}

// TestPauseActorIsTokenFingerprint: with auth on, the actor is the token's
// fingerprint, and the token itself is not logged.
func TestPauseActorIsTokenFingerprint(t *testing.T) {
	t.Parallel()
	const tok = "s3cret-token-for-pause-0123456789"
	e := newEnv(t, embedded, withToken(tok))
	sum := sha256.Sum256([]byte(tok))
	want := "token:" + hex.EncodeToString(sum[:])[:8]
	p := decode[httpapi.PauseResponse](t, e.post(t, "/v1/topics/t/pause", ""))
	if p.ChangedBy != want {
		t.Fatalf("changed_by %q, want %q", p.ChangedBy, want)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "actor=\""+want+"\"") && !strings.Contains(logs, "actor="+want) || strings.Contains(logs, tok) {
		t.Fatalf("audit line without the fingerprint, or with the token:\n%s", logs)
	}
}

// TestPauseReadOnly: refused, nothing written.
func TestPauseReadOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, embedded, withReadOnly())
	expectError(t, e.post(t, "/v1/topics/t/pause", ""), http.StatusForbidden, httpapi.CodeReadOnly, "")
	expectError(t, e.post(t, "/v1/topics/t/resume", ""), http.StatusForbidden, httpapi.CodeReadOnly, "")
	if st, err := e.l.TopicStates(testenv.Context(t)); err != nil || len(st) != 0 {
		t.Fatalf("read-only pause wrote %+v, %v", st, err)
	}
	if s := decode[httpapi.TopicStats](t, e.get(t, "/v1/topics/t")); s.Paused {
		t.Fatal("read-only pause paused the topic")
	}
}

// TestPauseBackendsDown: SQL down is 503 naming sql and Redis untouched;
// Redis down after SQL is 503 naming redis, with the intent saved in SQL.
func TestPauseBackendsDown(t *testing.T) {
	t.Parallel()
	t.Run("sql", func(t *testing.T) {
		t.Parallel()
		rdb, _ := testenv.MiniRedis(t)
		e := apiOn(t, rdb, unreachableSQL(t))
		expectUnavailable(t, e.post(t, "/v1/topics/t/pause", ""), "sql")
		if n, err := rdb.Exists(testenv.Context(t), "dq:{t}:paused").Result(); err != nil || n != 0 {
			t.Fatalf("Redis written though SQL failed: %d, %v", n, err)
		}
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		rdb := redis.NewClient(&redis.Options{Addr: testenv.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1})
		t.Cleanup(func() { _ = rdb.Close() })
		e := apiOn(t, rdb, testenv.SQLite(t))
		if err := e.l.Migrate(testenv.Context(t)); err != nil {
			t.Fatal(err)
		}
		r := e.post(t, "/v1/topics/t/pause", "")
		expectUnavailable(t, r, "redis")
		if !strings.Contains(string(r.body), "saved in SQL") {
			t.Fatalf("503 does not say the intent is saved: %s", r.body)
		}
		if st, err := e.l.TopicState(testenv.Context(t), "t"); err != nil || !st.Paused {
			t.Fatalf("SQL state %+v, %v; want paused", st, err)
		}
	})
}
