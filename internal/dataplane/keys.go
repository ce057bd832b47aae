package dataplane

import "strconv"

// keys are the Redis keys of one topic. Every one carries the hash tag
// {topic}, so all keys a script touches live in one Redis Cluster slot.
type keys struct {
	due   string // ZSET id -> due time, Unix ms
	job   string // HASH id -> envelope
	lease string // ZSET id -> lease deadline, Unix ms
	dead  string // ZSET id -> time of death, Unix ms
	epoch string // STRING written by the recoverer; gone means Redis lost data
	wake  string // pub/sub channel: a job became due earlier than the head
	gone  string // ZSET id -> when it was acked (durable) or cancelled: tombstones restore honours
	// paused is a STRING with no TTL: it exists while the operator has the
	// topic paused, and holds {"at":ms,"by":actor} (pause.go).
	paused string
	rate   string // HASH tokens, at (Redis ms): the rate limit's token bucket (claim.lua)
	ticks  string // HASH periodic schedule name -> last tick enqueued, Unix ms (periodic.lua)
	// runs is a HASH id -> runs of the job that ended in a failure its
	// handler answered (retry.lua counts them), for Job.Delivery: a claim
	// lost to a crash counts an attempt but no run. A field goes when its
	// job is acked, buried or cancelled.
	runs string
	// cancel is a HASH id -> "<enqueued>|<asked at>": a cancel asked while
	// a worker held the job (cancelrun.lua); its field goes when the job
	// settles as cancelled.
	cancel string
	// taken is a ZSET id -> (taken until, Unix ms) × 4 + how the job
	// ended (0 succeeded, 1 cancelled, 2 purged): a redis topic's ids kept
	// taken for its uniqueness window after their jobs finished (§4.2.1).
	taken string
	// prio is a HASH id -> priority (1 to MaxPriority) of a job of raised
	// priority, from its enqueue until the job is gone (acked, cancelled,
	// deleted): a retry, a release or a requeue puts it back at its level.
	prio string
	// pri[l-1] is a ZSET id -> due time of the waiting jobs of priority l:
	// a copy of their due entries, which claim.lua reads highest level
	// first (§4.23). Every job, whatever its priority, is in due too.
	pri [MaxPriority]string
	// turn is a STRING: jobs claimed from the topic since the last one
	// taken by due time alone, modulo the claim's oldest-every (claim.lua).
	turn string
	// okey, ohold, oq and oseq are per-key ordering's (lua/ordering.lua,
	// docs/design.md §4.24): id -> "ordering key|seq", key -> the id
	// holding it, the parked jobs ("key|due|seq|id", scores 0), and the
	// counter seq comes from.
	okey, ohold, oq, oseq string
}

// order are the keys scripts take for per-key ordering, in this order.
func (k keys) order() []string { return []string{k.okey, k.ohold, k.oq, k.oseq} }

// ordered are levels then order: the keys of the scripts that move a job
// of a priority and an ordering key, after their own.
func (k keys) ordered() []string { return append(k.levels(), k.order()...) }

// levels are the keys scripts take for priorities, in this order: prio,
// then pri of priority 1 to MaxPriority (a script finds the ZSET of
// priority l at prio's index + l).
func (k keys) levels() []string {
	return append([]string{k.prio}, k.pri[:]...)
}

// newKeys builds the keys of topic. Call it only through Client.keysFor,
// which validates the topic first: the name goes into the keys as is.
func newKeys(namespace, topic string) keys {
	p := namespace + ":{" + topic + "}:"
	return keys{
		due:    p + "due",
		job:    p + "job",
		lease:  p + "lease",
		dead:   p + "dead",
		epoch:  p + "epoch",
		wake:   p + "wake",
		gone:   p + "gone",
		paused: p + "paused",
		rate:   p + "rate",
		ticks:  p + "ticks",
		runs:   p + "runs",
		cancel: p + "cancel",
		taken:  p + "taken",
		prio:   p + "prio",
		pri:    [MaxPriority]string{p + "pri:1", p + "pri:2", p + "pri:3"},
		turn:   p + "turn",
		okey:   p + "okey",
		ohold:  p + "ohold",
		oq:     p + "oq",
		oseq:   p + "oseq",
	}
}

// minuteKey is the HASH of topic's per-minute counts of one epoch hour
// (Unix minutes / 60): minutes.go. It carries the topic's hash tag, so
// one script reads a day of them.
func minuteKey(namespace, topic string, hour int64) string {
	return namespace + ":{" + topic + "}:min:" + strconv.FormatInt(hour, 10)
}

// topicsKey is the SET of known topics. It has no hash tag (it spans
// topics), so no script touches it.
func topicsKey(namespace string) string { return namespace + ":topics" }
