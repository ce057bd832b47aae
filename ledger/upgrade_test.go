package ledger

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"gorm.io/gorm"

	"github.com/delayq/delayq/internal/sqlscript"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/queue"
)

// releasedSchemas are the schemas deployments of earlier releases have:
// testdata/schema/mysql holds deployments/mysql/schema.sql as each commit
// that changed it left it; testdata/schema/sqlite holds what gorm's
// AutoMigrate created on SQLite at the same commits (SQLite deployments
// never had a schema file), dumped from sqlite_master. Named N-COMMIT.sql,
// N in order of history.
func releasedSchemas(t *testing.T, dialect string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "schema", dialect, "*.sql"))
	if err != nil || len(files) < 5 {
		t.Fatalf("released %s schemas: %v, %v", dialect, files, err)
	}
	sort.Slice(files, func(i, j int) bool { return historyOrder(files[i]) < historyOrder(files[j]) })
	return files
}

func historyOrder(path string) string {
	base := filepath.Base(path)
	n, _, _ := strings.Cut(base, "-")
	return strings.Repeat("0", 4-len(n)) + n
}

func execSQLFile(t *testing.T, db *gorm.DB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range sqlscript.Split(string(b)) {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v\n%s", path, err, stmt)
		}
	}
}

// ledgerTables are the tables the ledger's migrations create.
var ledgerTables = []string{"dq_ledger", "dq_dead_letter", "dq_periodic", "dq_topic_state", "dq_shard_mark", "dq_schema_migrations"}

// TestMigrateUpgradesEveryReleasedSchema: every schema a release left (on
// MariaDB its schema.sql, on SQLite its AutoMigrate), holding rows in
// flight, waiting for a retry and dead, is brought by Migrate to exactly the
// tables a fresh database gets, its rows kept and usable by the worker, the
// recoverer and a durable enqueue; the steps it had are recorded as found.
func TestMigrateUpgradesEveryReleasedSchema(t *testing.T) {
	for _, b := range backends {
		dialect := map[string]string{"mariadb": "mysql", "sqlite": "sqlite"}[b.name]
		for _, file := range releasedSchemas(t, dialect) {
			t.Run(b.name+"/"+filepath.Base(file), func(t *testing.T) {
				t.Parallel()
				db := b.open(t)
				execSQLFile(t, db, file)
				upgradeWithRows(t, file, db, b.open(t))
			})
		}
	}
}

// releasedSteps are the migrations each released schema has, by its
// history order (testdata/schema/*/N-COMMIT.sql), written down by hand so
// that the presence checks are tested, not trusted.
var releasedSteps = map[string]map[int]bool{
	"0001": {1: true}, // the first ledger
	"0002": {1: true}, // orders tables only
	"0003": {1: true},
	"0004": {1: true, 2: true}, // durable topics
	"0005": {1: true, 2: true},
	"0006": {1: true, 2: true, 3: true},          // periodic, on its branch
	"0007": {1: true, 2: true, 4: true},          // pause, on its branch: topic state, no periodic
	"0008": {1: true, 2: true, 3: true, 4: true}, // both merged
}

