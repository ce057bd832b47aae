package ledger

import (
	"embed"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"gorm.io/gorm"
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
	// present reports whether a database made before schema versions
	// (gorm's AutoMigrate, or deployments/mysql/schema.sql of an earlier
	// release) already has this step: such a step is recorded as found,
	// not run again.
	present func(m gorm.Migrator, prefix string) bool
}

// presence says, per version, how to recognise a step already made by an
// earlier release that had no version table.
var presence = map[int]func(m gorm.Migrator, prefix string) bool{
	1: func(m gorm.Migrator, p string) bool { return m.HasTable(p+"ledger") && m.HasTable(p+"dead_letter") },
	2: func(m gorm.Migrator, p string) bool { return m.HasColumn(p+"ledger", "enqueued_at") },
	3: func(m gorm.Migrator, p string) bool { return m.HasTable(p + "periodic") },
	4: func(m gorm.Migrator, p string) bool { return m.HasTable(p + "topic_state") },
}

var migrationName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.(mysql|sqlite)\.sql$`)

func loadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]*Migration{}
	for _, path := range names {
		base := path[strings.LastIndex(path, "/")+1:]
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
		mig.sql[m[3]] = splitStatements(string(b))
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

// splitStatements cuts a migration file into its statements: comment
// lines dropped, a statement ends with a semicolon at the end of a line.
func splitStatements(s string) []string {
	var out []string
	var cur strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "--") {
			continue
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			stmt := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";")
			out = append(out, stmt)
			cur.Reset()
		}
	}
	if rest := strings.TrimSpace(cur.String()); rest != "" {
		out = append(out, rest)
	}
	return out
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
