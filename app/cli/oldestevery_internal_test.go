package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/delayq/delayq/app/config"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// worker.oldest_every is every topic's default and worker.topics.<t>.
// oldest_every a topic's own: what a worker resolves each topic's
// queue.TopicConfig to.
func TestOldestEveryReachesTheTopicConfig(t *testing.T) {
	path := filepath.Join(t.TempDir(), "delayq.yaml")
	if err := os.WriteFile(path, []byte("worker:\n  oldest_every: 50\n  topics:\n    sms: {oldest_every: 1}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := engineConfig(cfg, testenv.QuietLogger(), parts{workers: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for topic, want := range map[string]int{"sms": 1, "mail": 50} {
		tc, err := topicConfig(cfg, topic).Resolve(ec.Worker.Topic)
		if err != nil || tc.OldestEvery != want {
			t.Errorf("%s: oldest every %d (%v), want %d", topic, tc.OldestEvery, err, want)
		}
	}
	// Without the key, the queue's default.
	ec, err = engineConfig(config.Defaults(), testenv.QuietLogger(), parts{workers: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := topicConfig(config.Defaults(), "sms").Resolve(ec.Worker.Topic); err != nil || tc.OldestEvery != queue.DefaultOldestEvery {
		t.Errorf("default: oldest every %d (%v), want %d", tc.OldestEvery, err, queue.DefaultOldestEvery)
	}
}
