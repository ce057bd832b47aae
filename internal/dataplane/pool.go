package dataplane

import (
	"fmt"
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
}

// poolMember is one topic of a pool.
type poolMember struct {
	tr     *topicRunner
	weight int
}

// wanting says the member has due work it could not claim for want of the
// pool's room: one of its partitions wants (part.wants). Members that want
// are owed their share before others take more than theirs.
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
		names := make([]string, 0, len(pc.Weights))
		for t := range pc.Weights {
			names = append(names, t)
		}
		slices.Sort(names)
		for _, t := range names {
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

// share is a member's share of the pool among members of total weight:
// at least one slot.
func (p *pool) share(weight, total int) int {
	return max(1, p.size*weight/max(total, 1))
}

// reserve takes up to want slots of the pool for m's partition pt, and
// returns how many it took; the caller adds them to m's busy inside take,
// under the pool's lock. m may take the pool's free slots except those
// owed to members that want work and hold less than their share, and
// always what it is owed itself: over the handlers' turnover, members with
// due work converge on their weights' split. A partition held back comes
// to want.
func (p *pool) reserve(m *poolMember, pt *part, want int, take func(n int)) int {
	if want <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	used, total := 0, 0
	busy := make([]int, len(p.members))
	wanting := make([]bool, len(p.members))
	for i, o := range p.members {
		busy[i], wanting[i] = int(o.tr.busy.Load()), o.wanting()
		used += busy[i]
		if o == m || busy[i] > 0 || wanting[i] {
			total += o.weight // members with work share the pool
		}
	}
	free := p.size - used
	owed, own := 0, 0
	for i, o := range p.members {
		s := p.share(o.weight, total)
		switch {
		case o == m:
			own = max(s-busy[i], 0)
		case wanting[i] && busy[i] < s:
			owed += s - busy[i]
		}
	}
	n := max(min(want, free, max(own, free-owed)), 0)
	if n < want {
		pt.wants.Store(true)
	}
	if n > 0 {
		take(n)
	}
	return n
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
