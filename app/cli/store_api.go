package cli

import (
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/app/apiclient"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/recovery"
)

// apiStore goes through a running instance's HTTP API. Input the API would
// refuse for its form (a bad topic or id) is refused here first, so bad
// usage exits 2 before any request.
type apiStore struct {
	c *apiclient.Client
	// explicit: the address was asked for (cli.api); else it is the
	// default of an embedded configuration, and a refusal says so.
	explicit bool
}

func newAPIStore(base, token string, explicit bool) (*apiStore, error) {
	c, err := apiclient.New(base, apiclient.Options{Token: strings.TrimSpace(token)})
	if err != nil {
		key := "http.listen"
		if explicit {
			key = "cli.api"
		}
		return nil, withCode(ExitUsage, fmt.Errorf("%s: %w", key, err))
	}
	return &apiStore{c: c, explicit: explicit}, nil
}

// explain turns the errors that are about reaching the instance into what
// the operator should do; the API's own answers pass as they are (their
// errors match the queue's, for the exit codes).
func (s *apiStore) explain(err error) error {
	base := s.c.BaseURL()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, apiclient.ErrUnreachable) && s.explicit:
		return fmt.Errorf("no delayq instance answers at %s (--api, cli.api): is it running, and is that its API address (its http.listen)? Nothing was done. (%w)", base, err)
	case errors.Is(err, apiclient.ErrUnreachable):
		return fmt.Errorf("no delayq instance answers at %s. With redis.mode embedded this command has no store of its own "+
			"(an embedded Redis would be thrown away with it), so it works through the API of a running instance: "+
			"start `delayq serve` (or `delayq demo`), pass --api with the URL of a running instance's API (cli.api, DELAYQ_CLI_API), "+
			"or configure Redis and SQL (--redis, --sql-dsn) to work on them directly. Nothing was done. (%w)", base, err)
	case errors.Is(err, apiclient.ErrUnauthorized):
		return withCode(ExitUsage, fmt.Errorf("the instance at %s refused the request: set DELAYQ_HTTP_TOKEN (http.token) to its API token (%w)", base, err))
	}
	return err
}

func (s *apiStore) Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.EnqueueResult, error) {
	if err := validTopicID(topic, j.ID); err != nil {
		return queue.EnqueueResult{}, err
	}
	// The payload goes as base64: its exact bytes, whatever they are (a
	// JSON payload would be re-encoded on the way, its spacing lost).
	req := httpapi.EnqueueRequest{ID: j.ID, PartitionKey: j.PartitionKey, OrderingKey: j.OrderingKey}
	if len(j.Payload) > 0 {
		b64 := base64.StdEncoding.EncodeToString(j.Payload)
		req.PayloadBase64 = &b64
	}
	if j.Delay != 0 {
		ms := j.Delay.Milliseconds()
		req.DelayMs = &ms
	}
	if j.RunAt != 0 {
		req.RunAt = &j.RunAt
	}
	if j.MaxAttempts != 0 {
		req.MaxAttempts = &j.MaxAttempts
	}
	req.Priority = j.Priority
	r, err := s.c.Enqueue(ctx, topic, req)
	if err != nil {
		return queue.EnqueueResult{}, s.explain(err)
	}
	out := queue.EnqueueResult{ID: r.ID, Duplicate: r.Duplicate, RunAt: r.RunAt}
	if f := r.Finished; f != nil {
		out.Finished = &queue.Finished{Outcome: f.Outcome, TakenUntil: f.TakenUntil}
	}
	return out, nil
}

func (s *apiStore) Cancel(ctx context.Context, topic, id string) (httpapi.JobView, error) {
	if err := validTopicID(topic, id); err != nil {
		return httpapi.JobView{}, err
	}
	v, err := s.c.Cancel(ctx, topic, id)
	if err != nil {
		return httpapi.JobView{}, s.explain(err)
	}
	return v, nil
}

