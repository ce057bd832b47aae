package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/delayq/delayq/app/dashboard"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/app/metrics"
)

// observability is what a process shows of itself: its Prometheus metrics
// (on the API's listener, on a listener of their own, or both), and the
// dashboard with its chart sampler.
type observability struct {
	metrics *metrics.Metrics // always there: the worker and queue client feed it
	onAPI   bool             // GET /metrics on the API's listener
	dash    *dashboard.Dashboard
	// minutes writes the per-minute counts of the dashboard's 24-hour
	// charts from metrics (every process); backlog says this process
	// samples the topics' backlog for them (the API's).
	minutes metrics.MinutesConfig
	server  *http.Server // metrics.listen's server, nil without one
	ln      net.Listener
}

// buildObservability registers the scrape-time metrics and builds the
// dashboard and the metrics listener that the configuration and parts ask
// for; nothing runs yet.
func (s *system) buildObservability(p parts) error {
	o, c := &s.obs, s.cfg
	if s.b != nil && s.b.Queue != nil {
		o.minutes = metrics.MinutesConfig{Writer: s.b.Queue, Logger: s.log}
	}
	o.onAPI = p.api && c.Metrics.Enabled
	ownListener := c.Metrics.Enabled && c.Metrics.Listen != ""
	withDashboard := p.api && c.Dashboard.Enabled
	if !o.onAPI && !ownListener && !withDashboard {
		return nil
	}
	err := o.metrics.WatchState(metrics.StateConfig{Queue: s.b.Queue, Ledger: s.b.Shards, StaleAfter: c.Recovery.Grace})
	if err != nil {
		return err
	}
	if s.b.Shards != nil {
		if err := o.metrics.WatchLedgerWrites(s.b.Shards); err != nil {
			return err
		}
	}
	if p.recovery || p.api { // the API runs the recoverer on request
		if err := o.metrics.WatchRecoverer(s.eng.RecoveryCounters, s.eng.RecoveryConfig().Schedule); err != nil {
			return err
		}
	}
	if p.recovery { // the relay runs with the recoverer
		if err := o.metrics.WatchRelay(relayReader{s.eng}, s.eng.RelayConfig().Every); err != nil {
			return err
		}
	}
	if s.sweep != nil {
		if err := o.metrics.WatchSweeper(s.orders.Config().SweepSpec); err != nil {
			return err
		}
	}
	if withDashboard {
		o.minutes.Backlog = o.backlog
		o.dash, err = dashboard.New(dashboard.Config{
			Source:      o.metrics,
			Auth:        c.HTTP.Token != "",
			ReadOnly:    c.HTTP.ReadOnly,
			Orders:      s.orders != nil,
			Workers:     p.workers,
			StaleAfter:  c.Recovery.Grace,
			SampleEvery: c.Dashboard.SampleEvery,
			History:     c.Dashboard.History,
			Minutes:     s.b.Queue,
			Logger:      s.log,
		})
		if err != nil {
			return err
		}
	}
	if ownListener {
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", o.metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
		// The API's timeouts: a scraper sends no body, so a client slower
		// than these is holding the listener, not using it.
		o.server = &http.Server{
			Addr:              c.Metrics.Listen,
			Handler:           mux,
			ReadHeaderTimeout: httpapi.DefaultReadHeaderTimeout,
			ReadTimeout:       httpapi.DefaultReadTimeout,
			WriteTimeout:      httpapi.DefaultWriteTimeout,
			IdleTimeout:       httpapi.DefaultIdleTimeout,
			MaxHeaderBytes:    64 << 10,
		}
		if o.ln, err = net.Listen("tcp", c.Metrics.Listen); err != nil {
			return fmt.Errorf("metrics.listen %s: %w", c.Metrics.Listen, err)
		}
	}
	return nil
}

// apiMetrics is the API's /metrics handler, nil when not on the API.
func (o *observability) apiMetrics() http.Handler {
	if !o.onAPI {
		return nil
	}
	return o.metrics.Handler()
}

// apiDashboard is the API's dashboard handler, nil without a dashboard.
func (o *observability) apiDashboard() http.Handler {
	if o.dash == nil {
		return nil
	}
	return o.dash.Handler()
}

// apiModules are the dashboard's /v1 routes (behind the API's token).
func (o *observability) apiModules() []httpapi.Module {
	if o.dash == nil {
		return nil
	}
	return []httpapi.Module{
		{Pattern: dashboard.SeriesPattern, Handler: o.dash.SeriesHandler()},
		{Pattern: dashboard.MinutesPattern, Handler: o.dash.MinutesHandler()},
	}
}

// run starts the dashboard's sampler and the metrics listener as parts of
// the system.
func (o *observability) run(ctx context.Context, start func(string, func() error), fail func(string, error), wg *sync.WaitGroup, log logrus.FieldLogger) {
	if o.minutes.Writer != nil {
		start("minute counts", func() error { return o.metrics.RunMinutes(ctx, o.minutes) })
	}
	if o.dash != nil {
		start("dashboard", func() error { return o.dash.Run(ctx) })
	}
	if o.server != nil {
		serveHTTP(ctx, "metrics", o.server, o.ln, start, fail, wg)
		log.WithField("url", "http://"+o.ln.Addr().String()+"/metrics").Info("metrics listening")
	}
}

// backlog reads every topic's jobs due and not claimed, for the
// per-minute counts (from the reading the scrapes and the dashboard
// share).
func (o *observability) backlog(ctx context.Context) (map[string]int64, error) {
	st, err := o.metrics.State(ctx)
	if err != nil {
		return nil, err
	}
	if st.RedisErr != nil {
		return nil, st.RedisErr
	}
	out := make(map[string]int64, len(st.Topics))
	for _, t := range st.Topics {
		out[t.Topic] = t.DueNow
	}
	return out, nil
}

// close releases a metrics listener that was never served.
func (o *observability) close() {
	if o.ln != nil {
		_ = o.ln.Close() // already closed when it was served
	}
}
