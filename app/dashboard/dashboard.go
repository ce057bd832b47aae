// Package dashboard is delayq's live dashboard, served at / by serve and
// demo, with every asset embedded in the binary (no CDN: it works
// offline). The page reads the API (/v1, with the token it asks for once
// and keeps in sessionStorage), draws live charts from a history this
// package samples from the process's metrics, and a topic's last 24 hours
// from the per-minute counts every process keeps in Redis (minutes.go).
//
// It is pages with their own URLs (hash routes, so back, forward and
// reload keep the page), under a nav bar, usable 1280 px wide; times are
// UTC in the CLI's format everywhere (docs/design.md §4.20):
//   - #/ the topics: per topic the due, overdue, in-flight and dead
//     counts, throughput and backlog over the last minutes, the
//     durability, paused and no-worker badges with Pause/Resume, a
//     durable topic's jobs in SQL beyond the horizon and the relay's
//     pushes, an HTTP-target topic's method, URL (no query) and latest
//     failures; and, when the orders module is mounted, the orders;
//   - #/topics/T (and #/topics/T/jobs?state=...) one topic: its settings
//     (durability, pause, rate limit, target, live workers), its last 24
//     hours per minute, and its jobs with the states as tabs (waiting, in
//     flight, retrying, dead, waiting in SQL, finished from the history),
//     paged, searched by exact id or (durable topics) id prefix;
//   - #/topics/T/jobs/ID a job: payload (pretty JSON, the first 64 KiB),
//     attempts, times, last error, ledger row, history, and cancel, run
//     now, reschedule and requeue;
//   - #/dead the dead letters of every topic (each topic's newest 50),
//     with checkboxes to requeue or delete a selection (one per-job call
//     each), a job's requeue and delete, a topic's requeue-all and purge;
//   - #/workers the worker processes, live or gone; #/schedules the
//     periodic schedules; #/recovery the ledger's rows and stale rows and
//     the recoverer's reports with "run recovery now".
//
// Every action asks for a confirmation. In read-only mode no button that
// changes state is shown (the API refuses most of those calls anyway).
package dashboard

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/httpjson"
)

//go:embed static
var static embed.FS

// SeriesPattern is the route of the chart data, a /v1 route behind the
// API's token (mount SeriesHandler there, as an httpapi.Module).
const SeriesPattern = "GET /v1/dashboard/series"

// Config configures the dashboard.
type Config struct {
	// Source feeds the charts. Required.
	Source Source
	// Auth says the API wants a bearer token: the page asks for it.
	Auth bool
	// ReadOnly hides every button that changes state.
	ReadOnly bool
	// Orders shows the orders panel (the orders module is mounted).
	Orders bool
	// Workers says this process runs workers: the throughput and lateness
	// charts are theirs (workers of other processes are in Prometheus).
	Workers bool
	// StaleAfter is the recoverer's grace: the page lists the ledger rows
	// whose lease ended longer ago than that. Default 1m.
	StaleAfter time.Duration
	// SampleEvery is how often the charts get a point; History how far
	// back they go. Defaults 2s and 5m.
	SampleEvery, History time.Duration
	// Minutes reads the per-minute counts of the topic pages' 24-hour
	// charts (GET /v1/dashboard/minutes); nil answers that route 503.
	Minutes MinuteReader
	// Logger gets the dashboard's logs. Default logrus's standard logger.
	Logger logrus.FieldLogger
}

// Dashboard serves the page and the chart data, and samples the history
// while Run runs.
type Dashboard struct {
	cfg     Config
	log     logrus.FieldLogger
	page    []byte // index.html with the configuration filled in
	assets  http.Handler
	history *history
	viewed  atomic.Int64 // Unix ms of the last series request
}

// New builds the dashboard; nothing runs until Run.
func New(cfg Config) (*Dashboard, error) {
	if cfg.Source == nil {
		return nil, errors.New("dashboard: Config.Source is required")
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = time.Minute
	}
	if cfg.SampleEvery == 0 {
		cfg.SampleEvery = 2 * time.Second
	}
	if cfg.History == 0 {
		cfg.History = 5 * time.Minute
	}
	if cfg.SampleEvery <= 0 || cfg.History < cfg.SampleEvery || cfg.StaleAfter < 0 {
		return nil, fmt.Errorf("dashboard: SampleEvery %s, History %s, StaleAfter %s: want 0 < SampleEvery <= History and StaleAfter >= 0",
			cfg.SampleEvery, cfg.History, cfg.StaleAfter)
	}
	if cfg.Logger == nil {
		cfg.Logger = logrus.StandardLogger()
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		return nil, fmt.Errorf("dashboard: embedded assets: %w", err)
	}
	tmpl, err := template.ParseFS(sub, "index.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard: page template: %w", err)
	}
	var page bytes.Buffer
	err = tmpl.Execute(&page, map[string]any{
		"Auth": cfg.Auth, "ReadOnly": cfg.ReadOnly, "Orders": cfg.Orders, "Workers": cfg.Workers,
		"StaleAfterMs": cfg.StaleAfter.Milliseconds(),
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: page template: %w", err)
	}
	return &Dashboard{
		cfg:     cfg,
		log:     cfg.Logger.WithField("component", "dashboard"),
		page:    page.Bytes(),
		assets:  http.StripPrefix("/dashboard/", http.FileServerFS(sub)),
		history: newHistory(int(cfg.History / cfg.SampleEvery)),
	}, nil
}

