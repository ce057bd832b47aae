package ledger

import (
	"context"
	"os"
	"reflect"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// schemaBeforeDurable is deployments/mysql/schema.sql as it was before
// durable topics (no enqueued_at, no (state, run_at) index): the tables a
// deployment has when it upgrades.
const schemaBeforeDurable = "testdata/schema-before-durable.sql"

// entryBeforeDurable is Entry as it was before durable topics, to build the
// old tables on SQLite.
type entryBeforeDurable struct {
	ID          int64  `gorm:"column:id;primaryKey;autoIncrement"`
	Topic       string `gorm:"column:topic;type:varchar(64);not null;uniqueIndex:,composite:topic_job,priority:1"`
	JobID       string `gorm:"column:job_id;type:varchar(200);not null;uniqueIndex:,composite:topic_job,priority:2"`
	Payload     []byte `gorm:"column:payload;type:longblob;not null"`
	Attempt     int    `gorm:"column:attempt;type:int;size:32;not null"`
	MaxAttempts int    `gorm:"column:max_attempts;type:int;size:32;not null"`
	RunAt       int64  `gorm:"column:run_at;type:bigint;not null"`
	ClaimedAt   int64  `gorm:"column:claimed_at;type:bigint;not null"`
	LeaseUntil  int64  `gorm:"column:lease_until;type:bigint;not null;index"`
	Worker      string `gorm:"column:worker;type:varchar(255);not null"`
	State       string `gorm:"column:state;type:varchar(16);not null"`
	LastError   string `gorm:"column:last_error;type:text;not null"`
	UpdatedAt   int64  `gorm:"column:updated_at;type:bigint;not null;autoUpdateTime:false"`
}

func execSQLFile(t *testing.T, db *gorm.DB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range testenv.SplitSQL(string(b)) {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v\n%s", path, err, stmt)
		}
	}
}

