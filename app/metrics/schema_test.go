package metrics_test

import (
	"testing"
	"time"

	"github.com/delayq/delayq/app/metrics"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/ledger"
)

// The schema gauges follow a real ledger's version table on MariaDB: the
// latest version and nothing pending after Migrate; one pending once
// migration 4 (its record and its table) is gone, read again after
// SchemaMaxAge.
func TestSchemaMetrics(t *testing.T) {
	ctx := testenv.Context(t)
	db := testenv.MySQL(t)
	led, err := ledger.New(db, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := led.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := led.MigrationStatus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.New(testenv.QuietLogger())
	if err := m.WatchState(metrics.StateConfig{Queue: &fakeQueue{}, Ledger: led, MaxAge: time.Nanosecond,
		SchemaMaxAge: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if v, p := value(t, m, "delayq_ledger_schema_version", nil), value(t, m, "delayq_ledger_schema_pending_migrations", nil); v != float64(st.Latest) || p != 0 {
		t.Fatalf("version %v pending %v, want %d and 0", v, p, st.Latest)
	}
	for _, stmt := range []string{"DELETE FROM dq_schema_migrations WHERE version = 4", "DROP TABLE dq_topic_state"} {
		if err := db.Exec(stmt).Error; err != nil {
			t.Fatal(err)
		}
	}
	if p := value(t, m, "delayq_ledger_schema_pending_migrations", nil); p != 0 {
		t.Errorf("pending %v within SchemaMaxAge, want the reading kept (0)", p)
	}

	fresh := metrics.New(testenv.QuietLogger())
	if err := fresh.WatchState(metrics.StateConfig{Queue: &fakeQueue{}, Ledger: led, MaxAge: time.Nanosecond,
		SchemaMaxAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if v, p := value(t, fresh, "delayq_ledger_schema_version", nil), value(t, fresh, "delayq_ledger_schema_pending_migrations", nil); v != 3 || p != 1 {
		t.Fatalf("version %v pending %v, want 3 and 1", v, p)
	}
}
