package cli

import (
	"context"
	"net"

	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/jobs/orderclose"
	"github.com/delayq/delayq/ledger"
	"github.com/delayq/delayq/queue"
	"github.com/delayq/delayq/queue/periodic"
	"github.com/delayq/delayq/recovery"
)

// jobStore is what the operator commands (enqueue, cancel, get, jobs, stats,
// dead, ledger, recover, smoke) read and write jobs through: Redis and SQL
// directly (directStore), or a running instance's API (apiStore). The
// commands print the same either way.
type jobStore interface {
	Enqueue(ctx context.Context, topic string, j queue.NewJob) (queue.EnqueueResult, error)
	// Cancel cancels a job that has not started, or asks the worker that
	// holds one to cancel its run (the answer then in flight, with
	// CancelRequestedAt); queue.ErrNotFound, queue.ErrInFlight (its data
	// lost from Redis) or queue.ErrDead otherwise.
	// The answer is the cancelled job as the API renders it, with its
	// warning (httpapi.Deps.CancelWarning).
	Cancel(ctx context.Context, topic, id string) (httpapi.JobView, error)
	// Reschedule moves a waiting job's due time (dataplane.Client.Reschedule):
	// queue.ErrNotFound, queue.ErrInFlight or queue.ErrDead otherwise.
	Reschedule(ctx context.Context, topic, id string, to queue.When) (*queue.Rescheduled, error)
	// Get returns StateUnknown for a job that does not exist.
	Get(ctx context.Context, topic, id string) (*queue.JobInfo, error)
	// Stats returns the topics' counts as the API shows them (durability
	// and a durable topic's waiting jobs in SQL included), every known
	// topic's when none.
	Stats(ctx context.Context, topics []string) ([]httpapi.TopicStats, error)
	Dead(ctx context.Context, topic string, offset, limit int) (*queue.Page, error)
	// Jobs returns a page of the job browser (httpapi.BrowseJobs) as the
	// API shows it.
	Jobs(ctx context.Context, topic string, jq httpapi.JobQuery) (httpapi.JobPage, error)
	RequeueDead(ctx context.Context, topic, id string) error
	RequeueAllDead(ctx context.Context, topic string) (int, error)
	PurgeDead(ctx context.Context, topic string, before int64) (int, error)
	// DeleteDead deletes one dead job (httpapi.DeleteDead): queue.ErrNotFound
	// when it is not dead.
	DeleteDead(ctx context.Context, topic, id string) error
	// SetPaused pauses or resumes a topic (dataplane.Client.Pause, Resume):
	// its state afterwards, as the API answers it.
	SetPaused(ctx context.Context, topic string, paused bool) (httpapi.PauseResponse, error)
	// Partitions reads a topic's partition count and, with set > 0,
	// raises it to set first (dataplane.Client.SetPartitions).
	Partitions(ctx context.Context, topic string, set int) (httpapi.PartitionsResponse, error)
	// List returns a page of ledger rows (ledger.List) as the API shows
	// it.
	List(ctx context.Context, f ledger.ListFilter) (httpapi.LedgerPage, error)
	Stale(ctx context.Context, olderThan int64, limit int) ([]ledger.Entry, error)
	// Recover runs recovery once; a run that failed part way returns its
	// report with the error.
	Recover(ctx context.Context, dryRun bool) (*recovery.Report, error)
	// SmokeRan reports whether the smoke job id has run, and when.
	SmokeRan(ctx context.Context, id string) (ranAt int64, ran bool, err error)
	// Schedules lists the configured periodic schedules with their next
	// run and the last tick any process enqueued (schedules.go).
	Schedules(ctx context.Context) ([]periodic.Info, error)
	// Workers lists the worker processes of the registry, live or gone.
	Workers(ctx context.Context) ([]queue.WorkerInfo, error)
	// History reads the finished jobs f selects (ledger.Ledger.History).
	History(ctx context.Context, f ledger.HistoryFilter) (httpapi.HistoryPage, error)
	// Products lists the orders module's products by SKU; PutProduct
	// creates one or sets its stock and price.
	Products(ctx context.Context, after string, limit int) (orderclose.ProductPage, error)
	PutProduct(ctx context.Context, sku string, stock, priceCents int64) (orderclose.ProductView, error)
	// Where names the store for messages: "Redis namespace dq", "the
	// instance at http://...".
	Where() string
	Close() error
}

// store opens the jobStore the configuration calls for:
//   - cli.api (--api, DELAYQ_CLI_API) set: that instance's API;
//   - else redis.mode embedded: the API at http.listen, since an embedded
//     Redis of the command's own would be thrown away with it;
//   - else Redis and SQL directly.
func (a *app) store(cmd *cobra.Command) (jobStore, error) {
	cfg, err := a.loadConfig(cmd)
	if err != nil {
		return nil, err
	}
	return a.storeFor(cmd.Context(), cfg)
}

// storeFor is store for a configuration the command has loaded already.
func (a *app) storeFor(ctx context.Context, cfg config.Config) (jobStore, error) {
	switch {
	case cfg.CLI.API != "":
		return newAPIStore(cfg.CLI.API, cfg.HTTP.Token, true)
	case cfg.Redis.Mode == "embedded":
		return newAPIStore(listenURL(cfg.HTTP.Listen), cfg.HTTP.Token, false)
	}
	b, log, err := a.openBackends(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &directStore{cfg: cfg, b: b, log: log}, nil
}

// listenURL is the URL that reaches a server listening on addr: a wildcard
// host (":8080", "0.0.0.0:8080", "[::]:8080") is reached on loopback.
func listenURL(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "http://" + addr // the API client says what is wrong with it
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}
