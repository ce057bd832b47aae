package dataplane

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// parkScore is added to the due score of a job parked behind its ordering
// key's holder (lua/ordering.lua's PARK, 2^51 ms): beyond any claim's
// reach, within a double's exact integers.
const parkScore = 1 << 51

// orderingKeyOf reads an okey field ("ordering key|seq"); "" for none.
func orderingKeyOf(v string) string {
	if i := strings.LastIndexByte(v, '|'); i >= 0 {
		return v[:i]
	}
	return ""
}

// keyHomes finds, for the jobs of an ordering key on a topic whose layout
// lists older partition counts (a raise still draining, docs/design.md
// §4.24), the partition of an older layout where the job's key is held:
// by job index, the partition's name. Such a job goes there, behind its
// key's jobs, instead of to the current layout, so that the key's jobs
// stay in one place until they drained. Nil when no job has a key or the
// topic has one layout. Best effort: when Redis does not answer the jobs
// go to the current layout (a durable enqueue goes on without Redis).
func (c *Client) keyHomes(ctx context.Context, l Layout, topic string, jobs []NewJob) map[int]string {
	counts := l.counts()
	if len(counts) < 2 {
		return nil
	}
	type probe struct {
		job  int
		name string
		held *redis.BoolCmd
	}
	var probes []probe
	var pipe redis.Pipeliner // made for the first job of a key
	for i := range jobs {
		key := jobs[i].OrderingKey
		if key == "" {
			continue
		}
		if pipe == nil {
			pipe = c.rdb.Pipeline()
		}
		// The newest older layout first: a key only ever moves on to a
		// newer one.
		for n := len(counts) - 2; n >= 0; n-- {
			k := counts[n]
			name := l.partitions(topic, k)[PartitionOf(key, jobs[i].ID, k)]
			probes = append(probes, probe{i, name, pipe.HExists(ctx, newKeys(c.cfg.Namespace, name).ohold, key)})
		}
	}
	if len(probes) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil
	}
	homes := make(map[int]string)
	for _, p := range probes {
		if _, found := homes[p.job]; !found && p.held.Val() {
			homes[p.job] = p.name
		}
	}
	return homes
}

// orderHealPage is how many held keys one orderheal.lua call looks at.
const orderHealPage = 500

// HealOrdering settles the held ordering keys of names (topics' or
// partitions' names, as AllPartitions lists them): a key whose holder is
// gone from Redis (a path that knows nothing of ordering keys, such as a
// worker of an older release, acked or buried it) goes to its earliest
// parked job, and a holder that has not started gives way to a parked job
// due before it (docs/design.md §4.24). It returns how many keys changed
// hands. The recoverer calls it every run.
func (c *Client) HealOrdering(ctx context.Context, names []string) (int, error) {
	healed := 0
	for _, name := range names {
		k, err := c.keysFor(name)
		if err != nil {
			return healed, err
		}
		keys := releaseKeys(k) // the same keys, in the same order
		for cursor := "0"; ; {
			reply, err := c.scripts.orderHeal.Run(ctx, c.rdb, keys, cursor, orderHealPage).Slice()
			if err != nil {
				return healed, fmt.Errorf("queue: heal ordering keys of %s: %w", name, err)
			}
			if len(reply) != 2 {
				return healed, fmt.Errorf("queue: heal ordering keys of %s: reply of %d values", name, len(reply))
			}
			cursor, _ = reply[0].(string)
			healed += int(asInt64(reply[1]))
			if cursor == "0" || cursor == "" {
				break
			}
		}
	}
	return healed, nil
}
