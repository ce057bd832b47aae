package config_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/app/config"
)

func TestTargetLoads(t *testing.T) {
	path := writeFile(t, `worker:
  target_allow_hosts: [hooks.example.com]
  topics:
    remind:
      concurrency: 20
      target:
        url: https://hooks.example.com/remind
        method: PUT
        headers: {X-Team: billing}
        timeout: 3s
        success_statuses: [200, 202-204]
        permanent_statuses: [4xx]
        secret_env: BILLING_HOOK_SECRET
`)
	c, err := config.Load(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	tg := c.Worker.Topics["remind"].Target
	if tg == nil || tg.URL != "https://hooks.example.com/remind" || tg.Method != "PUT" || tg.Timeout != 3*time.Second ||
		tg.Headers["X-Team"] != "billing" || strings.Join(tg.SuccessStatuses, ",") != "200,202-204" ||
		strings.Join(tg.PermanentStatuses, ",") != "4xx" || tg.SecretEnv != "BILLING_HOOK_SECRET" {
		t.Fatalf("target = %+v", tg)
	}
	if c.Worker.Topics["remind"].Concurrency != 20 {
		t.Errorf("topic concurrency lost: %+v", c.Worker.Topics["remind"])
	}
}

func TestTargetInvalidNamesTheKey(t *testing.T) {
	cases := map[string]string{
		"worker:\n  topics:\n    t1:\n      target: {url: 'ftp://x/'}\n":                              "worker.topics.t1.target.url",
		"worker:\n  topics:\n    t1:\n      target: {}\n":                                             "worker.topics.t1.target.url",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', method: GET}\n":                "worker.topics.t1.target.method",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', headers: {Delayq-Topic: y}}\n": "worker.topics.t1.target.headers",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', success_statuses: [9xx]}\n":    "worker.topics.t1.target.success_statuses",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', permanent_statuses: [abc]}\n":  "worker.topics.t1.target.permanent_statuses",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', timeout: -1s}\n":               "worker.topics.t1.target.timeout",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', secret_env: 'A-B'}\n":          "worker.topics.t1.target.secret_env",
		"worker:\n  target_allow_hosts: [y]\n  topics:\n    t1:\n      target: {url: 'http://x/'}\n":  "worker.topics.t1.target.url",
		"worker:\n  target_allow_hosts: ['http://y/']\n":                                              "worker.target_allow_hosts",
		"worker:\n  topics:\n    t1:\n      target: {url: 'http://x/', no_such_key: 1}\n":             "no_such_key",
	}
	for body, key := range cases {
		_, err := config.Load(writeFile(t, body), nil)
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v does not name %s", body, err, key)
		}
		if key != "no_such_key" && !errors.Is(err, config.ErrInvalid) {
			t.Errorf("%s: error %v is not ErrInvalid", body, err)
		}
	}
}
