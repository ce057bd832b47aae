// Package apiclient is a Go client of delayq's HTTP API (app/httpapi): the
// requests and answers are the API's own JSON types, and the API's error
// codes come back as errors that match the queue's (errors.Is(err,
// queue.ErrNotFound), queue.ErrInFlight, queue.ErrDead, queue.ErrInvalid),
// so a caller handles a job the API could not find the way it handles one
// the queue could not.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/engine"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ErrUnreachable means no server answered at the API's address: the
// connection could not be made, so the request was not sent and nothing
// was done.
var ErrUnreachable = errors.New("no answer from the API")

// ErrUnauthorized matches an Error with status 401: the API wants a bearer
// token, or refused the one sent.
var ErrUnauthorized = errors.New("unauthorized")

// dialTimeout bounds connecting: an instance on the address answers at once,
// and a firewall that drops packets should not hang a command.
const dialTimeout = 5 * time.Second

// maxAnswerBytes bounds an answer read into memory: a job holds at most a
// few MiB of payload; anything far bigger is not the delayq API.
const maxAnswerBytes = 64 << 20

// Options configure a Client.
type Options struct {
	// Token is the bearer token (the server's http.token); "" sends none.
	Token string
	// HTTPClient makes the requests; nil means one with a 5 s connect
	// timeout and the environment's proxy settings (loopback is never
	// proxied).
	HTTPClient *http.Client
}

// Client calls one delayq instance's API. It is safe for concurrent use.
type Client struct {
	base  string // scheme://host[:port][/prefix], no trailing slash
	token string
	hc    *http.Client
}

// New returns a client of the API at baseURL (http://host:port, or with a
// path prefix behind a reverse proxy).
func New(baseURL string, o Options) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("apiclient: base URL %q: want http://host:port", baseURL)
	}
	hc := o.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext
		hc = &http.Client{Transport: tr}
	}
	return &Client{base: strings.TrimRight(u.String(), "/"), token: o.Token, hc: hc}, nil
}

// BaseURL is the API's address as the client uses it.
func (c *Client) BaseURL() string { return c.base }

// Error is an answer of the API that is not a success: its status and, when
// the body is the API's error shape, the code, message and field.
type Error struct {
	Status int
	httpapi.ErrorDetail
	raw []byte // the body, for answers that carry more (a failed run's report)
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "the API answered %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, " (field %s)", e.Field)
	}
	return b.String()
}

// Is matches the queue's errors the API's codes stand for, and
// ErrUnauthorized. A body that is not the API's error shape (a proxy's
// page, another server on the port) matches none of them.
func (e *Error) Is(target error) bool {
	if e.Code == "" {
		return false
	}
	switch target {
	case queue.ErrNotFound:
		return e.Code == httpapi.CodeNotFound
	case queue.ErrInFlight:
		return e.Code == httpapi.CodeJobInFlight
	case queue.ErrDead:
		return e.Code == httpapi.CodeJobDead
	case queue.ErrContended:
		return e.Code == httpapi.CodeJobContended
	case queue.ErrInvalid:
		// 400 is bad input; 413 a body over the server's limit (a payload
		// too large for it); 415 cannot come from this client.
		return e.Status == http.StatusBadRequest || e.Status == http.StatusRequestEntityTooLarge
	case ErrUnauthorized:
		return e.Status == http.StatusUnauthorized
	}
	return false
}

// do sends one request and decodes a 2xx answer into out (if not nil).
// body, if not nil, is sent as JSON.
func (c *Client) do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("apiclient: %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return fmt.Errorf("apiclient: %s %s: %w", method, path, err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	// A caller's span goes along, so that the jobs a request enqueues keep
	// its trace (tracing.enabled on the server, docs/design.md §4.21).
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if isDialError(err) {
			return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.base, err)
		}
		// The request may have reached the server: say so, do not guess.
		return fmt.Errorf("apiclient: %s %s: %w (the request may or may not have been carried out)", method, target, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return fmt.Errorf("apiclient: %s %s: reading the answer: %w", method, target, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(resp, data)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("apiclient: %s %s: %d answer is not the API's JSON (is %s a delayq API?): %w",
			method, target, resp.StatusCode, c.base, err)
	}
	return nil
}

// answerError reads a failed answer: the API's error shape, or (from
// something else on the address) the status and the start of the body.
func answerError(resp *http.Response, data []byte) error {
	var er httpapi.ErrorResponse
	if err := json.Unmarshal(data, &er); err == nil && er.Error.Code != "" {
		return &Error{Status: resp.StatusCode, ErrorDetail: er.Error, raw: data}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return &Error{Status: resp.StatusCode, ErrorDetail: httpapi.ErrorDetail{Message: "not a delayq API answer: " + msg}}
}

// isDialError reports whether err happened while connecting: then nothing
// was sent.
func isDialError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}

