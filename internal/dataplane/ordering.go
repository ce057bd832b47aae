package dataplane

import (
	"context"
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
	pipe := c.rdb.Pipeline()
	for i := range jobs {
		key := jobs[i].OrderingKey
		if key == "" {
			continue
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