// upgradeWithRows writes live rows into db's released tables (from file),
// migrates it and checks the rows and the tables against fresh (an empty
// database).
func upgradeWithRows(t *testing.T, file string, db, fresh *gorm.DB) {
	t.Helper()
	ctx := context.Background()
	had := releasedSteps[historyOrder(file)]
	if had == nil {
		t.Fatalf("%s: no entry in releasedSteps", file)
	}
	l0, err := New(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	st0, err := l0.MigrationStatus(context.Background())
	if err != nil || !st0.Untracked {
		t.Fatalf("status of a released schema: %+v, %v", st0, err)
	}
	for _, m := range st0.Migrations {
		if want := had[m.Version]; m.Applied != want || (want && m.How != MigrationUnrecorded) {
			t.Errorf("before Migrate, migration %04d_%s: %+v, want applied=%v (unrecorded)", m.Version, m.Name, m, want)
		}
	}
	err = db.Exec("INSERT INTO dq_ledger (topic, job_id, payload, attempt, max_attempts, run_at, claimed_at," +
		" lease_until, worker, state, last_error, updated_at) VALUES" +
		" ('t', 'a', 'pa', 1, 5, 1000, 2000, 3000, 'h:1', 'in_progress', '', 2000)," +
		" ('t', 'b', 'pb', 2, 5, 9000, 4000, 12000, 'h:2', 'retrying', 'boom', 4000)").Error
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Exec("INSERT INTO dq_dead_letter (topic, job_id, payload, attempts, last_error, died_at)" +
		" VALUES ('t', 'z', 'pz', 5, 'gave up', 500)").Error; err != nil {
		t.Fatal(err)
	}

	l, _ := newLedger(t, db, Options{}) // Migrate
	st, err := l.MigrationStatus(ctx)
	if err != nil || !st.UpToDate() || st.Untracked || st.Version != st.Latest {
		t.Fatalf("status after Migrate: %+v, %v", st, err)
	}
	for _, m := range st.Migrations {
		want := MigrationApplied
		if had[m.Version] {
			want = MigrationFound
		}
		if m.How != want {
			t.Errorf("migration %04d_%s recorded as %q, want %q", m.Version, m.Name, m.How, want)
		}
	}
	newLedger(t, fresh, Options{})
	expectSameTables(t, db, fresh, "upgraded by Migrate")

	a := mustRow(t, l, "t", "a")
	wantA := Entry{ID: a.ID, Topic: "t", JobID: "a", Payload: []byte("pa"), Attempt: 1, MaxAttempts: 5, RunAt: 1000,
		ClaimedAt: 2000, LeaseUntil: 3000, Worker: "h:1", State: queue.StateInFlight, UpdatedAt: 2000}
	if !equalEntry(a, wantA) {
		t.Errorf("row a after Migrate:\n got %+v\nwant %+v", a, wantA)
	}
	if b := mustRow(t, l, "t", "b"); b.State != queue.StateRetrying || b.Attempt != 2 || b.LastError != "boom" || b.EnqueuedAt != 0 {
		t.Errorf("row b after Migrate: %+v", b)
	}
	dead, err := l.DeadLetters(ctx, "t", 0, 1_000, 10)
	if err != nil || len(dead) != 1 || dead[0].JobID != "z" || dead[0].LastError != "gave up" {
		t.Errorf("dead letters after Migrate: %+v, %v", dead, err)
	}

	// The recoverer finds both stale rows; the worker completes a,
	// claims b again, then buries it; a durable enqueue, a pause and a
	// periodic tick work.
	stale, err := l.Stale(ctx, 1_000_000, 0, 10)
	if err != nil || len(stale) != 2 {
		t.Fatalf("Stale: %d rows, %v", len(stale), err)
	}
	if err := opsOf(l).Complete(ctx, []queue.Ref{{Topic: "t", ID: "a", Attempt: 1}}); err != nil {
		t.Fatal(err)
	}
	b3 := job("t", "b", 3)
	mustRecord(t, l, "h:3", b3)
	if b := mustRow(t, l, "t", "b"); b.Attempt != 3 || b.State != queue.StateInFlight || b.EnqueuedAt != 0 {
		t.Errorf("row b claimed again: %+v (enqueued_at stays as it was)", b)
	}
	if err := opsOf(l).Bury(ctx, []queue.DeadJob{{Job: b3, Error: "dead"}}); err != nil {
		t.Fatal(err)
	}
	if n := count(t, l); n != 0 {
		t.Fatalf("%d rows left", n)
	}
	if out, _ := mustSchedule(t, l, "t", queue.NewJob{ID: "c", MaxAttempts: 1}); out[0].Duplicate {
		t.Error("Schedule after the upgrade: duplicate")
	}
	if _, _, err := l.SetPaused(ctx, "t", true, "test"); err != nil {
		t.Errorf("pause after the upgrade: %v", err)
	}
}

func mustMigrations(t testing.TB) []Migration {
	t.Helper()
	migs, err := loadMigrations(migrationFiles)
	if err != nil {
		t.Fatal(err)
	}
	return migs
}

// TestMigrationFiles: every version has a file per dialect, versions run
// 1..N without a gap, and each file holds statements.
func TestMigrationFiles(t *testing.T) {
	migs := mustMigrations(t)
	if len(migs) < 4 {
		t.Fatalf("%d migrations", len(migs))
	}
	for i, m := range migs {
		if m.Version != i+1 {
			t.Errorf("migration %d has version %d", i, m.Version)
		}
		for _, d := range []string{"mysql", "sqlite"} {
			stmts := m.statements(d, "x_")
			if len(stmts) == 0 {
				t.Errorf("%04d_%s.%s.sql has no statement", m.Version, m.Name, d)
			}
			for _, s := range stmts {
				if strings.Contains(s, "{{") || strings.Contains(s, "dq_") {
					t.Errorf("%04d_%s.%s.sql: a table name without {{prefix}}: %s", m.Version, m.Name, d, s)
				}
			}
		}
	}
	bad := []map[string]string{
		{"migrations/0001_a.mysql.sql": "X;"},                                       // no sqlite file
		{"migrations/1_a.mysql.sql": "X;", "migrations/1_a.sqlite.sql": "X;"},       // bad name
		{"migrations/0002_a.mysql.sql": "X;", "migrations/0002_a.sqlite.sql": "X;"}, // gap from 0
	}
	for _, files := range bad {
		if _, err := loadMigrations(mapFS(files)); err == nil {
			t.Errorf("loadMigrations accepted %v", files)
		}
	}
}

// TestMigrationStatusAndUnknownVersions: an empty database is at version 0
// with everything pending; a migrated one is up to date; a version recorded
// by a newer release is listed and does not stop this one from migrating.
func TestMigrationStatusAndUnknownVersions(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, err := New(db, Options{Now: func() time.Time { return fixedNow }})
		if err != nil {
			t.Fatal(err)
		}
		st, err := l.MigrationStatus(ctx)
		if err != nil || st.Version != 0 || st.Untracked || len(st.Pending()) != st.Latest || st.UpToDate() {
			t.Fatalf("empty database: %+v, %v", st, err)
		}
		if err := l.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := db.Exec("INSERT INTO dq_schema_migrations (version, name, how, applied_at) VALUES (99, 'from_the_future', 'applied', 1)").Error; err != nil {
			t.Fatal(err)
		}
		if err := l.Migrate(ctx); err != nil {
			t.Fatalf("Migrate with a newer version recorded: %v", err)
		}
		st, err = l.MigrationStatus(ctx)
		if err != nil || !st.UpToDate() || st.Version != st.Latest || !reflect.DeepEqual(st.Unknown, []int{99}) {
			t.Fatalf("status: %+v, %v", st, err)
		}
		for _, m := range st.Migrations {
			if m.How != MigrationApplied || m.AppliedAt.UnixMilli() != fixedNow.UnixMilli() {
				t.Errorf("%+v: want applied at the ledger clock", m)
			}
		}
		sql, err := l.MigrationSQL(ctx)
		if err != nil || len(sql) != 0 {
			t.Errorf("MigrationSQL of an up-to-date database: %q, %v", sql, err)
		}
	})
}