func (s *apiStore) Reschedule(ctx context.Context, topic, id string, to queue.When) (*queue.Rescheduled, error) {
	if err := validTopicID(topic, id); err != nil {
		return nil, err
	}
	var req httpapi.RescheduleRequest
	ms := to.D.Milliseconds()
	switch to.Kind {
	case queue.WhenAt:
		req.RunAt = &to.At
	case queue.WhenIn:
		req.DelayMs = &ms
	case queue.WhenBy:
		req.ShiftMs = &ms
	}
	v, err := s.c.Reschedule(ctx, topic, id, req)
	if err != nil {
		return nil, s.explain(err)
	}
	j, err := jobFromView(v.JobView)
	if err != nil {
		return nil, err
	}
	return &queue.Rescheduled{Job: j, OldRunAt: v.PreviousRunAt, RunAt: v.RunAt, State: v.State, Parked: v.Parked}, nil
}

func (s *apiStore) Get(ctx context.Context, topic, id string) (*queue.JobInfo, error) {
	if err := validTopicID(topic, id); err != nil {
		return nil, err
	}
	v, err := s.c.Job(ctx, topic, id)
	if errors.Is(err, queue.ErrNotFound) {
		return &queue.JobInfo{State: queue.StateUnknown}, nil
	}
	if err != nil {
		return nil, s.explain(err)
	}
	return infoFromView(v)
}

func (s *apiStore) Stats(ctx context.Context, topics []string) ([]httpapi.TopicStats, error) {
	for _, t := range topics {
		if err := queue.ValidateTopic(t); err != nil {
			return nil, err
		}
	}
	var views []httpapi.TopicStats
	if len(topics) == 0 {
		var err error
		if views, err = s.c.Topics(ctx); err != nil {
			return nil, s.explain(err)
		}
	}
	for _, t := range topics {
		v, err := s.c.TopicStats(ctx, t)
		if err != nil {
			return nil, s.explain(err)
		}
		views = append(views, v)
	}
	return views, nil
}

// Dead lists dead jobs without their payloads: the API leaves them out of
// listings (get a job for its payload).
func (s *apiStore) Dead(ctx context.Context, topic string, offset, limit int) (*queue.Page, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return nil, err
	}
	p, err := s.c.Dead(ctx, topic, offset, limit)
	if err != nil {
		return nil, s.explain(err)
	}
	page := &queue.Page{Total: p.Total, Jobs: make([]*queue.JobInfo, 0, len(p.Jobs))}
	for _, v := range p.Jobs {
		info, err := infoFromView(v)
		if err != nil {
			return nil, err
		}
		page.Jobs = append(page.Jobs, info)
	}
	return page, nil
}

func (s *apiStore) SetPaused(ctx context.Context, topic string, paused bool) (httpapi.PauseResponse, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return httpapi.PauseResponse{}, err
	}
	out, err := s.c.SetPaused(ctx, topic, paused)
	return out, s.explain(err)
}

func (s *apiStore) Partitions(ctx context.Context, topic string, set int) (httpapi.PartitionsResponse, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return httpapi.PartitionsResponse{}, err
	}
	if set > 0 {
		out, err := s.c.SetPartitions(ctx, topic, set)
		return out, s.explain(err)
	}
	out, err := s.c.Partitions(ctx, topic)
	return out, s.explain(err)
}

func (s *apiStore) Jobs(ctx context.Context, topic string, jq httpapi.JobQuery) (httpapi.JobPage, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return httpapi.JobPage{}, err
	}
	p, err := s.c.Jobs(ctx, topic, jq)
	return p, s.explain(err)
}

func (s *apiStore) RequeueDead(ctx context.Context, topic, id string) error {
	if err := validTopicID(topic, id); err != nil {
		return err
	}
	_, err := s.c.RequeueDead(ctx, topic, httpapi.RequeueRequest{ID: id})
	return s.explain(err)
}

func (s *apiStore) RequeueAllDead(ctx context.Context, topic string) (int, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return 0, err
	}
	r, err := s.c.RequeueDead(ctx, topic, httpapi.RequeueRequest{All: true})
	return r.Requeued, s.explain(err)
}

func (s *apiStore) PurgeDead(ctx context.Context, topic string, before int64) (int, error) {
	if err := queue.ValidateTopic(topic); err != nil {
		return 0, err
	}
	r, err := s.c.PurgeDead(ctx, topic, httpapi.PurgeRequest{Before: &before})
	return r.Purged, s.explain(err)
}

func (s *apiStore) DeleteDead(ctx context.Context, topic, id string) error {
	if err := validTopicID(topic, id); err != nil {
		return err
	}
	_, err := s.c.DeleteDead(ctx, topic, id)
	return s.explain(err)
}

