package ledger

import (
	"errors"
	"fmt"
	"strings"

	mysqldriver "github.com/go-sql-driver/mysql"
	"gorm.io/gorm"

	"github.com/delayq/delayq/queue"
)

// dialect holds the SQL that differs between MySQL/MariaDB and SQLite. Every
// other statement of the package is plain SQL both accept.
type dialect struct {
	name string
	// maxVars is the most bind variables one statement may carry: MySQL's
	// prepared-statement protocol counts them in 16 bits; SQLite's
	// SQLITE_MAX_VARIABLE_NUMBER defaults to 32,766 since 3.32.
	maxVars int
	// greatest is the two-argument maximum: GREATEST on MySQL; SQLite's
	// scalar MAX(a, b) (MAX with one argument is the aggregate).
	greatest string
	// valuesList opens the right-hand side of a row-value IN. MySQL and
	// MariaDB take a plain list ((?,?),(?,?)) (their VALUES forms differ:
	// MySQL needs ROW(...), MariaDB refuses it). SQLite documents only a
	// subquery there; a VALUES clause is one, works since row values came
	// in (3.15), and is what SQLite 3.41 turns a plain list into anyway
	// (same plan: a search of the unique index per tuple).
	valuesList string
	// tableOptions goes after CREATE TABLE; SQLite has no equivalent. The
	// binary collation makes ids compare byte-wise, as Redis does.
	tableOptions string
	// now is the SQL server's clock in Unix ms, as a BIGINT expression.
	// MySQL: microseconds between the epoch and UTC_TIMESTAMP, two
	// datetimes without a time zone, so neither the session's time_zone
	// nor a DST change can shift it (UNIX_TIMESTAMP(NOW(3)) reads NOW in
	// the session's zone, ambiguous for an hour each autumn). SQLite: the
	// Julian day of 'now', whose double carries about 0.05 ms at today's
	// dates.
	now string
	// shareLock ends a SELECT that must read the latest committed rows
	// inside a transaction (a plain one reads the transaction's snapshot
	// under REPEATABLE READ). SQLite has no row locks: a writing
	// transaction holds the whole database.
	shareLock string
}

func dialectOf(db *gorm.DB) (dialect, error) {
	switch name := db.Dialector.Name(); name {
	case "mysql":
		return dialect{
			name:         name,
			maxVars:      65535,
			greatest:     "GREATEST",
			valuesList:   "",
			tableOptions: "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
			now:          "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6)) DIV 1000",
			shareLock:    " LOCK IN SHARE MODE",
		}, nil
	case "sqlite":
		return dialect{
			name:     name,
			maxVars:  32766,
			greatest: "MAX",
			// SQLite also caps expression depth at 1000, so a long
			// OR-of-ANDs, the other portable form, fails on big batches.
			valuesList: "VALUES ",
			now:        "CAST(ROUND((julianday('now') - 2440587.5)*86400000.0) AS INTEGER)",
		}, nil
	default:
		return dialect{}, fmt.Errorf("ledger: unsupported gorm dialect %q (want mysql or sqlite)", name)
	}
}

// tupleIn returns "(c1,c2) IN ((?,?),(?,?),...)" for n tuples, in the form
// the dialect accepts, for use with the tuples' values flattened in order.
// The columns must be plain, fixed identifiers (they are not quoted).
//
// One tuple is "(c1 = ? AND c2 = ?)": MariaDB reads a one-tuple row IN as
// a row comparison, which its UPDATE and DELETE cannot seek an index with,
// so each of them scanned the whole table (TestOneJobWritesSeekTheRow).
func (d dialect) tupleIn(n int, cols ...string) string {
	if n == 1 {
		return "(" + strings.Join(cols, " = ? AND ") + " = ?)"
	}
	one := "(" + strings.TrimSuffix(strings.Repeat("?,", len(cols)), ",") + ")"
	var b strings.Builder
	b.Grow(len(cols)*8 + 16 + n*(len(one)+1))
	b.WriteString("(")
	b.WriteString(strings.Join(cols, ","))
	b.WriteString(") IN (")
	b.WriteString(d.valuesList)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(one)
	}
	b.WriteString(")")
	return b.String()
}

// MarkRetrying returns MarkRetrying's statement and its bind variables: an
// UPDATE joined with the list of new values (one []any of topic, job_id,
// attempt, run_at, lease_until, last_error per job), matched on (topic,
// job_id, attempt) through the unique key, setting state and updatedAt on
// every matched row.
//
// A CASE per column is the portable alternative, but it compares every row
// with every job: 250 ms for 1,000 jobs on MariaDB, against a few ms for the
// join. The join is spelled differently per dialect: MySQL/MariaDB
// UPDATE ... JOIN over a UNION ALL of SELECTs (MySQL's VALUES needs ROW(),
// MariaDB's refuses it), SQLite UPDATE ... FROM (VALUES ...) (3.33+), whose
// columns are named column1, column2, ... The table name is quoted by hand:
// Options restricts it to letters, digits and underscores.
func (d dialect) markRetrying(table string, state queue.State, updatedAt int64, rows [][]any) (string, []any) {
	var b strings.Builder
	b.Grow(256 + len(rows)*40)
	vars := make([]any, 0, 2+len(rows)*6)
	if d.name == "mysql" {
		b.WriteString("UPDATE `" + table + "` AS l JOIN (")
		for i, r := range rows {
			if i == 0 {
				b.WriteString("SELECT ? AS topic, ? AS job_id, ? AS attempt, ? AS run_at, ? AS lease_until, ? AS last_error")
			} else {
				b.WriteString(" UNION ALL SELECT ?,?,?,?,?,?")
			}
			vars = append(vars, r...)
		}
		b.WriteString(") AS v ON l.topic = v.topic AND l.job_id = v.job_id AND l.attempt = v.attempt" +
			" SET l.state = ?, l.updated_at = ?, l.run_at = v.run_at, l.lease_until = v.lease_until, l.last_error = v.last_error")
		return b.String(), append(vars, state, updatedAt)
	}
	b.WriteString("UPDATE `" + table + "` SET state = ?, updated_at = ?," +
		" run_at = v.column4, lease_until = v.column5, last_error = v.column6 FROM (VALUES ")
	vars = append(vars, state, updatedAt)
	for i, r := range rows {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(?,?,?,?,?,?)")
		vars = append(vars, r...)
	}
	b.WriteString(") AS v WHERE `" + table + "`.topic = v.column1 AND `" + table + "`.job_id = v.column2 AND `" +
		table + "`.attempt = v.column3")
	return b.String(), vars
}

// MySQL's ER_DUP_ENTRY and SQLite's SQLITE_CONSTRAINT_UNIQUE and
// SQLITE_CONSTRAINT_PRIMARYKEY (extended result codes).
const (
	erDupEntry              = 1062
	sqliteConstraintUnique  = 2067
	sqliteConstraintPrimary = 1555
)

// isDuplicateKey says whether err is a unique key violation: an INSERT that
// lost the race for a key to a concurrent one. On both databases it undoes
// the failed statement only, not the transaction around it. SQLite's driver
// is matched by its error's Code method, so that this package does not
// depend on one SQLite driver.
func isDuplicateKey(err error) bool {
	var me *mysqldriver.MySQLError
	if errors.As(err, &me) {
		return me.Number == erDupEntry
	}
	var coded interface{ Code() int }
	if errors.As(err, &coded) {
		c := coded.Code()
		return c == sqliteConstraintUnique || c == sqliteConstraintPrimary
	}
	return false
}