// TestConcurrentMigrate: processes that start together migrate one empty
// database once between them: every step recorded once, as applied.
func TestConcurrentMigrate(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		errs := make(chan error, 4)
		for range 4 {
			go func() {
				l, err := New(db, Options{})
				if err == nil {
					err = l.Migrate(ctx)
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Fatalf("Migrate: %v", err)
			}
		}
		l, _ := New(db, Options{})
		st, err := l.MigrationStatus(ctx)
		if err != nil || !st.UpToDate() {
			t.Fatalf("%+v, %v", st, err)
		}
		var n int64
		db.Raw("SELECT COUNT(*) FROM dq_schema_migrations").Scan(&n)
		if n != int64(st.Latest) {
			t.Errorf("%d version rows, want %d", n, st.Latest)
		}
	})
}

// TestMigrationSQLByHand: an operator who applies `delayq migrate --print`
// by hand to the first release's schema gets the tables of today's
// schema.sql, rows kept, and Migrate then has nothing left to do.
func TestMigrationSQLByHand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testenv.MySQL(t)
	execSQLFile(t, db, releasedSchemas(t, "mysql")[0])
	if err := db.Exec("INSERT INTO dq_ledger (topic, job_id, payload, attempt, max_attempts, run_at, claimed_at," +
		" lease_until, worker, state, last_error, updated_at) VALUES ('t', 'a', 'pa', 1, 5, 1000, 2000, 3000, 'h:1', 'in_progress', '', 2000)").Error; err != nil {
		t.Fatal(err)
	}
	l, err := New(db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	stmts, err := l.MigrationSQL(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range stmts {
		if err := db.Exec(s).Error; err != nil {
			t.Fatalf("%v\n%s", err, s)
		}
	}
	current := testenv.MySQL(t)
	execSQLFile(t, current, "../deployments/mysql/schema.sql")
	expectSameTables(t, db, current, "after migrate --print, against schema.sql")
	st, err := l.MigrationStatus(ctx)
	if err != nil || !st.UpToDate() || st.Migrations[0].How != MigrationFound || st.Migrations[1].How != MigrationApplied {
		t.Fatalf("status after migrate --print: %+v, %v", st, err)
	}
	log := &stmtLog{}
	l2, _ := New(db.Session(&gorm.Session{Logger: log}), Options{})
	if err := l2.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range log.Take() {
		if v := verbs([]string{q})[0]; v == "ALTER" || v == "INSERT" || v == "DROP" {
			t.Errorf("Migrate after migrate --print: %s", q)
		}
	}
	if r := mustRow(t, l, "t", "a"); r.Attempt != 1 || r.EnqueuedAt != 0 {
		t.Errorf("row after the upgrade: %+v", r)
	}
}

// TestModelsMatchMigrations: gorm's AutoMigrate of the ledger's models over
// freshly migrated tables changes nothing, so the models the queries use
// and the migrations agree column for column.
func TestModelsMatchMigrations(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		newLedger(t, db, Options{})
		log := &stmtLog{}
		s := db.Session(&gorm.Session{Logger: log})
		if db.Dialector.Name() == "mysql" {
			s = s.Set("gorm:table_options", "ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin")
		}
		for table, model := range map[string]any{"dq_ledger": &Entry{}, "dq_dead_letter": &DeadLetter{},
			"dq_topic_state": &TopicState{}, "dq_periodic": &PeriodicTick{}, "dq_shard_mark": &ShardMark{}} {
			if err := s.Table(table).AutoMigrate(model); err != nil {
				t.Fatalf("AutoMigrate %s: %v", table, err)
			}
		}
		for _, q := range log.Take() {
			if v := verbs([]string{q})[0]; v == "ALTER" || v == "CREATE" || v == "DROP" {
				t.Errorf("the models differ from the migrations: %s", q)
			}
		}
	})
}

