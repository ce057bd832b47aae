package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"gorm.io/gorm/clause"
)

// ShardMark is the one row of the shard mark table (dq_shard_mark): which
// shard of how many this database is, and the home shard's mark, so that
// every shard of one ledger carries the same one (docs/design.md §7.1).
type ShardMark struct {
	ID     int8   `gorm:"column:id;primaryKey;autoIncrement:false;type:tinyint"`
	Shard  int    `gorm:"column:shard;type:int;size:32;not null"`
	Shards int    `gorm:"column:shards;type:int;size:32;not null"`
	Home   string `gorm:"column:home;type:varchar(32);not null"`
	SetAt  int64  `gorm:"column:set_at;type:bigint;not null"`
}

// ErrShardMismatch is wrapped by Shards.Check's refusal: a database in the
// shard list is marked as another shard, of another count or of another
// ledger.
var ErrShardMismatch = errors.New("ledger: the shard list does not match the shards' marks")

// ErrShardUnmarked is wrapped by Shards.Check when a shard has no mark
// table yet (its schema is behind: run delayq migrate); nothing was
// checked on it.
var ErrShardUnmarked = errors.New("ledger: a shard has no shard mark table (migration 8 pending)")

// mark returns the database's shard mark, writing want first if it has
// none (the first process to start on it; one that races it writes
// nothing and reads the winner's).
func (l *Ledger) mark(ctx context.Context, want ShardMark) (ShardMark, error) {
	db := l.conn(ctx)
	if !db.Migrator().HasTable(l.markTable) {
		return ShardMark{}, ErrShardUnmarked
	}
	want.ID = 1
	if err := db.Table(l.markTable).Clauses(clause.OnConflict{DoNothing: true}).Create(&want).Error; err != nil {
		return ShardMark{}, fmt.Errorf("ledger: write the shard mark: %w", err)
	}
	var got ShardMark
	if err := db.Table(l.markTable).Where("id = 1").Take(&got).Error; err != nil {
		return ShardMark{}, fmt.Errorf("ledger: read the shard mark: %w", err)
	}
	return got, nil
}

// Check marks each shard that has no mark yet with its place in the list,
// the list's length and the home shard's mark, and refuses (an error
// wrapping ErrShardMismatch) a list whose shards are marked otherwise: in
// another order, another count, or a database of another ledger. The
// shards are fixed once jobs are written, since a job's rows are looked
// for on the shard its partition maps to; a ledger of one shard that has
// never had more is marked as one of one. A shard without the mark table
// is skipped and reported with ErrShardUnmarked after the others are
// checked.
func (s *Shards) Check(ctx context.Context) error {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return fmt.Errorf("ledger: a shard mark: %w", err)
	}
	n := len(s.all)
	now, err := s.all[0].SQLNow(ctx)
	if err != nil {
		return fmt.Errorf("ledger shard 0: %w", err)
	}
	home, err := s.all[0].mark(ctx, ShardMark{Shard: 0, Shards: n, Home: hex.EncodeToString(b), SetAt: now})
	if err != nil {
		return fmt.Errorf("ledger shard 0: %w", err)
	}
	if home.Shard != 0 || home.Shards != n {
		return fmt.Errorf("%w: the home shard (sql.dsn) is marked as shard %d of %d, the list has %d: every process must list the same shards in the same order, and the list cannot change once jobs were written", ErrShardMismatch, home.Shard, home.Shards, n)
	}
	var unmarked []error
	for i, l := range s.all[1:] {
		i++
		m, err := l.mark(ctx, ShardMark{Shard: i, Shards: n, Home: home.Home, SetAt: now})
		switch {
		case errors.Is(err, ErrShardUnmarked):
			unmarked = append(unmarked, fmt.Errorf("ledger shard %d: %w", i, err))
			continue
		case err != nil:
			return fmt.Errorf("ledger shard %d: %w", i, err)
		}
		switch {
		case m.Home != home.Home:
			return fmt.Errorf("%w: sql.shards[%d] (shard %d) is marked as a shard of another ledger (home mark %s, this one's %s)", ErrShardMismatch, i-1, i, m.Home, home.Home)
		case m.Shard != i || m.Shards != n:
			return fmt.Errorf("%w: sql.shards[%d] is listed as shard %d of %d, and marked as shard %d of %d: every process must list the same shards in the same order", ErrShardMismatch, i-1, i, n, m.Shard, m.Shards)
		}
	}
	return errors.Join(unmarked...)
}
