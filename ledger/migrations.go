package ledger

import (
	"embed"
	"fmt"
	"io/fs"
	pathpkg "path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/sqlscript"
)

// migrationFiles are the ledger's numbered migrations, one file per
// version and dialect: migrations/NNNN_name.DIALECT.sql. A migration is
// never edited once released; a change of the schema is a new file (for
// both dialects) and a new step in deployments/mysql/schema.sql.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migration is one numbered step of the ledger's schema.
type Migration struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// sql holds the step's statements per dialect name, with {{prefix}}
	// where the table prefix goes.
	sql map[string][]string
	// present reports whether the database already has this step's
	// effect although no record says so: made by a release before schema
	// versions (gorm's AutoMigrate, or an earlier release's
	// deployments/mysql/schema.sql), or by a Migrate cut short between a
	// step's DDL and its record. Such a step is recorded as found, not run
	// again. Every new migration needs one that recognises its whole effect.
	present func(p probe, prefix string) (bool, error)
}

// String names the migration as its files do: 0002_durable_topics.
func (m Migration) String() string { return migrationID(m.Version, m.Name) }

func migrationID(version int, name string) string { return fmt.Sprintf("%04d_%s", version, name) }

// presence says, per version, how to recognise a step already made.
var presence = map[int]func(p probe, prefix string) (bool, error){
	1: func(p probe, pre string) (bool, error) {
		return p.all(p.table(pre+"ledger"), p.table(pre+"dead_letter"))
	},
	2: func(p probe, pre string) (bool, error) {
		// The column and the index: an AutoMigrate cut short between the
		// two leaves the column alone, and the step must then fail
		// loudly (its ADD COLUMN) rather than be taken as done.
		return p.all(p.column(pre+"ledger", "enqueued_at"), p.index(pre+"ledger", "idx_"+pre+"ledger_state_run_at"))
	},
	3: func(p probe, pre string) (bool, error) { return p.all(p.table(pre + "periodic")) },
	4: func(p probe, pre string) (bool, error) { return p.all(p.table(pre + "topic_state")) },
	5: func(p probe, pre string) (bool, error) {
		return p.all(p.column(pre+"ledger", "first_claimed_at"), p.table(pre+"history"),
			p.index(pre+"history", "idx_"+pre+"history_topic_finished"))
	},
	6:  func(p probe, pre string) (bool, error) { return p.all(p.column(pre+"history", "result")) },
	7:  func(p probe, pre string) (bool, error) { return p.all(p.column(pre+"topic_state", "layouts")) },
	8:  func(p probe, pre string) (bool, error) { return p.all(p.table(pre + "shard_mark")) },
	9:  func(p probe, pre string) (bool, error) { return p.all(p.column(pre+"ledger", "trace")) },
	10: func(p probe, pre string) (bool, error) { return p.all(p.column(pre+"ledger", "priority")) },
	11: func(p probe, pre string) (bool, error) {
		return p.all(p.column(pre+"ledger", "ordering_key"), p.index(pre+"ledger", "idx_"+pre+"ledger_topic_ordering"))
	},
}

// probe asks a database's catalogue whether a table, column or index
// exists, and says when it could not ask (gorm's Migrator answers false
// for both).
type probe struct {
	db      *gorm.DB
	dialect string
}

// check is one catalogue question, asked by all.
type check func() (bool, error)

func (p probe) count(mysqlQ, sqliteQ string, args ...any) check {
	return func() (bool, error) {
		q := mysqlQ
		if p.dialect != "mysql" {
			q = sqliteQ
		}
		var n int64
		if err := p.db.Raw(q, args...).Row().Scan(&n); err != nil {
			return false, fmt.Errorf("ledger: read the schema: %w", err)
		}
		return n > 0, nil
	}
}

func (p probe) table(name string) check {
	return p.count("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
		"SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = ?", name)
}

func (p probe) column(table, col string) check {
	return p.count("SELECT COUNT(*) FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND COLUMN_NAME = ?",
		"SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?", table, col)
}

func (p probe) index(table, idx string) check {
	return p.count("SELECT COUNT(*) FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? AND INDEX_NAME = ?",
		"SELECT COUNT(*) FROM pragma_index_list(?) WHERE name = ?", table, idx)
}

// all is true when every check is; it stops at the first false or error.
func (p probe) all(checks ...check) (bool, error) {
	for _, c := range checks {
		if ok, err := c(); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(mysql|sqlite)\.sql$`)

func loadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, path := range names {
		base := pathpkg.Base(path)
		m := migrationName.FindStringSubmatch(base)
		if m == nil {
			return nil, fmt.Errorf("ledger: migration file %s: want NNNN_name.mysql.sql or NNNN_name.sqlite.sql", base)
		}
		v, _ := strconv.Atoi(m[1])
		mig := byVersion[v]
		if mig == nil {
			mig = &Migration{Version: v, Name: m[2], sql: map[string][]string{}, present: presence[v]}
			byVersion[v] = mig
		}
		if mig.Name != m[2] {
			return nil, fmt.Errorf("ledger: migration %04d is named %s and %s", v, mig.Name, m[2])
		}
		b, err := fs.ReadFile(fsys, path)
		if err != nil {
			return nil, err
		}
		mig.sql[m[3]] = sqlscript.Split(string(b))
	}
	out := make([]Migration, 0, len(byVersion))
	for v, m := range byVersion {
		if len(m.sql) != 2 || m.present == nil {
			return nil, fmt.Errorf("ledger: migration %04d needs a mysql and a sqlite file and a presence check", v)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version != i+1 {
			return nil, fmt.Errorf("ledger: migrations skip from %d to %d", i, m.Version)
		}
	}
	return out, nil
}

// statements returns the migration's statements for a dialect and table
// prefix.
func (m Migration) statements(dialect, prefix string) []string {
	src := m.sql[dialect]
	out := make([]string, len(src))
	for i, s := range src {
		out[i] = strings.ReplaceAll(s, "{{prefix}}", prefix)
	}
	return out
}