// mapFS is a file system of the given files, each holding its text.
func mapFS(files map[string]string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for name, text := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(text)}
	}
	return fsys
}

// TestSchemaSQLOverAReleasedSchema: an operator who applies today's
// schema.sql to a database of an earlier release (it only creates missing
// tables) must not get versions recorded that the tables lack: Migrate
// then brings the tables to exactly a fresh database's.
func TestSchemaSQLOverAReleasedSchema(t *testing.T) {
	for _, file := range releasedSchemas(t, "mysql") {
		t.Run(filepath.Base(file), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := testenv.MySQL(t)
			execSQLFile(t, db, file)
			execSQLFile(t, db, "../deployments/mysql/schema.sql")
			l, _ := newLedger(t, db, Options{}) // Migrate
			st, err := l.MigrationStatus(ctx)
			if err != nil || !st.UpToDate() {
				t.Fatalf("status: %+v, %v", st, err)
			}
			fresh := testenv.MySQL(t)
			newLedger(t, fresh, Options{})
			expectSameTables(t, db, fresh, "after schema.sql and Migrate")
		})
	}
}

// TestMigrateCutShortIsFound: a Migrate that stopped between a step's DDL
// and its record (MySQL commits DDL on its own) leaves the step to be
// found by the next one, which neither fails nor runs it twice.
func TestMigrateCutShortIsFound(t *testing.T) {
	eachBackend(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		l, _ := newLedger(t, db, Options{})
		if err := db.Exec("DELETE FROM dq_schema_migrations WHERE version >= 2").Error; err != nil {
			t.Fatal(err)
		}
		st, err := l.MigrationStatus(ctx)
		if err != nil || !st.UpToDate() || st.Migrations[1].How != MigrationUnrecorded {
			t.Fatalf("status with steps 2.. unrecorded: %+v, %v", st, err)
		}
		if err := l.Migrate(ctx); err != nil {
			t.Fatalf("Migrate after a cut-short one: %v", err)
		}
		st, err = l.MigrationStatus(ctx)
		if err != nil || !st.UpToDate() || st.Migrations[0].How != MigrationApplied || st.Migrations[1].How != MigrationFound {
			t.Fatalf("status: %+v, %v", st, err)
		}
	})
}

// expectSameTables checks that db's ledger tables are want's: columns and
// indexes on both dialects, and SHOW CREATE TABLE on MySQL.
func expectSameTables(t *testing.T, db, want *gorm.DB, what string) {
	t.Helper()
	for _, table := range ledgerTables {
		if g, w := testenv.DescribeTable(t, db, table), testenv.DescribeTable(t, want, table); !reflect.DeepEqual(g, w) {
			t.Errorf("%s %s:\n  %s\nwant:\n  %s", table, what, strings.Join(g, "\n  "), strings.Join(w, "\n  "))
		}
		if db.Dialector.Name() == "mysql" {
			if g, w := testenv.ShowCreateTable(t, db, table), testenv.ShowCreateTable(t, want, table); g != w {
				t.Errorf("SHOW CREATE TABLE %s %s:\n%s\nwant:\n%s", table, what, g, w)
			}
		}
	}
}
