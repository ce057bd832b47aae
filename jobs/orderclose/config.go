package orderclose

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/sirupsen/logrus"
)

// Topic is the queue topic of the close jobs, and JobIDPrefix the prefix of
// their ids: the close job of order 123 is "order_close:123", the
// idempotency key that makes a second enqueue a duplicate.
const (
	Topic       = "order_close"
	JobIDPrefix = "order_close:"
)

// RequiredDurability is what the module needs of Topic, as the configuration
// spells it, for a program that registers it to require (or default to)
// in its queue configuration: the close job commits in its order's
// transaction, which takes the topic's jobs in SQL. New refuses a queue
// client whose Topic's jobs do not wait in SQL.
const RequiredDurability = "durable"

// JobID returns the id of an order's close job.
func JobID(orderNo string) string { return JobIDPrefix + orderNo }

// CancelWarning is what an operator who cancels job id of topic should
// know, where the module runs: cancelling an order's close job does not
// keep the order open, since the sweeper enqueues a new one for a pending
// order past its deadline. "" for any other job.
func CancelWarning(topic, id string) string {
	if topic != Topic || !strings.HasPrefix(id, JobIDPrefix) {
		return ""
	}
	no := strings.TrimPrefix(id, JobIDPrefix)
	return "order " + no + " stays pending_payment: the orders sweeper enqueues a new close job once its deadline has passed, " +
		"so it is still closed then; to keep it open, extend it (POST /v1/orders/" + no + "/extend), or pay it"
}

// Config configures a Service, its close handler, its Sweeper and its HTTP
// module. The zero value of each field means the default written next to
// it.
type Config struct {
	// PaymentWindow is how long a new order waits for its payment before it
	// is closed, unless the order asks for its own. Default 30 minutes.
	PaymentWindow time.Duration
	// MaxPaymentWindow is the longest window an order may ask for. Default
	// 7 days.
	MaxPaymentWindow time.Duration
	// MaxAttempts is how many times a close job is tried before it goes
	// dead. Default 25.
	MaxAttempts int
	// EnqueueTimeout bounds the push of a close job to Redis after its
	// order committed, the Sweeper's enqueues, and the cancel after a
	// payment, so that a Redis that hangs does not hang them. Default 3
	// seconds.
	EnqueueTimeout time.Duration
	// MaxItems is the most lines one order may have. Default 100.
	MaxItems int
	// MaxQuantity is the largest quantity of one line. Default 10,000.
	MaxQuantity int64

	// SweepSpec is the Sweeper's robfig/cron schedule (five fields, or a
	// descriptor such as "@every 30s"). Default "@every 30s".
	SweepSpec string
	// SweepGrace is how long past its pay deadline an order may stay pending
	// before the Sweeper re-enqueues its close job: the time the close job
	// normally needs. Default 1 minute.
	SweepGrace time.Duration
	// SweepPageSize is how many orders the Sweeper reads and enqueues per
	// step (at most the queue client's MaxBatch). Default 500.
	SweepPageSize int
	// SweepLockTTL is the TTL of the Redis lock that lets one process at a
	// time sweep; the holder refreshes it every third of it. A process
	// that dies holding it (killed mid-sweep) holds off every other
	// sweeper for up to this long; one that shuts down releases it.
	// Default 1 minute.
	SweepLockTTL time.Duration
	// SweepLockKey is that lock's key. Default "<queue namespace>:lock:orderclose-sweeper".
	SweepLockKey string

	// MaxBodyBytes bounds an HTTP request body. Default 64 KiB.
	MaxBodyBytes int64

	// OnSweep, if set, is called after every sweep the Sweeper tried, with
	// what RunOnce returns: ran false and err nil is a sweep skipped
	// because another process held the lock (report.HeldBy says who, if
	// known); err set is a failed sweep, ran or not. For metrics.
	OnSweep func(report SweepReport, ran bool, err error)

	// Logger receives the package's logs. Default logrus.StandardLogger().
	Logger logrus.FieldLogger
	// Now is the clock of created_at, pay deadlines, paid_at and closed_at.
	// Default time.Now.
	Now func() time.Time
}

