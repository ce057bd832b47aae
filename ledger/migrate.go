package ledger

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// How a migration came to be recorded in the schema version table.
const (
	// MigrationApplied: Migrate ran its statements.
	MigrationApplied = "applied"
	// MigrationFound: the database had the step already, made by a release
	// before schema versions (gorm's AutoMigrate, or an earlier
	// deployments/mysql/schema.sql); Migrate recorded it without running
	// anything.
	MigrationFound = "found"
	// MigrationSchemaFile: deployments/mysql/schema.sql created it.
	MigrationSchemaFile = "schema.sql"
	// MigrationUnrecorded (status only): the database has the step but no
	// record of it yet (tables made before schema versions, or a Migrate
	// cut short after the step's DDL); the next Migrate records it as
	// found.
	MigrationUnrecorded = "unrecorded"
)

// migrateLockPoll is how long one GET_LOCK waits before Migrate checks its
// context and asks again: it waits for another process's migration as
// long as its context allows (an online ALTER of a big table takes
// minutes), never a fixed time that would fail a start for nothing.
const migrateLockPoll = 5 * time.Second

// MigrationState is one migration as a database has it.
type MigrationState struct {
	Version int    `json:"version"`
	Name    string `json:"name"`
	// Applied is false for a migration the database still lacks.
	Applied bool `json:"applied"`
	// How is MigrationApplied, MigrationFound, MigrationSchemaFile or
	// MigrationUnrecorded; "" while not applied.
	How string `json:"how,omitempty"`
	// AppliedAt is when it was recorded (zero while not applied).
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// SchemaStatus says where a database's ledger schema stands.
type SchemaStatus struct {
	// Version is the highest version up to which every migration is
	// applied: 0 on an empty database.
	Version int `json:"version"`
	// Latest is the highest version this build knows.
	Latest int `json:"latest"`
	// Migrations lists every migration this build knows, in order.
	Migrations []MigrationState `json:"migrations"`
	// Unknown lists versions the database has recorded that this build
	// does not know: a newer release migrated it. Migrations only add, so
	// this build still runs on it.
	Unknown []int `json:"unknown,omitempty"`
	// Untracked is true when the database has ledger tables but no
	// version table yet (a release before schema versions made them): its
	// steps show as MigrationUnrecorded or pending, and Migrate records
	// what it finds and applies the rest.
	Untracked bool `json:"untracked,omitempty"`
}

// Pending returns the migrations the database still lacks.
func (s SchemaStatus) Pending() []MigrationState {
	var out []MigrationState
	for _, m := range s.Migrations {
		if !m.Applied {
			out = append(out, m)
		}
	}
	return out
}

// String names the migration as its files do: 0002_durable_topics.
func (m MigrationState) String() string { return migrationID(m.Version, m.Name) }

// UpToDate reports whether every migration this build knows is applied.
func (s SchemaStatus) UpToDate() bool { return len(s.Pending()) == 0 }

// SchemaVersionTable returns the name of the table that records the
// applied migrations (dq_schema_migrations by default).
func (l *Ledger) SchemaVersionTable() string { return l.opts.TablePrefix + "schema_migrations" }

// versionTableSQL creates the schema version table.
func (l *Ledger) versionTableSQL() string {
	t := l.SchemaVersionTable()
	if l.dialect.name == "mysql" {
		return "CREATE TABLE IF NOT EXISTS `" + t + "` (\n" +
			"  `version`    INT         NOT NULL,\n" +
			"  `name`       VARCHAR(64) NOT NULL,\n" +
			"  `how`        VARCHAR(16) NOT NULL,\n" +
			"  `applied_at` BIGINT      NOT NULL,\n" +
			"  PRIMARY KEY (`version`)\n" +
			") " + l.dialect.tableOptions
	}
	return "CREATE TABLE IF NOT EXISTS `" + t + "` (`version` integer NOT NULL, `name` text NOT NULL," +
		" `how` text NOT NULL, `applied_at` integer NOT NULL, PRIMARY KEY (`version`))"
}

// recordSQL records one migration in the version table; at is an SQL
// expression of the time (a literal, or the dialect's clock for a script).
func (l *Ledger) recordSQL(m Migration, how, at string) string {
	return fmt.Sprintf("INSERT INTO `%s` (version, name, how, applied_at) VALUES (%d, '%s', '%s', %s)",
		l.SchemaVersionTable(), m.Version, m.Name, how, at)
}

// step is one migration a database lacks a record of, and how it gets
// one: found (only recorded) or applied (its statements run first).
type step struct {
	m   Migration
	how string
}

// plan returns the steps db lacks a record of, in order, each found or to
// be applied. done is what db has recorded (nil: no version table).
func (l *Ledger) plan(db *gorm.DB, migs []Migration, done map[int]MigrationState) ([]step, error) {
	var out []step
	for _, m := range migs {
		if _, ok := done[m.Version]; ok {
			continue
		}
		present, err := m.present(l.probe(db), l.opts.TablePrefix)
		if err != nil {
			return nil, fmt.Errorf("ledger: migration %s: %w", m, err)
		}
		how := MigrationApplied
		if present {
			how = MigrationFound
		}
		out = append(out, step{m: m, how: how})
	}
	return out, nil
}

// Migrate brings the database's ledger tables (in-flight, dead letters,
// periodic ticks, topic state) up to the latest migration this build
// knows, and records each step in the schema version table. On a database
// made before schema versions it first records the steps the tables
// already have (MigrationFound), keeping their rows. Safe to run again and
// from several processes at once: they take turns (a named lock on MySQL,
// the write lock on SQLite), and the second finds nothing to do.
//
// On MySQL each step's DDL commits on its own (MySQL cannot roll DDL
// back); a step cut short is found, not run again, by the next Migrate.
// On SQLite the whole upgrade is one transaction.
func (l *Ledger) Migrate(ctx context.Context) error {
	migs := l.migrations
	done, err := l.recordedIfAny(l.conn(ctx))
	if err != nil {
		return err
	}
	if done != nil && allRecorded(done, migs) {
		return nil // the common start: nothing to lock, nothing to write
	}
	return l.conn(ctx).Connection(func(db *gorm.DB) error {
		if done == nil {
			if err := db.Exec(l.versionTableSQL()).Error; err != nil {
				return fmt.Errorf("ledger: create %s: %w", l.SchemaVersionTable(), err)
			}
		}
		if l.dialect.name == "mysql" {
			unlock, err := l.lockMigrations(ctx, db)
			if err != nil {
				return err
			}
			defer unlock()
			return l.migrateSteps(db, migs)
		}
		return db.Transaction(func(tx *gorm.DB) error {
			// A write first, so that the transaction holds SQLite's
			// write lock before it reads what is applied: a second
			// process waits here (busy timeout) instead of failing to
			// upgrade a read lock later.
			if err := tx.Exec("DELETE FROM `" + l.SchemaVersionTable() + "` WHERE version < 0").Error; err != nil {
				return fmt.Errorf("ledger: lock %s: %w", l.SchemaVersionTable(), err)
			}
			return l.migrateSteps(tx, migs)
		})
	})
}

func allRecorded(done map[int]MigrationState, migs []Migration) bool {
	for _, m := range migs {
		if _, ok := done[m.Version]; !ok {
			return false
		}
	}
	return true
}

// migrateSteps records or applies every migration db lacks, in order.
func (l *Ledger) migrateSteps(db *gorm.DB, migs []Migration) error {
	done, err := l.recorded(db)
	if err != nil {
		return err
	}
	steps, err := l.plan(db, migs, done)
	if err != nil {
		return err
	}
	for _, s := range steps {
		if s.how == MigrationApplied {
			for _, stmt := range s.m.statements(l.dialect.name, l.opts.TablePrefix) {
				if err := db.Exec(stmt).Error; err != nil {
					return fmt.Errorf("ledger: migration %s: %w", s.m, err)
				}
			}
		}
		if err := db.Exec(l.recordSQL(s.m, s.how, strconv.FormatInt(l.nowMs(), 10))).Error; err != nil {
			return fmt.Errorf("ledger: record migration %s: %w", s.m, err)
		}
	}
	return nil
}

// lockMigrations takes a named lock, on the server, for this database's
// tables under this prefix, on db's connection (a MySQL named lock
// belongs to the session that took it).
func (l *Ledger) lockMigrations(ctx context.Context, db *gorm.DB) (func(), error) {
	// A lock name is at most 64 characters; a hash keeps any database
	// name and prefix within it.
	name := "SHA1(CONCAT(DATABASE(), '.', '" + l.opts.TablePrefix + "migrate'))"
	for {
		var got sql.NullInt64
		if err := db.Raw("SELECT GET_LOCK("+name+", ?)", int(migrateLockPoll/time.Second)).Row().Scan(&got); err != nil {
			return nil, fmt.Errorf("ledger: migrate: take the migration lock: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("ledger: migrate: another process is migrating %s (its lock is held): %w", l.SchemaVersionTable(), err)
		}
	}
	return func() {
		// Released with a context of its own: the caller's may be done,
		// and a lock left behind would hold the next Migrate until this
		// connection closes.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = db.WithContext(rctx).Exec("DO RELEASE_LOCK(" + name + ")").Error
	}, nil
}

// recorded returns the migrations db has recorded, by version.
func (l *Ledger) recorded(db *gorm.DB) (map[int]MigrationState, error) {
	var rows []struct {
		Version   int
		Name      string
		How       string
		AppliedAt int64
	}
	if err := db.Raw("SELECT version, name, how, applied_at FROM `" + l.SchemaVersionTable() + "` ORDER BY version").
		Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("ledger: read %s: %w", l.SchemaVersionTable(), err)
	}
	out := make(map[int]MigrationState, len(rows))
	for _, r := range rows {
		out[r.Version] = MigrationState{Version: r.Version, Name: r.Name, Applied: true, How: r.How,
			AppliedAt: time.UnixMilli(r.AppliedAt).UTC()}
	}
	return out, nil
}

// recordedIfAny is recorded, or nil when db has no version table yet. It
// asks the server first, so that a database that does not answer is an
// error, not a missing table (gorm's HasTable says false for both).
func (l *Ledger) recordedIfAny(db *gorm.DB) (map[int]MigrationState, error) {
	has, err := l.probe(db).table(l.SchemaVersionTable())()
	if err != nil || !has {
		return nil, err
	}
	return l.recorded(db)
}

func (l *Ledger) probe(db *gorm.DB) probe { return probe{db: db, dialect: l.dialect.name} }

// MigrationStatus says which migrations the database has and which it
// lacks, without changing anything.
func (l *Ledger) MigrationStatus(ctx context.Context) (SchemaStatus, error) {
	migs := l.migrations
	db := l.conn(ctx)
	st := SchemaStatus{Latest: migs[len(migs)-1].Version}
	done, err := l.recordedIfAny(db)
	if err != nil {
		return SchemaStatus{}, err
	}
	if done == nil {
		if st.Untracked, err = l.probe(db).table(l.ledgerTable)(); err != nil {
			return SchemaStatus{}, err
		}
	}
	steps, err := l.plan(db, migs, done)
	if err != nil {
		return SchemaStatus{}, err
	}
	found := map[int]bool{}
	for _, s := range steps {
		found[s.m.Version] = s.how == MigrationFound
	}
	contiguous := true
	for _, m := range migs {
		s, ok := done[m.Version]
		if !ok {
			s = MigrationState{Version: m.Version, Name: m.Name}
			if found[m.Version] {
				s.Applied, s.How = true, MigrationUnrecorded
			}
		}
		contiguous = contiguous && s.Applied
		if contiguous {
			st.Version = m.Version
		}
		st.Migrations = append(st.Migrations, s)
		delete(done, m.Version)
	}
	for v := range done {
		st.Unknown = append(st.Unknown, v)
	}
	sort.Ints(st.Unknown)
	return st, nil
}

// MigrationSQL returns the statements Migrate would run on this database
// now, version records included, for an operator who applies schema
// changes by hand (delayq migrate --print): none when every migration is
// recorded. A step the database already has is only recorded.
func (l *Ledger) MigrationSQL(ctx context.Context) ([]string, error) {
	migs := l.migrations
	db := l.conn(ctx)
	done, err := l.recordedIfAny(db)
	if err != nil {
		return nil, err
	}
	steps, err := l.plan(db, migs, done)
	if err != nil {
		return nil, err
	}
	var out []string
	if done == nil {
		out = append(out, l.versionTableSQL())
	}
	for _, s := range steps {
		if s.how == MigrationApplied {
			out = append(out, s.m.statements(l.dialect.name, l.opts.TablePrefix)...)
		}
		out = append(out, l.recordSQL(s.m, s.how, l.dialect.now))
	}
	return out, nil
}

// Drop removes the ledger's tables and all they hold: the undo of
// Migrate, for a sandbox (the benchmark) that created them under a table
// prefix of its own.
func (l *Ledger) Drop(ctx context.Context) error {
	tables := []any{l.ledgerTable, l.deadTable, l.stateTable, l.historyTable, l.PeriodicTable(), l.markTable, l.SchemaVersionTable()}
	if err := l.conn(ctx).Migrator().DropTable(tables...); err != nil {
		return fmt.Errorf("ledger: drop %v: %w", tables, err)
	}
	return nil
}

// Ping checks that the database answers: the readiness probe's SQL check.
func (l *Ledger) Ping(ctx context.Context) error {
	sqlDB, err := l.db.DB()
	if err == nil {
		err = sqlDB.PingContext(ctx)
	}
	if err != nil {
		return fmt.Errorf("ledger: ping: %w", err)
	}
	return nil
}