// jobPath is a job's path; the id's slashes are escaped too, as the API
// asks for ids with empty, "." or ".." segments.
func jobPath(topic, id string) string {
	return topicPath(topic) + "/jobs/" + url.PathEscape(id)
}

func topicPath(topic string) string { return "/v1/topics/" + url.PathEscape(topic) }

// Enqueue sends POST /v1/topics/{topic}/jobs. A duplicate id is not an
// error: the answer says Duplicate.
func (c *Client) Enqueue(ctx context.Context, topic string, req httpapi.EnqueueRequest) (httpapi.EnqueueResponse, error) {
	var out httpapi.EnqueueResponse
	err := c.do(ctx, http.MethodPost, topicPath(topic)+"/jobs", nil, req, &out)
	return out, err
}

// Job sends GET /v1/topics/{topic}/jobs/{id}: the job with its payload.
func (c *Client) Job(ctx context.Context, topic, id string) (httpapi.JobView, error) {
	var out httpapi.JobView
	err := c.do(ctx, http.MethodGet, jobPath(topic, id), nil, nil, &out)
	currentNames(&out)
	return out, err
}

// Cancel sends DELETE /v1/topics/{topic}/jobs/{id}: the cancelled job
// (state cancelled), or a job a worker holds whose run's cancel was asked
// (state in_flight, CancelRequestedAt set: 202), or an error matching
// queue.ErrNotFound, queue.ErrInFlight (Redis lost it while the ledger says
// a worker holds it) or queue.ErrDead.
func (c *Client) Cancel(ctx context.Context, topic, id string) (httpapi.JobView, error) {
	var out httpapi.JobView
	err := c.do(ctx, http.MethodDelete, jobPath(topic, id), nil, nil, &out)
	return out, err
}

// Reschedule sends PATCH /v1/topics/{topic}/jobs/{id}: the job at its new
// due time, or an error matching queue.ErrNotFound, queue.ErrInFlight or
// queue.ErrDead.
func (c *Client) Reschedule(ctx context.Context, topic, id string, req httpapi.RescheduleRequest) (httpapi.RescheduledView, error) {
	var out httpapi.RescheduledView
	err := c.do(ctx, http.MethodPatch, jobPath(topic, id), nil, req, &out)
	return out, err
}

// Topics sends GET /v1/topics: every topic with its stats.
func (c *Client) Topics(ctx context.Context) ([]httpapi.TopicStats, error) {
	var out httpapi.TopicList
	err := c.do(ctx, http.MethodGet, "/v1/topics", nil, nil, &out)
	return out.Topics, err
}

// TopicStats sends GET /v1/topics/{topic}.
func (c *Client) TopicStats(ctx context.Context, topic string) (httpapi.TopicStats, error) {
	var out httpapi.TopicStats
	err := c.do(ctx, http.MethodGet, topicPath(topic), nil, nil, &out)
	return out, err
}

// Dead sends GET /v1/topics/{topic}/dead: a page of dead jobs, newest
// first, without their payloads.
func (c *Client) Dead(ctx context.Context, topic string, offset, limit int) (httpapi.JobPage, error) {
	var out httpapi.JobPage
	q := url.Values{"offset": {strconv.Itoa(offset)}, "limit": {strconv.Itoa(limit)}}
	err := c.do(ctx, http.MethodGet, topicPath(topic)+"/dead", q, nil, &out)
	return out, err
}

// Jobs sends GET /v1/topics/{topic}/jobs: a page of the job browser (a
// state, or a durable topic's id prefix; zero fields are left out). Pass
// the answer's NextOffset or NextAfter back for the next page.
func (c *Client) Jobs(ctx context.Context, topic string, jq httpapi.JobQuery) (httpapi.JobPage, error) {
	var out httpapi.JobPage
	q := url.Values{}
	set := func(name, v string) {
		if v != "" {
			q.Set(name, v)
		}
	}
	// The older name of waiting_sql, which servers of both releases read
	// (a CLI upgraded before its server).
	if jq.State == engine.ListWaitingSQL {
		jq.State = "scheduled_sql"
	}
	set("state", jq.State)
	set("prefix", jq.Prefix)
	set("after", jq.After)
	if jq.HasOffset || jq.Offset != 0 {
		q.Set("offset", strconv.Itoa(jq.Offset))
	}
	if jq.Limit != 0 {
		q.Set("limit", strconv.Itoa(jq.Limit))
	}
	err := c.do(ctx, http.MethodGet, topicPath(topic)+"/jobs", q, nil, &out)
	for i := range out.Jobs {
		currentNames(&out.Jobs[i])
	}
	if l, perr := engine.ParseListing(out.State); perr == nil {
		out.State = l
	}
	return out, err
}

