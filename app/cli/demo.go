package cli

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/jobs/orderclose"
)

// demoOptions shape the traffic the demo generates.
type demoOptions struct {
	every         time.Duration // one new order this often
	paymentWindow time.Duration
	payRatio      float64       // share of orders that get paid
	duration      time.Duration // 0 = until interrupted
}

func (a *app) demoCmd() *cobra.Command {
	o := demoOptions{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run the whole system on embedded backends with an order traffic generator (no Redis or MySQL needed)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Refused before anything starts: a ticker of 0 panics, and a
			// share outside 0-1 means nothing.
			if err := positiveFlags(cmd, "every", "payment-window"); err != nil {
				return err
			}
			if o.payRatio < 0 || o.payRatio > 1 || math.IsNaN(o.payRatio) {
				return usageError{fmt.Errorf("--pay-ratio %v: want a share from 0 to 1", o.payRatio)}
			}
			if o.duration < 0 {
				return usageError{fmt.Errorf("--duration %s: must not be negative (0: until Ctrl-C)", o.duration)}
			}
			cfg, err := a.loadConfig(cmd)
			if err != nil {
				return err
			}
			dir, err := os.MkdirTemp("", "delayq-demo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			demoConfig(&cfg, dir, o)
			if err := cfg.Validate(); err != nil {
				return err
			}
			// demoConfig turned the orders module on whatever the file
			// says: its topic's requirement again.
			if err := requireOrders(&cfg); err != nil {
				return err
			}
			log := newLogger(cfg.Log, a.errOut)
			p := parts{api: true, workers: true, recovery: true, sweeper: true}
			s, err := assemble(cmd.Context(), cfg, log, p, a.version)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if o.duration > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.duration)
				defer cancel()
			}
			fmt.Fprintf(a.out, "delayq demo: API at %s (try: curl %s/v1/topics)\n", s.apiURL(), s.apiURL())
			if s.obs.dash != nil {
				fmt.Fprintf(a.out, "dashboard: open %s/ in a browser; Prometheus metrics at %s/metrics\n", s.apiURL(), s.apiURL())
			}
			fmt.Fprintf(a.out, "one order every %s, paid within its %s window with probability %.0f%%; the rest close when the window ends\n",
				o.every, o.paymentWindow, 100*o.payRatio)
			var wg sync.WaitGroup
			wg.Add(1)
			go func() { defer wg.Done(); a.demoTraffic(ctx, s, o, log) }()
			err = s.run(ctx, p)
			wg.Wait()
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.every, "every", 500*time.Millisecond, "create an order this often")
	f.DurationVar(&o.paymentWindow, "payment-window", 5*time.Second, "how long an order waits for its payment")
	f.Float64Var(&o.payRatio, "pay-ratio", 0.5, "share of orders that get paid in time")
	f.DurationVar(&o.duration, "duration", 0, "stop after this long (0: run until Ctrl-C)")
	return cmd
}

// demoConfig puts the configuration on embedded backends with short
// periods, so a newcomer sees orders close within seconds.
func demoConfig(cfg *config.Config, dir string, o demoOptions) {
	cfg.Redis.Mode = "embedded"
	cfg.SQL.Driver = "sqlite"
	cfg.SQL.SQLitePath = filepath.Join(dir, "delayq-demo.db")
	cfg.SQL.AutoMigrate = true
	cfg.Orders.Enabled = true
	cfg.Orders.PaymentWindow = o.paymentWindow
	cfg.Orders.SweeperSpec = "@every 5s"
	cfg.Orders.SweeperGrace = 2 * time.Second
	cfg.Recovery.Spec = "@every 10s"
	cfg.Worker.Lease = 5 * time.Second
	cfg.Worker.Heartbeat = 0
	cfg.Recovery.Grace = 5 * time.Second
	if cfg.Log.Level == "info" {
		// The demo prints its own story; the logs speak up only when
		// something is wrong (--log-level info shows them all).
		cfg.Log.Level = "warn"
	}
}

