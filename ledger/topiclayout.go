package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// A topic's partition layouts are operator intent too: they live in the
// topic state table beside its pause (docs/design.md §7.1).
var _ queue.LayoutStore = (*Ledger)(nil)

// maxLayoutsLen is the layouts column's size: every count from 1 to
// queue.MaxPartitions, comma-separated, fits.
const maxLayoutsLen = 1024

// AddLayouts adds counts (each 1-queue.MaxPartitions) to topic's stored
// partition layouts and returns them all, ascending (queue.LayoutStore).
// The row is read and written under its lock, so two raises at once both
// land. A topic without a row gets one with no pause (paused 0,
// changed_at 0).
func (l *Ledger) AddLayouts(ctx context.Context, topic string, counts []int) ([]int, error) {
	if err := checkText("topic", topic, maxTopicLen); err != nil {
		return nil, err
	}
	if topic == "" {
		return nil, errors.New("ledger: add layouts: empty topic")
	}
	for _, k := range counts {
		if k < 1 || k > queue.MaxPartitions {
			return nil, fmt.Errorf("ledger: add layouts of %s: count %d: want 1-%d", topic, k, queue.MaxPartitions)
		}
	}
	var out []int
	err := l.updateState(ctx, topic, func(tx *gorm.DB, row TopicState, found bool) error {
		had := parseLayouts(row.Layouts)
		out = slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(had), counts...))))
		if slices.Equal(out, had) {
			return nil
		}
		v := formatLayouts(out)
		if len(v) > maxLayoutsLen {
			return fmt.Errorf("%d counts do not fit the layouts column", len(out))
		}
		if found {
			return tx.Table(l.stateTable).Where("topic = ?", topic).Update("layouts", v).Error
		}
		return tx.Table(l.stateTable).Create(&TopicState{Topic: topic, Layouts: v}).Error
	})
	if err != nil {
		return nil, fmt.Errorf("ledger: add layouts of %s: %w", topic, err)
	}
	return out, nil
}

// Layouts returns the stored layouts of every topic partitioned
// (queue.LayoutStore). A table or column not migrated yet reads as none:
// no raise can have been stored then, and the relay and the recoverer,
// which read this before they push, must not stop over it.
func (l *Ledger) Layouts(ctx context.Context) (map[string][]int, error) {
	var rows []TopicState
	err := l.conn(ctx).Table(l.stateTable).Select("topic", "layouts").Where("layouts <> ''").Find(&rows).Error
	if err != nil {
		if isNoSuchTable(err) || isNoSuchColumn(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("ledger: topic layouts: %w", err)
	}
	out := make(map[string][]int, len(rows))
	for _, r := range rows {
		if ks := parseLayouts(r.Layouts); len(ks) > 0 {
			out[r.Topic] = ks
		}
	}
	return out, nil
}

// parseLayouts reads the layouts column; what is not a count in range is
// left out (the column is ours, but a hand edit must not build names).
func parseLayouts(v string) []int {
	var out []int
	for _, f := range strings.Split(v, ",") {
		if k, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && k >= 1 && k <= queue.MaxPartitions {
			out = append(out, k)
		}
	}
	return slices.Compact(slices.Sorted(slices.Values(out)))
}

func formatLayouts(ks []int) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = strconv.Itoa(k)
	}
	return strings.Join(s, ",")
}

// erNoSuchColumn is MySQL's "unknown column".
const erNoSuchColumn = 1054

// isNoSuchColumn says whether err is a statement's failure on a column
// that does not exist (a schema a migration has not reached yet).
func isNoSuchColumn(err error) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == erNoSuchColumn
	}
	return strings.Contains(err.Error(), "no such column") // SQLite
}
