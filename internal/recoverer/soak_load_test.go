package recoverer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/app/httpapi"
)

// soakLoad is the soak's client: it enqueues a steady stream of jobs
// through the API, mostly in batches, some one by one, and keeps every job
// the API accepted. A request that fails (503 while Redis restarts, a
// timeout) is sent again with the same ids until it is answered: ids are
// idempotency keys, so a retry of a request that did land answers
// "duplicate" and the job counts once.
type soakLoad struct {
	base   string
	topics []string
	rate   int // jobs a second
	far    [2]time.Duration
	client *http.Client
	rng    *rand.Rand // the generator's goroutine only

	mu       sync.Mutex
	accepted map[string]soakJob
	statuses map[int]int // answers by HTTP status, transport errors as 0
	maxRunAt int64
}

// soakJob is an accepted job: where it went and whether it must die.
type soakJob struct {
	topic string
	die   bool
}

func newSoakLoad(base string, topics []string, rate int, far [2]time.Duration, seed int64) *soakLoad {
	return &soakLoad{
		base: base, topics: topics, rate: rate, far: far,
		client:   &http.Client{Timeout: 5 * time.Second},
		rng:      rand.New(rand.NewSource(seed)),
		accepted: map[string]soakJob{}, statuses: map[int]int{},
	}
}

// run enqueues until ctx ends, ten requests' worth a second, then returns
// once the last request was answered (or giveUp passed).
func (l *soakLoad) run(ctx context.Context, t *testing.T, giveUp time.Duration) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	perTick := max(1, l.rate/10)
	seq := 0
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		topic := l.topics[n%len(l.topics)]
		reqs := make([]httpapi.EnqueueRequest, perTick)
		for i := range reqs {
			reqs[i] = l.newJob(fmt.Sprintf("s%07d", seq))
			seq++
		}
		// Every fifth tick one job takes the single-job route.
		if n%5 == 0 {
			l.send(t, topic, reqs[:1], giveUp)
			reqs = reqs[1:]
		}
		if len(reqs) > 0 {
			l.send(t, topic, reqs, giveUp)
		}
	}
}

// newJob draws a job: 60% due now, 30% in 0.2-5 s, 10% minutes ahead (far);
// 5% fail their first one or two attempts, 1% must die.
func (l *soakLoad) newJob(id string) httpapi.EnqueueRequest {
	var p soakPlan
	maxAttempts := 6
	switch u := l.rng.Float64(); {
	case u < 0.01:
		p.Die, maxAttempts = true, 2
	case u < 0.06:
		p.Fail = 1 + l.rng.Intn(2)
	}
	p.WorkMs = l.rng.Intn(20)
	var delay int64
	switch u := l.rng.Float64(); {
	case u < 0.6:
	case u < 0.9:
		delay = 200 + l.rng.Int63n(4800)
	default:
		delay = (l.far[0] + time.Duration(l.rng.Int63n(int64(l.far[1]-l.far[0])))).Milliseconds()
	}
	payload, _ := json.Marshal(p)
	return httpapi.EnqueueRequest{ID: id, Payload: payload, DelayMs: &delay, MaxAttempts: &maxAttempts}
}

// send posts reqs (one job: the single route; more: a batch) until the API
// answers, and records what it accepted.
func (l *soakLoad) send(t *testing.T, topic string, reqs []httpapi.EnqueueRequest, giveUp time.Duration) {
	url := l.base + "/v1/topics/" + topic + "/jobs"
	var body any = reqs[0]
	if len(reqs) > 1 {
		url += ":batch"
		body = httpapi.BatchRequest{Jobs: reqs}
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Error(err)
		return
	}
	deadline := time.Now().Add(giveUp)
	for {
		status, answer := l.post(url, b)
		l.mu.Lock()
		l.statuses[status]++
		l.mu.Unlock()
		switch {
		case status == http.StatusOK || status == http.StatusAccepted:
			l.accept(t, topic, reqs, answer)
			return
		case status >= 400 && status < 500 && status != http.StatusTooManyRequests:
			t.Errorf("POST %s: %d %s", url, status, answer)
			return
		case time.Now().After(deadline):
			t.Errorf("POST %s: no answer within %s (last: %d %s)", url, giveUp, status, answer)
			return
		}
		time.Sleep(100 * time.Millisecond) // the API said "not now": 503 while Redis is away
	}
}

func (l *soakLoad) post(url string, body []byte) (int, []byte) {
	resp, err := l.client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, answer
}

// accept records the jobs of an answered request.
func (l *soakLoad) accept(t *testing.T, topic string, reqs []httpapi.EnqueueRequest, answer []byte) {
	dies := make(map[string]bool, len(reqs))
	for _, r := range reqs {
		var p soakPlan
		_ = json.Unmarshal(r.Payload, &p)
		dies[r.ID] = p.Die
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(reqs) == 1 {
		var er httpapi.EnqueueResponse
		if err := json.Unmarshal(answer, &er); err != nil || er.ID != reqs[0].ID {
			t.Errorf("enqueue %s: answer %s (%v)", reqs[0].ID, answer, err)
			return
		}
		l.accepted[er.ID] = soakJob{topic: topic, die: dies[er.ID]}
		l.maxRunAt = max(l.maxRunAt, er.RunAt)
		return
	}
	var br httpapi.BatchResponse
	if err := json.Unmarshal(answer, &br); err != nil || len(br.Results) != len(reqs) {
		t.Errorf("batch: answer %.300s (%v)", answer, err)
		return
	}
	for _, r := range br.Results {
		if r.Status != "created" && r.Status != "duplicate" {
			t.Errorf("batch: %s: %s %+v", r.ID, r.Status, r.Error)
			continue
		}
		l.accepted[r.ID] = soakJob{topic: topic, die: dies[r.ID]}
		l.maxRunAt = max(l.maxRunAt, r.RunAt)
	}
}

// snapshot returns the accepted jobs, the statuses seen and the latest due
// time; call it once run has returned.
func (l *soakLoad) snapshot() (map[string]soakJob, map[int]int, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.accepted, l.statuses, l.maxRunAt
}
