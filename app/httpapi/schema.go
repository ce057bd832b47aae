package httpapi

import (
	"net/http"

	"github.com/delayq/delayq/ledger"
)

// SchemaResponse is GET /v1/schema: where the ledger's schema stands, the
// same as `delayq migrate --status --json`.
type SchemaResponse struct {
	ledger.SchemaStatus
	// Table is the schema version table (dq_schema_migrations by default).
	Table string `json:"table"`
	// UpToDate is true when every migration this build knows is applied.
	UpToDate bool `json:"up_to_date"`
}

// NewSchemaResponse wraps a status with its table.
func NewSchemaResponse(st ledger.SchemaStatus, table string) SchemaResponse {
	return SchemaResponse{SchemaStatus: st, Table: table, UpToDate: st.UpToDate()}
}

// schema handles GET /v1/schema. It reads and changes nothing else: the
// migrations are applied by `delayq migrate` or sql.auto_migrate. Over
// ledger shards it is the least migrated shard's status.
func (a *api) schema(w http.ResponseWriter, r *http.Request) error {
	st, err := a.sh.MigrationStatus(r.Context())
	if err != nil {
		return fromSQL(err)
	}
	writeJSON(w, http.StatusOK, NewSchemaResponse(st, a.l.SchemaVersionTable()))
	return nil
}
