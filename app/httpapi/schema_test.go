package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/delayq/delayq/app/httpapi"
	"github.com/delayq/delayq/internal/testenv"
)

// GET /v1/schema says where the ledger's schema stands, on both backends:
// up to date after the env's Migrate, one migration pending once its record
// is gone; with SQL down it is 503 naming sql.
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
			if err := e.l.DB().WithContext(context.Background()).
				Exec("DELETE FROM dq_schema_migrations WHERE version = ?", got.Latest).Error; err != nil {
				t.Fatal(err)
			}
			got = decode[httpapi.SchemaResponse](t, e.get(t, "/v1/schema"))
			if got.UpToDate || got.Version != got.Latest-1 || len(got.Pending()) != 1 || got.Migrations[got.Latest-1].Applied {
				t.Fatalf("schema with the last migration unrecorded: %+v", got)
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
