package queue

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
)

// Pool gives several topics of a worker one shared pool of handlers
// (docs/design.md §4.22): at most Concurrency of their jobs run (or wait
// claimed for a handler) at once, whichever topics they come from. While
// several topics of the pool have due work, the handlers it frees are
// dealt between them by weight (stride scheduling): a topic of weight 3
// gets 3 of every 4 against one of weight 1, so in a pool of 40 with equal
// handler times they run 30 and 10 at once. A topic without due work
// leaves its share to the others,
// and gets it back as their handlers finish once it has work again: no
// handler is ever stopped for it.
//
// A topic's own Concurrency is replaced by its pool's; its other settings
// (batch size, lease, rate limit...) stay its own. A pool's topics claim
// within the pool's free handlers only: no prefetch beyond them.
type Pool struct {
	// Name names the pool in the workers' registry, metrics and logs:
	// 1-64 letters, digits, '_', '-' or '.'.
	Name string
	// Concurrency is how many jobs of the pool's topics run at once, at
	// most MaxConcurrency.
	Concurrency int
	// Weights are the pool's topics, each with its weight, 1 to
	// MaxPoolWeight. A topic is in at most one pool, and every topic
	// named must be handled by the worker.
	Weights map[string]int
}

// MaxPoolWeight bounds a topic's weight in a Pool.
const MaxPoolWeight = 1000

var poolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// ValidatePoolName checks a Pool's name: 1-64 letters, digits, '_', '-'
// or '.'.
func ValidatePoolName(name string) error {
	if !poolName.MatchString(name) {
		return fmt.Errorf("queue: pool name %q: want 1-64 letters, digits, '_', '-' or '.'", name)
	}
	return nil
}

// PoolError is a Pool ValidatePools refuses: the pool, the field at fault
// ("name", "concurrency", "weights", or "weights.<topic>" for one topic),
// its value and what is wanted, so that a configuration can name its own
// key.
type PoolError struct {
	Pool  string
	Field string
	Value any
	Want  string
	msg   string
}

func (e *PoolError) Error() string { return e.msg }

// ValidatePools checks pools as a worker takes them: valid names, each
// once; a concurrency of 1 to MaxConcurrency; at least one topic, each
// a valid topic name of weight 1 to MaxPoolWeight, and in one pool only.
// The error is a *PoolError.
func ValidatePools(pools []Pool) error {
	names := map[string]bool{}
	inPool := map[string]string{}
	for i, p := range pools {
		bad := func(field string, value any, want, format string, args ...any) error {
			return &PoolError{Pool: p.Name, Field: field, Value: value, Want: want, msg: fmt.Sprintf(format, args...)}
		}
		if err := ValidatePoolName(p.Name); err != nil {
			return bad("name", p.Name, "want 1-64 letters, digits, '_', '-' or '.'", "queue: pools[%d]: %v", i, err)
		}
		if names[p.Name] {
			return bad("name", p.Name, "want each name once", "queue: pool %s: named twice", p.Name)
		}
		names[p.Name] = true
		if p.Concurrency < 1 || p.Concurrency > MaxConcurrency {
			want := fmt.Sprintf("want 1-%d", MaxConcurrency)
			return bad("concurrency", p.Concurrency, want, "queue: pool %s: concurrency %d: %s", p.Name, p.Concurrency, want)
		}
		if len(p.Weights) == 0 {
			return bad("weights", "{}", "want at least one topic: weight", "queue: pool %s: weights: want at least one topic", p.Name)
		}
		for _, t := range slices.Sorted(maps.Keys(p.Weights)) { // the same error every time
			if err := ValidateTopic(t); err != nil {
				return bad("weights."+t, t, "not a valid topic name: "+err.Error(), "queue: pool %s: weights: %v", p.Name, err)
			}
			if w := p.Weights[t]; w < 1 || w > MaxPoolWeight {
				want := fmt.Sprintf("want a weight of 1-%d", MaxPoolWeight)
				return bad("weights."+t, w, want, "queue: pool %s: weight of %s %d: want 1-%d", p.Name, t, w, MaxPoolWeight)
			}
			if other, ok := inPool[t]; ok {
				return bad("weights."+t, t, "want one pool per topic: it is in pool "+other+" already",
					"queue: pool %s: topic %s is in pool %s already", p.Name, t, other)
			}
			inPool[t] = p.Name
		}
	}
	return nil
}