// withDefaults returns c with its zero fields filled in, or an error naming
// the bad field. namespace is the queue client's, for the lock key;
// maxBatch its largest batch, for the page size.
func (c Config) withDefaults(namespace string, maxBatch int) (Config, error) {
	if c.PaymentWindow == 0 {
		c.PaymentWindow = 30 * time.Minute
	}
	if c.MaxPaymentWindow == 0 {
		c.MaxPaymentWindow = 7 * 24 * time.Hour
	}
	if c.MaxAttempts == 0 {
		c.MaxAttempts = 25
	}
	if c.EnqueueTimeout == 0 {
		c.EnqueueTimeout = 3 * time.Second
	}
	if c.MaxItems == 0 {
		c.MaxItems = 100
	}
	if c.MaxQuantity == 0 {
		c.MaxQuantity = 10_000
	}
	if c.SweepSpec == "" {
		c.SweepSpec = "@every 30s"
	}
	if c.SweepGrace == 0 {
		c.SweepGrace = time.Minute
	}
	if c.SweepPageSize == 0 {
		c.SweepPageSize = min(500, maxBatch)
	}
	if c.SweepLockTTL == 0 {
		c.SweepLockTTL = time.Minute
	}
	if c.SweepLockKey == "" {
		c.SweepLockKey = namespace + ":lock:orderclose-sweeper"
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = 64 << 10
	}
	if c.Logger == nil {
		c.Logger = logrus.StandardLogger()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.MaxPaymentWindow < 0:
		return c, fmt.Errorf("orderclose: Config.MaxPaymentWindow %s: must be positive", c.MaxPaymentWindow)
	case c.PaymentWindow < 0 || c.PaymentWindow > c.MaxPaymentWindow:
		return c, fmt.Errorf("orderclose: Config.PaymentWindow %s: want more than 0 and at most MaxPaymentWindow %s", c.PaymentWindow, c.MaxPaymentWindow)
	case c.MaxAttempts < 1 || c.MaxAttempts > 100:
		return c, fmt.Errorf("orderclose: Config.MaxAttempts %d: want 1-100", c.MaxAttempts)
	case c.EnqueueTimeout < 0:
		return c, fmt.Errorf("orderclose: Config.EnqueueTimeout %s: must be positive", c.EnqueueTimeout)
	case c.MaxItems < 1:
		return c, fmt.Errorf("orderclose: Config.MaxItems %d: must be positive", c.MaxItems)
	case c.MaxQuantity < 1 || c.MaxQuantity > 1<<31-1:
		return c, fmt.Errorf("orderclose: Config.MaxQuantity %d: want 1 to 2^31-1", c.MaxQuantity)
	case c.SweepGrace < 0:
		return c, fmt.Errorf("orderclose: Config.SweepGrace %s: must be positive", c.SweepGrace)
	case c.SweepPageSize < 1 || c.SweepPageSize > maxBatch:
		return c, fmt.Errorf("orderclose: Config.SweepPageSize %d: want 1 to the queue's MaxBatch %d", c.SweepPageSize, maxBatch)
	case c.SweepLockTTL < 10*time.Millisecond:
		return c, fmt.Errorf("orderclose: Config.SweepLockTTL %s: want at least 10ms", c.SweepLockTTL)
	case c.MaxBodyBytes < 1:
		return c, fmt.Errorf("orderclose: Config.MaxBodyBytes %d: must be positive", c.MaxBodyBytes)
	}
	if _, err := cron.ParseStandard(c.SweepSpec); err != nil {
		return c, fmt.Errorf("orderclose: Config.SweepSpec %q: %w", c.SweepSpec, err)
	}
	return c, nil
}
