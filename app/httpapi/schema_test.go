package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// GET /v1/schema says where the ledger's schema stands, on both backends:
// up to date after the env's Migrate; a step whose record is gone but whose
// table is there is unrecorded, still up to date; one pending once its
// table is gone too; with SQL down it is 503 naming sql.
func TestSchemaStatus(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, b)
			got := decode[httpapi.SchemaResponse](t, e.get(t, "/v1/schema"))
			if !got.UpToDate || got.Version != got.Latest || got.Latest < 4 || len(got.Migrations) != got.Latest ||
				got.Table != "dq_schema_migrations" || !got.Migrations[0].Applied || got.Migrations[0].Name != "ledger" {
				t.Fatalf("schema %+v", got)
			}
			db := e.l.DB().WithContext(context.Background())
			if err := db.Exec("DELETE FROM dq_schema_migrations WHERE version = 4").Error; err != nil {
				t.Fatal(err)
			}
			got = decode[httpapi.SchemaResponse](t, e.get(t, "/v1/schema"))
			if !got.UpToDate || got.Migrations[3].How != "unrecorded" {
				t.Fatalf("schema with migration 4 unrecorded: %+v", got)
			}
			if err := db.Exec("DROP TABLE dq_topic_state").Error; err != nil { // migration 4's table
				t.Fatal(err)
			}
			got = decode[httpapi.SchemaResponse](t, e.get(t, "/v1/schema"))
			if got.UpToDate || got.Version != 3 || len(got.Pending()) != 1 || got.Migrations[3].Applied {
				t.Fatalf("schema with migration 4 missing: %+v", got)
			}
			expect(t, e.post(t, "/v1/schema", `{}`), http.StatusMethodNotAllowed)
		})
	}
	t.Run("sql down", func(t *testing.T) {
		t.Parallel()
		rdb, ns := testenv.MiniRedis(t)
		e := apiOnDurable(t, rdb, ns, unreachableSQL(t))
		expectUnavailable(t, e.get(t, "/v1/schema"), "sql")
	})
}