func (s *apiStore) List(ctx context.Context, f ledger.ListFilter) (httpapi.LedgerPage, error) {
	if f.Topic != "" {
		if err := queue.ValidateTopic(f.Topic); err != nil {
			return httpapi.LedgerPage{}, err
		}
	}
	p, err := s.c.Ledger(ctx, f)
	return p, s.explain(err)
}

func (s *apiStore) Stale(ctx context.Context, olderThan int64, limit int) ([]ledger.Entry, error) {
	p, err := s.c.LedgerStale(ctx, olderThan, 0, limit)
	return entries(p), s.explain(err)
}

func (s *apiStore) Recover(ctx context.Context, dryRun bool) (*recovery.Report, error) {
	rep, err := s.c.RunRecovery(ctx, dryRun)
	return rep, s.explain(err)
}

// SmokeRan asks for the smoke job: once it is gone, it ran and succeeded
// (the smoke job has one attempt; a failure leaves it dead). The time is
// when that was seen, not the handler's own.
func (s *apiStore) SmokeRan(ctx context.Context, id string) (int64, bool, error) {
	v, err := s.c.Job(ctx, SmokeTopic, id)
	switch {
	case errors.Is(err, queue.ErrNotFound):
		return time.Now().UnixMilli(), true, nil
	case err != nil:
		return 0, false, s.explain(err)
	case v.State == queue.StateDead:
		return 0, false, fmt.Errorf("smoke: job %s failed: %s", id, v.LastError)
	}
	return 0, false, nil
}

func (s *apiStore) Where() string { return "the instance at " + s.c.BaseURL() }

func (s *apiStore) Close() error { return nil }

// validTopicID checks what the API would refuse for its form.
func validTopicID(topic, id string) error {
	if err := queue.ValidateTopic(topic); err != nil {
		return err
	}
	return queue.ValidateID(id)
}

// infoFromView is a job as the API shows it, in the queue's terms: the
// score is the time of the job's state (due, lease end, death).
func infoFromView(v httpapi.JobView) (*queue.JobInfo, error) {
	j, err := jobFromView(v)
	if err != nil {
		return nil, err
	}
	j.TraceParent = v.TraceParent
	info := &queue.JobInfo{State: v.State, Score: v.RunAt, Job: j, SQLOnly: v.SQLOnly, CancelRequestedAt: v.CancelRequestedAt, Parked: v.Parked}
	switch info.State {
	case queue.StateInFlight:
		info.Score = v.LeaseUntil
	case queue.StateDead:
		info.Score = v.DiedAt
	}
	return info, nil
}

func jobFromView(v httpapi.JobView) (*queue.Job, error) {
	j := &queue.Job{
		Topic: v.Topic, ID: v.ID, Attempt: v.Attempt, MaxAttempts: v.MaxAttempts, Priority: v.Priority, OrderingKey: v.OrderingKey,
		EnqueuedAt: v.EnqueuedAt, RunAt: v.RunAt, LastError: v.LastError, LeaseUntil: v.LeaseUntil,
	}
	switch {
	case len(v.Payload) > 0:
		j.Payload = []byte(v.Payload)
	case v.PayloadBase64 != "":
		p, err := base64.StdEncoding.DecodeString(v.PayloadBase64)
		if err != nil {
			return nil, fmt.Errorf("job %s/%s: the API sent a payload that is not base64: %w", v.Topic, v.ID, err)
		}
		j.Payload = p
	}
	return j, nil
}

func entries(p httpapi.LedgerPage) []ledger.Entry {
	out := make([]ledger.Entry, len(p.Rows))
	for i, r := range p.Rows {
		out[i] = ledger.Entry{
			ID: r.ID, Topic: cmp.Or(r.Partition, r.Topic), JobID: r.JobID, State: r.State, Attempt: r.Attempt,
			MaxAttempts: r.MaxAttempts, RunAt: r.RunAt, ClaimedAt: r.ClaimedAt, LeaseUntil: r.LeaseUntil,
			Worker: r.Worker, LastError: r.LastError, UpdatedAt: r.UpdatedAt, Shard: r.Shard, Priority: r.Priority, OrderingKey: r.OrderingKey,
		}
	}
	return out
}
