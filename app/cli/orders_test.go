package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/jobs/orderclose"
)

// The orders module off adds nothing to the configuration; on, its topic
// takes the durability the module needs unless queue.topics sets it.
func TestRequireOrdersDefaultsItsTopic(t *testing.T) {
	cfg := config.Defaults()
	cfg.Orders.Enabled = false
	if err := requireOrders(&cfg); err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Queue.Topics[orderclose.Topic]; ok || cfg.Queue.Durability != "redis" {
		t.Fatalf("orders off: queue.topics %v, want no %s", cfg.Queue.Topics, orderclose.Topic)
	}
	// Off, the module's topic is a topic like any other.
	cfg.Queue.Topics = map[string]config.QueueTopic{orderclose.Topic: {Durability: "redis"}}
	if err := requireOrders(&cfg); err != nil {
		t.Errorf("orders off, %s redis: %v", ordersTopicKey, err)
	}

	for _, set := range []string{"", "durable"} {
		cfg := config.Defaults()
		cfg.Orders.Enabled = true
		if set != "" {
			cfg.Queue.Topics = map[string]config.QueueTopic{orderclose.Topic: {Durability: set}}
		}
		before := cfg.Queue.Topics
		if err := requireOrders(&cfg); err != nil {
			t.Fatalf("%s set to %q: %v", ordersTopicKey, set, err)
		}
		if got := cfg.Queue.Topics[orderclose.Topic].Durability; got != string(orderclose.RequiredDurability) {
			t.Errorf("%s set to %q: got %q, want %q", ordersTopicKey, set, got, orderclose.RequiredDurability)
		}
		if set == "" && len(before) != 0 {
			t.Errorf("the defaults' map was changed: %v", before)
		}
	}
}

// Over ledger shards the orders topic keeps one partition: its close jobs
// commit with the orders, which are on one shard.
func TestRequireOrdersOnOnePartitionOverShards(t *testing.T) {
	cfg := config.Defaults()
	cfg.Orders.Enabled = true
	cfg.Queue.Topics = map[string]config.QueueTopic{orderclose.Topic: {Partitions: 8}}
	if err := requireOrders(&cfg); err != nil {
		t.Fatalf("one shard, 8 partitions: %v", err)
	}
	cfg.SQL.Shards = []string{"u@tcp(h:3306)/b"}
	var ce *config.Error
	if err := requireOrders(&cfg); !errors.As(err, &ce) || ce.Key != "queue.topics.order_close.partitions" {
		t.Errorf("two shards, 8 partitions: %v, want an error on queue.topics.order_close.partitions", err)
	}
}

// With orders on, a topic set to anything but durable stops every command
// with exit code 2 naming the key, before any backend is opened.
func TestOrdersRefuseTheirTopicNotDurable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	cfg := `log: {level: warn}
redis: {mode: single, addrs: ["127.0.0.1:1"]}
queue: {topics: {order_close: {durability: redis}}}
orders: {enabled: true}
`
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var errOut bytes.Buffer
	for _, cmd := range []string{"serve", "worker", "demo", "migrate", "stats"} {
		errOut.Reset()
		code := Main(context.Background(), []string{cmd, "--config", path}, io.Discard, &errOut, "test")
		if code != ExitUsage {
			t.Errorf("%s exited %d, want %d:\n%s", cmd, code, ExitUsage, errOut.String())
		}
		if want := "queue.topics.order_close.durability = redis: the orders module (orders.enabled) needs"; !strings.Contains(errOut.String(), want) {
			t.Errorf("%s: stderr does not say %q:\n%s", cmd, want, errOut.String())
		}
	}
}

// demo refuses flags that cannot work by their names, exit 2, before it
// starts anything: an interval of 0 would panic the order generator.
func TestDemoRefusesBadFlags(t *testing.T) {
	for _, c := range []struct{ args []string }{
		{[]string{"--every", "0s"}}, {[]string{"--every", "-1s"}}, {[]string{"--payment-window", "0s"}},
		{[]string{"--pay-ratio", "2"}}, {[]string{"--pay-ratio", "-0.5"}}, {[]string{"--duration", "-5s"}},
	} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), append([]string{"demo"}, c.args...), &out, &errOut, "test")
		if code != ExitUsage || out.Len() != 0 || !strings.Contains(errOut.String(), c.args[0]) {
			t.Errorf("demo %v: exit %d, stdout %q, stderr %q", c.args, code, out.String(), errOut.String())
		}
	}
}

// An unknown subcommand is bad usage (exit 2) at every level, not help
// and exit 0; a group alone still prints its help.
func TestUnknownSubcommandsAreUsageErrors(t *testing.T) {
	for _, args := range [][]string{{"bogus"}, {"dead", "bogus"}, {"ledger", "bogus"}, {"bench", "bogus"}, {"completion", "bogus"}} {
		var out, errOut bytes.Buffer
		code := Main(context.Background(), args, &out, &errOut, "test")
		if code != ExitUsage || !strings.Contains(errOut.String(), `unknown command "bogus`) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if code := Main(context.Background(), []string{"dead"}, &out, &errOut, "test"); code != ExitOK || !strings.Contains(out.String(), "Usage:") {
		t.Errorf("dead alone: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}
}
