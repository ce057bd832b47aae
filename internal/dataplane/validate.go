package dataplane

import (
	"fmt"
	"time"
)

// validate checks a new job and fills in its defaults. now is the local
// clock, used only for the coarse one-year bound; whether a job is due is
// decided by Redis's clock.
func (c *Client) validate(j *NewJob, now time.Time) error {
	if err := ValidateID(j.ID); err != nil {
		return err
	}
	if j.OrderingKey != "" {
		if ValidateID(j.OrderingKey) != nil {
			return &ValidationError{Field: "ordering_key", Kind: ErrInvalidOrderingKey,
				Reason: fmt.Sprintf("%q: want 1-200 characters of [A-Za-z0-9_.:@/-]", truncateKey(j.OrderingKey))}
		}
		// A key's jobs share a partition: its ordering key is its
		// partition key (docs/design.md §4.24).
		if j.PartitionKey != "" && j.PartitionKey != j.OrderingKey {
			return &ValidationError{Field: "partition_key", Kind: ErrInvalidOrderingKey,
				Reason: "a job of an ordering key is partitioned by it: leave partition_key empty or give the same"}
		}
		j.PartitionKey = j.OrderingKey
	}
	if j.PartitionKey != "" && ValidateID(j.PartitionKey) != nil {
		return &ValidationError{Field: "partition_key", Kind: ErrInvalidPartition,
			Reason: fmt.Sprintf("%q: want 1-200 characters of [A-Za-z0-9_.:@/-]", truncateKey(j.PartitionKey))}
	}
	if len(j.Payload) > c.cfg.MaxPayloadBytes {
		return &ValidationError{Field: "payload", Kind: ErrPayloadTooLarge,
			Reason: fmt.Sprintf("%d bytes: limit is %d", len(j.Payload), c.cfg.MaxPayloadBytes)}
	}
	if j.RunAt != 0 && j.Delay != 0 {
		return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
			Reason: "give either a delay or a due time, not both"}
	}
	if j.Delay < 0 || j.Delay > c.cfg.MaxDelay {
		return &ValidationError{Field: "delay", Kind: ErrInvalidRunAt,
			Reason: fmt.Sprintf("%s: want 0 to %s", j.Delay, c.cfg.MaxDelay)}
	}
	if j.RunAt != 0 {
		latest := now.Add(c.cfg.MaxDelay).UnixMilli()
		if j.RunAt < earliestRunAt || j.RunAt > latest {
			return &ValidationError{Field: "run_at", Kind: ErrInvalidRunAt,
				Reason: fmt.Sprintf("%d: want Unix milliseconds from %d (2001-01-01) to %d (now + %s)",
					j.RunAt, int64(earliestRunAt), latest, c.cfg.MaxDelay)}
		}
	}
	if j.MaxAttempts == 0 {
		j.MaxAttempts = c.cfg.DefaultMaxAttempts
	}
	if j.MaxAttempts < 1 || j.MaxAttempts > MaxAttempts {
		return &ValidationError{Field: "max_attempts", Kind: ErrInvalidMaxAttempts,
			Reason: fmt.Sprintf("%d: want 1-%d", j.MaxAttempts, MaxAttempts)}
	}
	if j.Priority < 0 || j.Priority > MaxPriority {
		return &ValidationError{Field: "priority", Kind: ErrInvalidPriority,
			Reason: fmt.Sprintf("%d: want 0-%d", j.Priority, MaxPriority)}
	}
	return nil
}

// earliestRunAt is 2001-01-01T00:00:00Z in Unix ms, a limit no config can
// widen: a due time before it is almost surely seconds passed as
// milliseconds.
const earliestRunAt = 978307200000

// truncateKey shortens a refused key for its error message.
func truncateKey(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
