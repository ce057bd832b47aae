package queue

import (
	"fmt"
)

// Durability says where a topic's waiting jobs are kept safe (docs/design.md,
// §4.11 Durable topics).
type Durability string

const (
	// DurabilityRedis keeps a waiting job in Redis only: the fastest
	// enqueue (one script call), protected by Redis's persistence until a
	// worker claims it and writes its ledger row. The library's default: it
	// needs no SQL database.
	DurabilityRedis Durability = "redis"
	// DurabilityDurable commits every job to the SQL ledger before the
	// enqueue returns (a waiting row), then pushes it to Redis, which
	// holds only the near future (Config.Horizon). Redis may lose anything
	// at any time: the relay and the recoverer put it back from SQL.
	DurabilityDurable Durability = "durable"
)

// ParseDurability reads "redis" or "durable".
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case DurabilityRedis, DurabilityDurable:
		return d, nil
	}
	return "", fmt.Errorf("durability %q: want redis or durable", s)
}