// RequeueDead sends POST /v1/topics/{topic}/dead/requeue.
func (c *Client) RequeueDead(ctx context.Context, topic string, req httpapi.RequeueRequest) (httpapi.RequeueResponse, error) {
	var out httpapi.RequeueResponse
	err := c.do(ctx, http.MethodPost, topicPath(topic)+"/dead/requeue", nil, req, &out)
	return out, err
}

// DeleteDead sends DELETE /v1/topics/{topic}/dead/jobs/{id}: one dead job
// deleted for good; a job that is not dead is a 404 (*Error, not_found).
func (c *Client) DeleteDead(ctx context.Context, topic, id string) (httpapi.DeleteDeadResponse, error) {
	var out httpapi.DeleteDeadResponse
	err := c.do(ctx, http.MethodDelete, topicPath(topic)+"/dead/jobs/"+url.PathEscape(id), nil, nil, &out)
	return out, err
}

// Pause sends POST /v1/topics/{topic}/pause: the topic's state after it.
// A 503 naming redis means the pause is saved in SQL and not applied to
// Redis yet; calling again is safe.
func (c *Client) Pause(ctx context.Context, topic string) (httpapi.PauseResponse, error) {
	return c.SetPaused(ctx, topic, true)
}

// Resume sends POST /v1/topics/{topic}/resume: the topic's state after it.
func (c *Client) Resume(ctx context.Context, topic string) (httpapi.PauseResponse, error) {
	return c.SetPaused(ctx, topic, false)
}

// SetPaused is Pause when paused, else Resume.
func (c *Client) SetPaused(ctx context.Context, topic string, paused bool) (httpapi.PauseResponse, error) {
	path := topicPath(topic) + "/resume"
	if paused {
		path = topicPath(topic) + "/pause"
	}
	var out httpapi.PauseResponse
	err := c.do(ctx, http.MethodPost, path, nil, nil, &out)
	return out, err
}

// Partitions sends GET /v1/topics/{topic}/partitions.
func (c *Client) Partitions(ctx context.Context, topic string) (httpapi.PartitionsResponse, error) {
	var out httpapi.PartitionsResponse
	err := c.do(ctx, http.MethodGet, topicPath(topic)+"/partitions", nil, nil, &out)
	return out, err
}

// SetPartitions sends PUT /v1/topics/{topic}/partitions.
func (c *Client) SetPartitions(ctx context.Context, topic string, partitions int) (httpapi.PartitionsResponse, error) {
	var out httpapi.PartitionsResponse
	err := c.do(ctx, http.MethodPut, topicPath(topic)+"/partitions", nil, httpapi.PartitionsRequest{Partitions: &partitions}, &out)
	return out, err
}

// PurgeDead sends POST /v1/topics/{topic}/dead/purge.
func (c *Client) PurgeDead(ctx context.Context, topic string, req httpapi.PurgeRequest) (httpapi.PurgeResponse, error) {
	var out httpapi.PurgeResponse
	err := c.do(ctx, http.MethodPost, topicPath(topic)+"/dead/purge", nil, req, &out)
	return out, err
}

// Ledger sends GET /v1/ledger: a page of ledger rows by f (see
// ledger.List; zero fields are left out). Pass the answer's NextCursor,
// read with ledger.ParseCursor, as f.After for the next page.
func (c *Client) Ledger(ctx context.Context, f ledger.ListFilter) (httpapi.LedgerPage, error) {
	var out httpapi.LedgerPage
	q := url.Values{"limit": {strconv.Itoa(f.Limit)}}
	set := func(name, v string) {
		if v != "" {
			q.Set(name, v)
		}
	}
	// The column's spelling, which servers of both releases read; a state
	// no row is in goes as it is, for the server to refuse.
	if c := f.State.Column(); c != "" {
		set("state", c)
	} else {
		set("state", string(f.State))
	}
	set("topic", f.Topic)
	if f.DueAfter != 0 {
		set("due_after", strconv.FormatInt(f.DueAfter, 10))
	}
	if f.DueBefore != 0 {
		set("due_before", strconv.FormatInt(f.DueBefore, 10))
	}
	if f.After != nil {
		set("cursor", f.After.String())
	}
	err := c.do(ctx, http.MethodGet, "/v1/ledger", q, nil, &out)
	for i := range out.Rows {
		if st, perr := queue.ParseState(string(out.Rows[i].State)); perr == nil {
			out.Rows[i].State = st
		}
	}
	return out, err
}

// LedgerInFlight sends GET /v1/ledger/inflight; topic "" means every topic.
// Ledger does the same with more filters and paging.
func (c *Client) LedgerInFlight(ctx context.Context, topic string, limit int) (httpapi.LedgerPage, error) {
	var out httpapi.LedgerPage
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if topic != "" {
		q.Set("topic", topic)
	}
	err := c.do(ctx, http.MethodGet, "/v1/ledger/inflight", q, nil, &out)
	return out, err
}

