package testenv

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/sqlscript"
)

// These helpers let a package prove that its migrations (or gorm models)
// and deployments/mysql/schema.sql create the same tables.

// DescribeTable returns one line per column, index column and table property of
// table in db's current database, from information_schema (MySQL) or
// SQLite's table_info and index pragmas.
func DescribeTable(t testing.TB, db *gorm.DB, table string) []string {
	t.Helper()
	if db.Dialector.Name() == "sqlite" {
		return describeSQLiteTable(t, db, table)
	}
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

	var engine, collation string
	err = db.Raw(`SELECT ENGINE, TABLE_COLLATION FROM information_schema.TABLES
		WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?`, table).Row().Scan(&engine, &collation)
	if err == nil {
		out = append(out, "table engine="+engine+" collation="+collation)
	}
	return out
}

// describeSQLiteTable is DescribeTable on SQLite.
func describeSQLiteTable(t testing.TB, db *gorm.DB, table string) []string {
	t.Helper()
	var cols []struct {
		Cid     int
		Name    string
		Type    string
		Notnull int
		Dflt    *string `gorm:"column:dflt_value"`
		Pk      int
	}
	if err := db.Raw("SELECT cid, name, type, \"notnull\", dflt_value, pk FROM pragma_table_info(?) ORDER BY cid", table).
		Scan(&cols).Error; err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cols {
		def := "<none>"
		if c.Dflt != nil {
			def = *c.Dflt
		}
		out = append(out, fmt.Sprintf("column %d %s %s notnull=%d default=%s pk=%d",
			c.Cid, c.Name, strings.ToLower(c.Type), c.Notnull, def, c.Pk))
	}
	var idx []struct {
		Name   string
		Unique int
		Origin string
	}
	if err := db.Raw("SELECT name, \"unique\", origin FROM pragma_index_list(?) ORDER BY name", table).Scan(&idx).Error; err != nil {
		t.Fatal(err)
	}
	for _, ix := range idx {
		var cols []struct {
			Seqno int
			Name  string
		}
		if err := db.Raw("SELECT seqno, name FROM pragma_index_info(?) ORDER BY seqno", ix.Name).Scan(&cols).Error; err != nil {
			t.Fatal(err)
		}
		for _, c := range cols {
			out = append(out, fmt.Sprintf("index %s unique=%d origin=%s %d:%s", ix.Name, ix.Unique, ix.Origin, c.Seqno, c.Name))
		}
	}
	return out
}

// autoIncRE matches the AUTO_INCREMENT counter of SHOW CREATE TABLE.
var autoIncRE = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// ShowCreateTable returns SHOW CREATE TABLE without the AUTO_INCREMENT counter.
func ShowCreateTable(t testing.TB, db *gorm.DB, table string) string {
	t.Helper()
	var name, ddl string
	if err := db.Raw("SHOW CREATE TABLE `"+table+"`").Row().Scan(&name, &ddl); err != nil {
		t.Fatal(err)
	}
	return autoIncRE.ReplaceAllString(ddl, "")
}

// MatchSchemaFile proves that the SQL file at path and migrate create the
// same tables on MariaDB: one fresh database gets the file, another
// migrate, and each named table's columns, indexes, engine, collation and
// SHOW CREATE TABLE must agree. It returns the database built from the file,
// for a further check that migrate over it changes nothing.
func MatchSchemaFile(t *testing.T, path string, migrate func(db *gorm.DB) error, tables ...string) *gorm.DB {
	t.Helper()
	sqlFile, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fromFile := MySQL(t)
	for _, stmt := range sqlscript.Split(string(sqlFile)) {
		if err := fromFile.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v\n%s", path, err, stmt)
		}
	}
	fromGorm := MySQL(t)
	if err := migrate(fromGorm); err != nil {
		t.Fatal(err)
	}
	for _, table := range tables {
		want, got := DescribeTable(t, fromFile, table), DescribeTable(t, fromGorm, table)
		if len(want) == 0 {
			t.Fatalf("%s did not create %s", path, table)
		}
		if !reflect.DeepEqual(want, got) {
			t.Errorf("%s differs.\n%s:\n  %s\nmigration:\n  %s", table, path,
				strings.Join(want, "\n  "), strings.Join(got, "\n  "))
		}
		if a, b := ShowCreateTable(t, fromFile, table), ShowCreateTable(t, fromGorm, table); a != b {
			t.Errorf("SHOW CREATE TABLE %s differs.\n%s:\n%s\nmigration:\n%s", table, path, a, b)
		}
	}
	return fromFile
}
