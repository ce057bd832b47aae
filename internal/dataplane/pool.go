package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/delayq/delayq/queue"
)

// pool is a queue.Pool of a running worker: topics sharing one budget of
// handler slots (docs/design.md §4.22). Each member counts its slots in
// its runner's busy (claimed, held, queued or running), so the pool's use
// is their sum; a member's reserve asks the pool for room under mu, and
// its releases only lower busy and wake the other members' fetchers.
type pool struct {
	name    string
	size    int
	mu      sync.Mutex // a member's count of its room and its taking of it are one step
	members []*poolMember
	// vt is the pool's virtual time (guarded by mu): the pass at which the
	// last slot was taken. A member's pass counts from it at the least.
	vt float64
}

// poolMember is one topic of a pool.
type poolMember struct {
	tr     *topicRunner
	weight int
	// pass is the member's stride-scheduling pass (guarded by the pool's
	// mu): the slots it took, each counting 1/weight.
	pass float64
}

// wanting says the member has due work it could not claim for want of the
// pool's room: one of its partitions wants (part.wants). The free slots
// are dealt among the asking member and those that want (reserve).
func (m *poolMember) wanting() bool {
	if ps := m.tr.parts.Load(); ps != nil {
		for _, p := range *ps {
			if p.wants.Load() {
				return true
			}
		}
	}
	return false
}

// newPools builds the worker's pools over its registered topics: a pool
// naming a topic the worker does not handle is a mistake (a typo, most
// likely) and an error. A member's Concurrency becomes the pool's, so
// that alone it may use the whole pool.
func newPools(cfg []queue.Pool, topics map[string]*topicRunner) ([]*pool, error) {
	var out []*pool
	for _, pc := range cfg {
		p := &pool{name: pc.Name, size: pc.Concurrency}
		for _, t := range slices.Sorted(maps.Keys(pc.Weights)) {
			tr, ok := topics[t]
			if !ok {
				return nil, fmt.Errorf("queue: worker: pool %s: topic %s has no handler in this worker", pc.Name, t)
			}
			m := &poolMember{tr: tr, weight: pc.Weights[t]}
			tr.pool, tr.member = p, m
			tr.cfg.Concurrency = pc.Concurrency
			tr.work = make(chan *Job, pc.Concurrency+prefetchOf(tr.cfg))
			p.members = append(p.members, m)
		}
		out = append(out, p)
	}
	return out, nil
}

// reserve takes up to want slots of the pool for m's partition pt, and
// returns how many it took; the caller adds them to m's busy inside take,
// under the pool's lock. The pool's free slots are dealt by stride
// scheduling among m and the other members that want work: each slot to
// the one of lowest pass, whose pass then grows by 1/weight, so that the
// members with due work get their slots in proportion to their weights,
// and none is skipped for ever, however small the pool (a pool of 2 over 3
// topics serves them in turn). m takes the slots dealt to it; those dealt
// to the others stay free for their fetchers, which every freed slot
// wakes. A member back from idle starts at the pool's virtual time, so
// its idle spell earns it no burst. A partition held back comes to want.
func (p *pool) reserve(m *poolMember, pt *part, want int, take func(n int)) int {
	if want <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	free := p.size
	type cand struct {
		o    *poolMember
		pass float64
	}
	var cs []cand
	mine := 0 // m's index in cs
	if !m.wanting() {
		// Back from idle, or from slots it did not need: it competes from
		// now on, from the pool's virtual time (kept, so that the pass of
		// a member that comes to want here is not its old one next time).
		m.pass = max(m.pass, p.vt)
	}
	for _, o := range p.members {
		free -= int(o.tr.busy.Load())
		if o == m {
			mine = len(cs)
		}
		if o == m || o.wanting() {
			cs = append(cs, cand{o, o.pass}) // a wanting member's turns dealt and not taken yet are its due
		}
	}
	n := 0
	for ; free > 0 && n < want; free-- {
		best := 0
		for i := range cs {
			if cs[i].pass < cs[best].pass {
				best = i // ties: the first in the pool's (name) order
			}
		}
		if best == mine {
			p.vt = max(p.vt, cs[best].pass)
			n++
		}
		cs[best].pass += 1 / float64(cs[best].o.weight)
	}
	if n > 0 {
		m.pass = cs[mine].pass
		take(n)
	}
	if n < want {
		pt.wants.Store(true)
	}
	return n
}

// refund gives m back the pass of k slots it took and did not fill (its
// claim found fewer due jobs), so that a topic's empty partitions, which
// ask whenever a slot frees, do not spend its turns.
func (p *pool) refund(m *poolMember, k int) {
	p.mu.Lock()
	m.pass -= float64(k) / float64(m.weight)
	p.mu.Unlock()
}

// freed wakes every member's fetchers: a slot of the pool came free.
func (p *pool) freed() {
	for _, m := range p.members {
		m.tr.signalParts()
	}
}

// inFlight is how many slots of the pool are taken.
func (p *pool) inFlight() int64 {
	var n int64
	for _, m := range p.members {
		n += m.tr.busy.Load()
	}
	return n
}