func demoSKUs() []orderclose.SKU {
	return []orderclose.SKU{
		{SKU: "tea-green", Stock: 100000, PriceCents: 450},
		{SKU: "tea-black", Stock: 100000, PriceCents: 390},
		{SKU: "mug", Stock: 50000, PriceCents: 1200},
	}
}

// demoTraffic creates orders, pays some of them, and prints what happens
// until ctx ends.
func (a *app) demoTraffic(ctx context.Context, s *system, o demoOptions, log logrus.FieldLogger) {
	skus := demoSKUs()
	if err := orderclose.SeedSKUs(ctx, ordersLedger(s.b).DB(), skus...); err != nil {
		log.WithError(err).Error("demo: seeding SKUs failed")
		return
	}
	tick := time.NewTicker(o.every)
	defer tick.Stop()
	report := time.NewTicker(5 * time.Second)
	defer report.Stop()
	closes := time.NewTicker(250 * time.Millisecond)
	defer closes.Stop()
	var lastClose int64
	var payments sync.WaitGroup
	defer payments.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-report.C:
			a.demoSummary(ctx, s)
		case <-closes.C:
			lastClose = a.demoCloses(ctx, s, lastClose)
		case <-tick.C:
			sku := skus[rand.IntN(len(skus))].SKU
			c, err := s.orders.CreateOrder(ctx, orderclose.NewOrder{
				User:  fmt.Sprintf("user-%d", rand.IntN(100)),
				Items: []orderclose.Item{{SKU: sku, Quantity: int64(1 + rand.IntN(3))}},
			})
			if err != nil {
				if ctx.Err() != nil {
					return // shutting down
				}
				log.WithError(err).Warn("demo: create order failed")
				continue
			}
			no := c.Order.OrderNo
			fmt.Fprintf(a.out, "%s  created %s, closes at %s unless paid\n", clock(), no, time.UnixMilli(c.Order.PayDeadline).Format("15:04:05.000"))
			if rand.Float64() < o.payRatio {
				payIn := time.Duration(rand.Int64N(int64(o.paymentWindow * 8 / 10)))
				payments.Add(1)
				go func() {
					defer payments.Done()
					select {
					case <-ctx.Done():
						return
					case <-time.After(payIn):
					}
					if _, err := s.orders.Pay(ctx, no); err != nil {
						if ctx.Err() != nil {
							return
						}
						log.WithError(err).WithField("order", no).Warn("demo: pay failed")
						return
					}
					fmt.Fprintf(a.out, "%s  paid    %s\n", clock(), no)
				}()
			}
		}
	}
}

// demoCloses prints the orders closed since the close time after, and
// returns the latest close time seen.
func (a *app) demoCloses(ctx context.Context, s *system, after int64) int64 {
	var orders []orderclose.Order
	err := ordersLedger(s.b).DB().WithContext(ctx).Where("status = ? AND closed_at > ?", orderclose.StatusClosed, after).
		Order("closed_at").Limit(1000).Find(&orders).Error
	if err != nil {
		return after
	}
	for _, o := range orders {
		fmt.Fprintf(a.out, "%s  closed  %s, %d ms after its deadline: stock given back\n",
			clock(), o.OrderNo, *o.ClosedAt-o.PayDeadline)
		after = max(after, *o.ClosedAt)
	}
	return after
}

// demoSummary prints the orders by status, and how late the recent
// closes ran (orderclose's Summary, as the dashboard shows it).
func (a *app) demoSummary(ctx context.Context, s *system) {
	sum, err := s.orders.Summary(ctx)
	if err != nil {
		return
	}
	fmt.Fprintf(a.out, "%s  orders: %d pending, %d paid, %d closed (recent closes ran on average %.0f ms after the deadline, at most %d ms)\n",
		clock(), sum.Pending, sum.Paid, sum.Closed, sum.RecentLateAvgMs, sum.RecentLateMaxMs)
}

func clock() string { return time.Now().Format("15:04:05.000") }
