package queue

import "time"

// DefaultRegistryEvery is WorkerConfig.RegistryEvery when it is 0.
const DefaultRegistryEvery = 5 * time.Second

// RegistryForget is how long a worker that stopped heartbeating stays in
// the registry, shown as gone, before it is removed.
const RegistryForget = 10 * time.Minute

// WorkerInfo is one worker process as the workers' registry shows it
// (docs/design.md §4.19): written by the process every RegistryEvery,
// idle or not, and removed when it stops; times are Unix ms on Redis's
// clock.
type WorkerInfo struct {
	ID        string `json:"id"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Version   string `json:"version,omitempty"`
	StartedAt int64  `json:"started_at"`
	// Heartbeat is when the entry was last written; EveryMs how often it
	// is.
	Heartbeat int64 `json:"heartbeat"`
	EveryMs   int64 `json:"every_ms"`
	// LedgerOK says whether the process's ledger answered its last ping
	// (one per entry written): a process cut off from SQL alone shows
	// false, and lets its jobs go after its LedgerHold only while another
	// live process shows true.
	LedgerOK bool `json:"ledger_ok"`
	// Topics are the topics the process handles, with their handlers and
	// the jobs it holds (claimed and not settled).
	Topics []WorkerTopic `json:"topics"`
	// Pools are the process's shared pools of handlers (WorkerConfig.Pools),
	// each with the jobs its topics hold; none when it has none.
	Pools []WorkerPool `json:"pools,omitempty"`
	// State is live, or gone once its heartbeat is older than 1.5 × its
	// EveryMs (the process stopped without saying so: killed, or cut off
	// from Redis). A reader sets it.
	State string `json:"state"`
}

// WorkerTopic is one topic of a worker process. A topic in a pool shows
// the pool's concurrency, the pool's name and its weight in it.
type WorkerTopic struct {
	Topic       string `json:"topic"`
	Concurrency int    `json:"concurrency"`
	InFlight    int64  `json:"in_flight"`
	Pool        string `json:"pool,omitempty"`
	Weight      int    `json:"weight,omitempty"`
}

// WorkerPool is one shared pool of handlers of a worker process (Pool).
type WorkerPool struct {
	Name        string `json:"name"`
	Concurrency int    `json:"concurrency"`
	InFlight    int64  `json:"in_flight"`
}

// The states of WorkerInfo.
const (
	WorkerLive = "live"
	WorkerGone = "gone"
)

// Consumers counts, per topic, the live worker processes that handle it.
func Consumers(workers []WorkerInfo) map[string]int {
	out := map[string]int{}
	for _, w := range workers {
		if w.State != WorkerLive {
			continue
		}
		for _, t := range w.Topics {
			out[t.Topic]++
		}
	}
	return out
}

// Live reports whether w heartbeated within 1.5 × its interval of now
// (Unix ms).
func (w WorkerInfo) Live(now int64) bool { return now-w.Heartbeat <= w.EveryMs*3/2 }
