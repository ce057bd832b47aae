package orderclose_test

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/jobs/orderclose"
)

// orderTables are the tables orderclose owns in deployments/mysql/schema.sql
// (the file holds the ledger's too, which ledger's schema test checks).
var orderTables = []string{"order_close_log", "order_items", "orders", "skus"}

// TestSchemaSQLMatchesMigrate proves that deployments/mysql/schema.sql and
// Migrate create the same orders tables on MariaDB: one fresh database gets
// the SQL file, another Migrate, and their columns (name, position, type,
// nullability, default, collation, extra), indexes, check constraints,
// engine and collation must agree, as must SHOW CREATE TABLE. Then Migrate
// runs over the file's tables and must not alter anything.
func TestSchemaSQLMatchesMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqlFile, err := os.ReadFile("../../deployments/mysql/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	fromFile := testenv.MySQL(t)
	for _, stmt := range splitSQL(string(sqlFile)) {
		if err := fromFile.Exec(stmt).Error; err != nil {
			t.Fatalf("schema.sql: %v\n%s", err, stmt)
		}
	}
	fromGorm := testenv.MySQL(t)
	if err := orderclose.Migrate(ctx, fromGorm); err != nil {
		t.Fatal(err)
	}

	for _, table := range orderTables {
		want, got := describe(t, fromFile, table), describe(t, fromGorm, table)
		if len(want) == 0 {
			t.Fatalf("schema.sql did not create %s", table)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s differs.\nschema.sql:\n  %s\nMigrate:\n  %s", table,
				strings.Join(want, "\n  "), strings.Join(got, "\n  "))
		}
		if a, b := showCreate(t, fromFile, table), showCreate(t, fromGorm, table); a != b {
			t.Errorf("SHOW CREATE TABLE %s differs.\nschema.sql:\n%s\nMigrate:\n%s", table, a, b)
		}
	}

	log := &stmtLog{}
	if err := orderclose.Migrate(ctx, fromFile.Session(&gorm.Session{Logger: log})); err != nil {
		t.Fatalf("Migrate over schema.sql: %v", err)
	}
	for _, q := range log.take() {
		if v := strings.ToUpper(strings.Fields(q)[0]); v == "ALTER" || v == "CREATE" || v == "DROP" {
			t.Errorf("Migrate over schema.sql changed the schema: %s", q)
		}
	}
}

// TestMigrateIsIdempotent runs Migrate twice on MariaDB and on SQLite (the
// embedded mode): the second run changes nothing.
func TestMigrateIsIdempotent(t *testing.T) {
	t.Parallel()
	for name, open := range map[string]func(testing.TB) *gorm.DB{"mariadb": testenv.MySQL, "sqlite": testenv.SQLite} {
		t.Run(name, func(t *testing.T) {
			db := open(t)
			if err := orderclose.Migrate(ctxT(t), db); err != nil {
				t.Fatal(err)
			}
			log := &stmtLog{}
			if err := orderclose.Migrate(ctxT(t), db.Session(&gorm.Session{Logger: log})); err != nil {
				t.Fatal(err)
			}
			for _, q := range log.take() {
				if v := strings.ToUpper(strings.Fields(q)[0]); v == "ALTER" || v == "CREATE" || v == "DROP" {
					t.Errorf("second Migrate changed the schema: %s", q)
				}
			}
		})
	}
}

// stmtLog is a gorm logger that records every SQL statement gorm runs.
type stmtLog struct {
	mu  sync.Mutex
	sql []string
}

func (s *stmtLog) LogMode(logger.LogLevel) logger.Interface      { return s }
func (s *stmtLog) Info(context.Context, string, ...interface{})  {}
func (s *stmtLog) Warn(context.Context, string, ...interface{})  {}
func (s *stmtLog) Error(context.Context, string, ...interface{}) {}
func (s *stmtLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	q, _ := fc()
	s.mu.Lock()
	s.sql = append(s.sql, q)
	s.mu.Unlock()
}

func (s *stmtLog) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.sql
	s.sql = nil
	return out
}

// splitSQL splits a file of ;-terminated statements, after dropping its "--"
// comment lines (schema.sql has no semicolons inside statements).
func splitSQL(s string) []string {
	var kept []string
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			kept = append(kept, line)
		}
	}
	var out []string
	for _, stmt := range strings.Split(strings.Join(kept, "\n"), ";") {
		if strings.TrimSpace(stmt) != "" {
			out = append(out, stmt)
		}
	}
	return out
}

// describe returns one line per column, index column, check constraint and
// table property of table in db's current database, from
// information_schema.
func describe(t *testing.T, db *gorm.DB, table string) []string {
	t.Helper()
	var out []string
	rows, err := db.Raw(`SELECT COLUMN_NAME, ORDINAL_POSITION, COLUMN_TYPE, IS_NULLABLE,
			COALESCE(COLUMN_DEFAULT, '<none>'), COALESCE(CHARACTER_SET_NAME, '-'),
			COALESCE(COLLATION_NAME, '-'), EXTRA
		FROM information_schema.COLUMNS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
		ORDER BY ORDINAL_POSITION`, table).Rows()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, typ, null, def, cs, coll, extra string
		var pos int
		if err := rows.Scan(&name, &pos, &typ, &null, &def, &cs, &coll, &extra); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("column %d %s %s null=%s default=%s charset=%s collation=%s extra=%s",
			pos, name, typ, null, def, cs, coll, extra))
	}
	rows.Close()

	rows, err = db.Raw(`SELECT INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME, COALESCE(SUB_PART, 0), INDEX_TYPE
		FROM information_schema.STATISTICS
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?
		ORDER BY INDEX_NAME, SEQ_IN_INDEX`, table).Rows()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, col, typ string
		var nonUnique, seq, sub int
		if err := rows.Scan(&name, &nonUnique, &seq, &col, &sub, &typ); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("index %s non_unique=%d %d:%s sub_part=%d %s", name, nonUnique, seq, col, sub, typ))
	}
	rows.Close()

	rows, err = db.Raw(`SELECT CONSTRAINT_NAME, CHECK_CLAUSE FROM information_schema.CHECK_CONSTRAINTS
		WHERE CONSTRAINT_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY CONSTRAINT_NAME`, table).Rows()
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name, clause string
		if err := rows.Scan(&name, &clause); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("check %s %s", name, clause))
	}
	rows.Close()

	var engine, collation string
	err = db.Raw(`SELECT ENGINE, TABLE_COLLATION FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Row().Scan(&engine, &collation)
	if err == nil {
		out = append(out, "table engine="+engine+" collation="+collation)
	}
	return out
}

var autoIncRE = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// showCreate returns SHOW CREATE TABLE without the AUTO_INCREMENT counter.
func showCreate(t *testing.T, db *gorm.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.Raw("SHOW CREATE TABLE `"+table+"`").Row().Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return autoIncRE.ReplaceAllString(ddl, "")
}
