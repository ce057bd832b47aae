package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
)

// body is a scenario's own part of a run: it measures and fills r.
type body func(ctx context.Context, s *sandbox, o Options, r *Result) error

// run is what every scenario does around its body: defaults, a sandbox,
// and the sandbox's removal whatever happens.
func run(ctx context.Context, name string, o Options, b body) (r Result, err error) {
	r = Result{Scenario: name}
	defer func() {
		if err != nil {
			r.Error = err.Error()
		}
	}()
	sc, ok := Lookup(name)
	if !ok {
		return r, fmt.Errorf("%w: no scenario %q", ErrOptions, name)
	}
	if o, err = o.withDefaults(sc); err != nil {
		return r, err
	}
	r.Params = sc.params(o)
	if len(o.Env.Shards) > 0 && !sc.ShardsOK && o.Env.ShardsConfigured {
		o.Env.Shards = nil
		r.Notes = append(r.Notes, "on ledger shard 0 alone: the scenario does not spread over the configured sql.shards")
	}
	if n := len(o.Env.Shards); n > 0 {
		if !sc.ShardsOK {
			return r, fmt.Errorf("%w: the %s scenario runs on one ledger shard (no --sql-shard)", ErrOptions, name)
		}
		r.Params += fmt.Sprintf(" ledger-shards=%d", n+1)
	}
	durable := ""
	if o.Durable {
		// Every scenario's topic is "bench.<scenario>".
		durable = "bench." + name
		r.Params += " durable"
		r.Durable = true
		_, r.SQLDurability = describeSQL(ctx, o.Env.DB)
		r.Notes = append(r.Notes, durableNote(r.SQLDurability))
	}
	if o.HTTPTarget {
		r.Params += " target"
	}
	if o.Env.Trace {
		r.Params += " trace"
	}
	var noHistory []string
	if o.Env.NoHistory {
		noHistory = []string{"bench." + name}
		r.Params += " no-history"
	}
	s, err := newSandbox(ctx, o.Env, durable, o.Horizon, noHistory)
	if err != nil {
		return r, err
	}
	r.Namespace = s.ns
	if note := s.sharedServers(ctx); note != "" {
		r.Notes = append(r.Notes, note)
	}
	r.Tables = []string{s.led.LedgerTable(), s.led.DeadLetterTable(), s.led.HistoryTable()}
	if k := o.Env.Partitions; k > 1 {
		if _, err = s.q.SetPartitions(ctx, "bench."+name, k); err != nil {
			return r, errors.Join(err, s.close(ctx))
		}
		r.Params += fmt.Sprintf(" partitions=%d", k)
	}
	if o.Rate > 0 {
		r.Params += fmt.Sprintf(" rate=%g", o.Rate)
	}
	err = b(ctx, s, o, &r)
	if cerr := s.close(ctx); cerr != nil {
		err = errors.Join(err, cerr)
	}
	return r, err
}

// durableNote says what a durable run's figures cost: a commit per call
// (shared by coalesced calls), at the SQL server's durability settings.
func durableNote(settings string) string {
	if settings == "" {
		settings = "not reported by the server"
	}
	return "durable topic: every enqueue commits its jobs to the SQL ledger before it returns; SQL durability: " + settings
}

// failures counts failed calls by kind.
type failures struct {
	mu     sync.Mutex
	byKind map[string]int
	n      int
}

func (f *failures) add(kind string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byKind == nil {
		f.byKind = make(map[string]int)
	}
	if len(kind) > 120 {
		kind = kind[:120] + "..."
	}
	f.byKind[kind]++
	f.n++
}

// into writes the counts into r, with a note naming the commonest kinds.
func (f *failures) into(r *Result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r.Failed = f.n
	if f.n == 0 {
		return
	}
	r.FailedBy = f.byKind
	kinds := make([]string, 0, len(f.byKind))
	for k := range f.byKind {
		kinds = append(kinds, k)
	}
	sort.Slice(kinds, func(i, j int) bool { return f.byKind[kinds[i]] > f.byKind[kinds[j]] })
	r.Notes = append(r.Notes, fmt.Sprintf("%d calls failed; the commonest: %q (%d)", f.n, kinds[0], f.byKind[kinds[0]]))
}