// LedgerStale sends GET /v1/ledger/stale: rows whose lease ended before
// olderThan (Unix ms), by id after afterID.
func (c *Client) LedgerStale(ctx context.Context, olderThan, afterID int64, limit int) (httpapi.LedgerPage, error) {
	var out httpapi.LedgerPage
	q := url.Values{
		"older_than": {strconv.FormatInt(olderThan, 10)},
		"after_id":   {strconv.FormatInt(afterID, 10)},
		"limit":      {strconv.Itoa(limit)},
	}
	err := c.do(ctx, http.MethodGet, "/v1/ledger/stale", q, nil, &out)
	return out, err
}

// RunRecovery sends POST /v1/recovery/run. A run that failed part way
// returns its report with the error, when the API sent one.
func (c *Client) RunRecovery(ctx context.Context, dryRun bool) (*recovery.Report, error) {
	var rep recovery.Report
	q := url.Values{"dry_run": {strconv.FormatBool(dryRun)}}
	err := c.do(ctx, http.MethodPost, "/v1/recovery/run", q, nil, &rep)
	var ae *Error
	if errors.As(err, &ae) {
		return failedRunReport(ae), err
	}
	if err != nil {
		return nil, err
	}
	return &rep, nil
}

// failedRunReport is the report the API sends along with a failed run
// (httpapi.RecoveryFailure), or nil.
func failedRunReport(e *Error) *recovery.Report {
	if e.raw == nil {
		return nil
	}
	var f struct {
		Report *recovery.Report `json:"report"`
	}
	if json.Unmarshal(e.raw, &f) != nil {
		return nil
	}
	return f.Report
}

// Schedules sends GET /v1/schedules: the periodic schedules with their next
// run and last tick.
func (c *Client) Schedules(ctx context.Context) ([]periodic.Info, error) {
	var out httpapi.SchedulesList
	err := c.do(ctx, http.MethodGet, "/v1/schedules", nil, nil, &out)
	return out.Schedules, err
}

// currentNames gives a job shown by a server of the release before
// (scheduled for waiting and retrying alike, in_progress for a ledger row
// in flight) the names of queue.State.
func currentNames(v *httpapi.JobView) {
	if st, err := queue.ParseState(string(v.State)); err == nil {
		v.State = st
	}
	if v.State == queue.StateWaiting && v.Retrying {
		v.State = queue.StateRetrying
	}
	if v.Ledger != nil {
		if st, err := queue.ParseState(string(v.Ledger.State)); err == nil {
			v.Ledger.State = st
		}
	}
}

// PutProduct sends PUT /v1/products/{sku} (the orders module): it creates
// the product or sets its stock and price; the answer's Created says which.
func (c *Client) PutProduct(ctx context.Context, sku string, stock, priceCents int64) (orderclose.ProductView, error) {
	var out orderclose.ProductView
	body := map[string]int64{"stock": stock, "price_cents": priceCents}
	err := c.do(ctx, http.MethodPut, "/v1/products/"+url.PathEscape(sku), nil, body, &out)
	return out, err
}

// Products sends GET /v1/products: a page of products by SKU, after the
// SKU after ("" from the start).
func (c *Client) Products(ctx context.Context, after string, limit int) (orderclose.ProductPage, error) {
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if after != "" {
		q.Set("after", after)
	}
	var out orderclose.ProductPage
	err := c.do(ctx, http.MethodGet, "/v1/products", q, nil, &out)
	return out, err
}

// History sends GET /v1/topics/{topic}/history: a page of the topic's
// finished jobs that f selects (its Topic is the path's).
func (c *Client) History(ctx context.Context, f ledger.HistoryFilter) (httpapi.HistoryPage, error) {
	q := url.Values{"limit": {strconv.Itoa(f.Limit)}}
	for k, v := range map[string]string{"id": f.ID, "prefix": f.Prefix, "outcome": f.Outcome, "after": f.After} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if f.FinishedFrom != 0 {
		q.Set("finished_from", strconv.FormatInt(f.FinishedFrom, 10))
	}
	if f.FinishedBefore != 0 {
		q.Set("finished_before", strconv.FormatInt(f.FinishedBefore, 10))
	}
	var out httpapi.HistoryPage
	err := c.do(ctx, http.MethodGet, topicPath(f.Topic)+"/history", q, nil, &out)
	return out, err
}

// Workers sends GET /v1/workers: the worker processes of the registry.
func (c *Client) Workers(ctx context.Context) ([]queue.WorkerInfo, error) {
	var out httpapi.WorkerList
	err := c.do(ctx, http.MethodGet, "/v1/workers", nil, nil, &out)
	return out.Workers, err
}
