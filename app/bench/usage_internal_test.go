package bench

import (
	"strings"
	"testing"
	"time"
)

// INFO commandstats is parsed, its deltas over a phase kept for the
// commands called, and a Redis busy with other clients is noted.
func TestCommandStatsDelta(t *testing.T) {
	before := commandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=100,usec=900,usec_per_call=9.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_ping:calls=7,usec=7,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n")
	after := commandStats("# Commandstats\r\n" +
		"cmdstat_evalsha:calls=1100,usec=12900,usec_per_call=11.73,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_ping:calls=7,usec=7,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=2,usec=40,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n")
	now := time.Now()
	u := usageBetween(probe{at: now, redisCPU: -1, commits: -1, fsyncs: -1, ledgerCommits: -1, sqlCPU: -1, cmds: before},
		probe{at: now.Add(time.Second), redisCPU: -1, commits: -1, fsyncs: -1, ledgerCommits: -1, sqlCPU: -1, cmds: after})
	want := map[string]CommandStats{
		"evalsha": {Calls: 1000, Usec: 12000, UsecPerCall: 12},
		"info":    {Calls: 2, Usec: 40, UsecPerCall: 20},
	}
	if len(u.RedisCommands) != len(want) {
		t.Fatalf("commands %+v, want %+v", u.RedisCommands, want)
	}
	for name, w := range want {
		if got := u.RedisCommands[name]; got != w {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}

	r := Result{Usage: u}
	noteOtherClients(&r, 1000)
	if len(r.Notes) != 0 {
		t.Errorf("1,000 script calls for 1,000 calls: notes %q, want none", r.Notes)
	}
	noteOtherClients(&r, 500)
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "other clients") {
		t.Errorf("1,000 script calls for 500 calls: notes %q, want one about other clients", r.Notes)
	}
}