// Run samples the charts' history every SampleEvery until ctx ends. The
// per-topic totals are sampled always (they are in memory); Redis and the
// ledger are read only while someone has fetched the charts within the
// last History, so an unwatched dashboard costs the backends nothing.
func (d *Dashboard) Run(ctx context.Context) error {
	d.log.WithField("every", d.cfg.SampleEvery).Debug("dashboard sampler started")
	watched := func() bool { return time.Since(time.UnixMilli(d.viewed.Load())) < d.cfg.History }
	d.history.run(ctx, d.cfg.Source, d.cfg.SampleEvery, watched)
	return nil
}

// contentSecurity lets the page load its own scripts and styles and talk
// to its own origin, and nothing else.
const contentSecurity = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; frame-ancestors 'none'"

// Handler serves the page at / and the assets under /dashboard/ (mount it
// on both, outside auth: they hold no data).
func (d *Dashboard) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurity)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == "/" || r.URL.Path == "/dashboard/" || r.URL.Path == "/dashboard/index.html" {
			h.Set("Content-Type", "text/html; charset=utf-8")
			_, _ = w.Write(d.page)
			return
		}
		d.assets.ServeHTTP(w, r)
	})
}

// Series is the answer of GET /v1/dashboard/series.
type Series struct {
	Now       int64         `json:"now"`
	EveryMs   int64         `json:"every_ms"`
	HistoryMs int64         `json:"history_ms"`
	Workers   bool          `json:"workers"`
	Ledger    *ledgerCounts `json:"ledger"` // null when the ledger could not be read
	Topics    []topicSeries `json:"topics"`
	Relay     *relayView    `json:"relay"` // null when this process runs no relay
}

// relayView is the durable topics' relay of this process, as the page
// shows it; times are Unix ms (0: never).
type relayView struct {
	EveryMs  int64 `json:"every_ms"`
	Passes   int64 `json:"passes"`
	Failed   int64 `json:"failed"`
	LastPass int64 `json:"last_pass"`
	// LastOK is the start of the last pass without errors (before the
	// first, when the relay's metrics were set up).
	LastOK     int64 `json:"last_ok"`
	LastReload int64 `json:"last_reload"`
}

func newRelayView(s metrics.RelayState, ok bool) *relayView {
	if !ok {
		return nil
	}
	ms := func(t time.Time) int64 {
		if t.IsZero() {
			return 0
		}
		return t.UnixMilli()
	}
	return &relayView{
		EveryMs: s.Every.Milliseconds(), Passes: s.Totals.Passes, Failed: s.Totals.Failed,
		LastPass: ms(s.Totals.LastPass), LastOK: ms(s.LastOK), LastReload: ms(s.Totals.LastReload),
	}
}

// SeriesHandler serves the charts' data (mount it at SeriesPattern, behind
// the API's token).
func (d *Dashboard) SeriesHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Like every /v1 route: no query parameter and no body are taken.
		if err := httpjson.Query(r); err != nil {
			httpjson.WriteError(w, r, err)
			return
		}
		d.viewed.Store(time.Now().UnixMilli())
		topics, ledger := d.history.series()
		targets := d.cfg.Source.Targets()
		for i := range topics {
			if tg, ok := targets[topics[i].Topic]; ok {
				topics[i].Target = newTargetView(tg)
			}
		}
		out := Series{
			Now: time.Now().UnixMilli(), EveryMs: d.cfg.SampleEvery.Milliseconds(), HistoryMs: d.cfg.History.Milliseconds(),
			Workers: d.cfg.Workers, Ledger: ledger, Topics: topics,
			Relay: newRelayView(d.cfg.Source.RelayState()),
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		if err := json.NewEncoder(w).Encode(out); err != nil {
			d.log.WithError(err).Debug("dashboard: writing the series failed")
		}
	})
}