// TestMigrateUpgradesLiveTables: Migrate over the tables of the previous
// schema, holding rows in flight and waiting for a retry, adds enqueued_at
// and the (state, run_at) index and keeps the rows, which the worker and the
// recoverer go on using.
func TestMigrateUpgradesLiveTables(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		if db.Dialector.Name() == "mysql" {
			execSQLFile(t, db, schemaBeforeDurable)
		} else {
			if err := db.Table("dq_ledger").AutoMigrate(&entryBeforeDurable{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Table("dq_dead_letter").AutoMigrate(&DeadLetter{}); err != nil {
				t.Fatal(err)
			}
		}
		err := db.Exec("INSERT INTO dq_ledger (topic, job_id, payload, attempt, max_attempts, run_at, claimed_at," +
			" lease_until, worker, state, last_error, updated_at) VALUES" +
			" ('t', 'a', 'pa', 1, 5, 1000, 2000, 3000, 'h:1', 'in_progress', '', 2000)," +
			" ('t', 'b', 'pb', 2, 5, 9000, 4000, 12000, 'h:2', 'retrying', 'boom', 4000)").Error
		if err != nil {
			t.Fatal(err)
		}

		l, _ := newLedger(t, db, Options{}) // Migrate
		a := mustRow(t, l, "t", "a")
		wantA := Entry{ID: a.ID, Topic: "t", JobID: "a", Payload: []byte("pa"), Attempt: 1, MaxAttempts: 5, RunAt: 1000,
			ClaimedAt: 2000, LeaseUntil: 3000, Worker: "h:1", State: StateInProgress, UpdatedAt: 2000}
		if !equalEntry(a, wantA) {
			t.Errorf("row a after Migrate:\n got %+v\nwant %+v", a, wantA)
		}
		if b := mustRow(t, l, "t", "b"); b.State != StateRetrying || b.Attempt != 2 || b.LastError != "boom" || b.EnqueuedAt != 0 {
			t.Errorf("row b after Migrate: %+v", b)
		}

		// The recoverer finds both stale rows; the worker completes a,
		// claims b again, then buries it; a durable enqueue works.
		stale, err := l.Stale(ctx, 1_000_000, 0, 10)
		if err != nil || len(stale) != 2 {
			t.Fatalf("Stale: %d rows, %v", len(stale), err)
		}
		if err := l.Extend(ctx, []queue.Ref{{Topic: "t", ID: "a", Attempt: 1}}, 50_000); err != nil {
			t.Fatal(err)
		}
		if err := l.Complete(ctx, []queue.Ref{{Topic: "t", ID: "a", Attempt: 1}}); err != nil {
			t.Fatal(err)
		}
		b3 := job("t", "b", 3)
		mustRecord(t, l, "h:3", b3)
		if b := mustRow(t, l, "t", "b"); b.Attempt != 3 || b.State != StateInProgress || b.EnqueuedAt != 0 {
			t.Errorf("row b claimed again: %+v (enqueued_at stays as it was)", b)
		}
		if err := l.Bury(ctx, []queue.DeadJob{{Job: b3, Error: "dead"}}); err != nil {
			t.Fatal(err)
		}
		if n := count(t, l); n != 0 {
			t.Fatalf("%d rows left", n)
		}
		if out, _ := mustSchedule(t, l, "t", queue.NewJob{ID: "c", MaxAttempts: 1}); out[0].Duplicate {
			t.Error("Schedule after the upgrade: duplicate")
		}

		if db.Dialector.Name() == "mysql" {
			fresh := testenv.MySQL(t)
			newLedger(t, fresh, Options{})
			for _, table := range []string{"dq_ledger", "dq_dead_letter"} {
				if got, want := testenv.DescribeTable(t, db, table), testenv.DescribeTable(t, fresh, table); !reflect.DeepEqual(got, want) {
					t.Errorf("%s upgraded by Migrate:\n  %s\nnew:\n  %s", table, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
				}
			}
		}
	})
}

// TestUpgradeSQLGivesSchemaSQL: the previous schema.sql followed by
// upgrade-durable.sql and upgrade-operator.sql gives exactly the tables of today's schema.sql (SHOW
// CREATE TABLE), over which Migrate then changes nothing.
func TestUpgradeSQLGivesSchemaSQL(t *testing.T) {
	t.Parallel()
	upgraded := testenv.MySQL(t)
	execSQLFile(t, upgraded, schemaBeforeDurable)
	if err := upgraded.Exec("INSERT INTO dq_ledger (topic, job_id, payload, attempt, max_attempts, run_at, claimed_at," +
		" lease_until, worker, state, last_error, updated_at) VALUES ('t', 'a', 'pa', 1, 5, 1000, 2000, 3000, 'h:1', 'in_progress', '', 2000)").Error; err != nil {
		t.Fatal(err)
	}
	execSQLFile(t, upgraded, "../deployments/mysql/upgrade-durable.sql")
	execSQLFile(t, upgraded, "../deployments/mysql/upgrade-operator.sql")
	current := testenv.MySQL(t)
	execSQLFile(t, current, "../deployments/mysql/schema.sql")
	for _, table := range []string{"dq_ledger", "dq_dead_letter", "dq_topic_state", "dq_periodic"} {
		if got, want := testenv.ShowCreateTable(t, upgraded, table), testenv.ShowCreateTable(t, current, table); got != want {
			t.Errorf("%s after upgrade-durable.sql:\n%s\nschema.sql:\n%s", table, got, want)
		}
	}

	log := &stmtLog{}
	l, err := New(upgraded.Session(&gorm.Session{Logger: log}), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, q := range log.Take() {
		if v := verbs([]string{q})[0]; v == "ALTER" || v == "CREATE" || v == "DROP" {
			t.Errorf("Migrate after upgrade-durable.sql and upgrade-operator.sql changed the schema: %s", q)
		}
	}
	if r := mustRow(t, l, "t", "a"); r.Attempt != 1 || r.EnqueuedAt != 0 {
		t.Errorf("row after the upgrade: %+v", r)
	}
}
