package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/delayq/delayq/queue"
)

// The pause state of topics is operator intent: it lives here, where a
// Redis data loss cannot reach it (docs/design.md §4.13).
var _ queue.PauseStore = (*Ledger)(nil)

// maxActorLen is changed_by's size: an audit name, never longer in practice
// ("token:1a2b3c4d", "cli:user@host").
const maxActorLen = 191

// TopicState is one row of the topic state table (dq_topic_state): a
// topic's pause state as an operator last set it. A topic never paused has
// no row. ChangedAt is the SQL server's clock, Unix ms, and grows with every
// change of a topic (so the relay can tell which of Redis's key and this row
// is newer).
type TopicState struct {
	Topic     string `gorm:"column:topic;type:varchar(64);primaryKey"`
	Paused    bool   `gorm:"column:paused;not null"`
	ChangedAt int64  `gorm:"column:changed_at;type:bigint;not null"`
	ChangedBy string `gorm:"column:changed_by;type:varchar(191);not null"`
	// Layouts are the topic's partition counts that may hold jobs,
	// ascending, comma-separated ("" when never partitioned; see
	// SetLayouts). A row written for its layouts alone has paused 0 and
	// changed_at 0, which no pause state is older than.
	Layouts string `gorm:"column:layouts;type:varchar(1024);not null;default:''"`
}

// TopicStateTable returns the name of the topic state table (dq_topic_state
// by default).
func (l *Ledger) TopicStateTable() string { return l.stateTable }

func (s TopicState) pauseState() queue.PauseState {
	return queue.PauseState{Topic: s.Topic, Paused: s.Paused, At: s.ChangedAt, By: s.ChangedBy}
}

// SetPaused records topic's pause state (queue.PauseStore): changed_at is
// the SQL server's clock, and at least one more than the row's last. A call
// that would not change the state changes nothing and returns the row as it
// is, changed false: who paused a topic and when stays the first pause's; a
// resume of a topic never paused writes no row.
func (l *Ledger) SetPaused(ctx context.Context, topic string, paused bool, actor string) (queue.PauseState, bool, error) {
	if topic == "" {
		return queue.PauseState{}, false, errors.New("ledger: set paused: empty topic")
	}
	if err := checkText("topic", topic, maxTopicLen); err != nil {
		return queue.PauseState{}, false, err
	}
	actor = cutText(actor, maxActorLen)
	var (
		st      queue.PauseState
		changed bool
	)
	err := l.updateState(ctx, topic, func(tx *gorm.DB, row TopicState, found bool) error {
		if found && row.Paused == paused {
			st, changed = row.pauseState(), false
			return nil
		}
		if !found && !paused {
			// Never paused: a resume changes nothing and leaves no row
			// (a typo of a topic's name would stay in the table).
			st, changed = queue.PauseState{Topic: topic}, false
			return nil
		}
		now, err := l.sqlNow(tx)
		if err != nil {
			return err
		}
		next := TopicState{Topic: topic, Paused: paused, ChangedAt: max(now, row.ChangedAt+1), ChangedBy: actor}
		if found {
			err = tx.Table(l.stateTable).Where("topic = ?", topic).Updates(map[string]any{
				"paused": paused, "changed_at": next.ChangedAt, "changed_by": actor}).Error
		} else {
			err = tx.Table(l.stateTable).Create(&next).Error
		}
		if err != nil {
			return err
		}
		st, changed = next.pauseState(), true
		return nil
	})
	if err != nil {
		return queue.PauseState{}, false, fmt.Errorf("ledger: set paused of %s: %w", topic, err)
	}
	return st, changed, nil
}

// updateState runs fn in a transaction with topic's row of the topic state
// table read under its lock (found false, and the zero row, when it has
// none), for fn to write. Two first writes of a topic racing both find no
// row; the loser's INSERT fails on the key, and its second try (of three)
// finds the winner's row.
func (l *Ledger) updateState(ctx context.Context, topic string, fn func(tx *gorm.DB, row TopicState, found bool) error) error {
	for try := 1; ; try++ {
		err := l.transaction(ctx, func(tx *gorm.DB) error {
			var row TopicState
			q := tx.Table(l.stateTable).Where("topic = ?", topic)
			if l.dialect.name == "mysql" {
				q = q.Clauses(clause.Locking{Strength: "UPDATE"})
			}
			found := true
			if err := q.Take(&row).Error; errors.Is(err, gorm.ErrRecordNotFound) {
				found = false
			} else if err != nil {
				return err
			}
			return fn(tx, row, found)
		})
		if err == nil || !isDuplicateKey(err) || try == 3 {
			return err
		}
	}
}

// TopicState returns topic's pause state (queue.PauseStore); the zero state
// for a topic never paused.
func (l *Ledger) TopicState(ctx context.Context, topic string) (queue.PauseState, error) {
	var rows []TopicState
	if err := l.conn(ctx).Table(l.stateTable).Where("topic = ?", topic).Limit(1).Find(&rows).Error; err != nil {
		return queue.PauseState{}, fmt.Errorf("ledger: topic state of %s: %w", topic, err)
	}
	if len(rows) == 0 {
		return queue.PauseState{Topic: topic}, nil
	}
	return rows[0].pauseState(), nil
}

// TopicStates returns every row of the topic state table, by topic
// (queue.PauseStore): one row per topic ever paused, so a small table read
// whole by its primary key. The relay and the recoverer read it before they
// push or restore jobs. A missing table
// (not migrated yet) reads as no rows.
func (l *Ledger) TopicStates(ctx context.Context) ([]queue.PauseState, error) {
	var rows []TopicState
	// changed_at 0: a row written for a topic's layouts alone, never paused.
	if err := l.conn(ctx).Table(l.stateTable).Where("changed_at > 0").Order("topic").Find(&rows).Error; err != nil {
		// A deployment upgraded without its new table (auto_migrate off,
		// delayq migrate not run yet) has no pause either: no
		// Pause can have succeeded. The relay and the recoverer read this
		// before every reload and run and must not stop over it.
		if isNoSuchTable(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("ledger: topic states: %w", err)
	}
	out := make([]queue.PauseState, len(rows))
	for i, r := range rows {
		out[i] = r.pauseState()
	}
	return out, nil
}

// cutText makes s storable in a VARCHAR(n) utf8mb4 column: valid UTF-8, at
// most n characters.
func cutText(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n])
}

// erNoSuchTable is MySQL's "table doesn't exist".
const erNoSuchTable = 1146

// isNoSuchTable says whether err is a statement's failure on a table that
// does not exist.
func isNoSuchTable(err error) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == erNoSuchTable
	}
	return strings.Contains(err.Error(), "no such table") // SQLite
}
