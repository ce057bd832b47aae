package ledger

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
)

// JobResult is a job's result as its history row keeps it: the JSON its
// handler recorded (queue.RecordResult), nil for none. It marshals as that
// JSON, not as a string of it, and is stored as text (NULL for none).
type JobResult []byte

// MarshalJSON writes the result as is; none is null.
func (r JobResult) MarshalJSON() ([]byte, error) {
	if r == nil {
		return []byte("null"), nil
	}
	if !json.Valid(r) {
		// Written only from json.Marshal's output, so this is a row
		// edited by hand: shown as the string it holds.
		return json.Marshal(string(r))
	}
	return r, nil
}

// UnmarshalJSON keeps the JSON value as is (null: none).
func (r *JobResult) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*r = nil
		return nil
	}
	*r = append((*r)[:0], b...)
	return nil
}

// Scan reads the column (NULL: none).
func (r *JobResult) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*r = nil
	case []byte:
		*r = append(JobResult(nil), v...)
	case string:
		*r = JobResult(v)
	default:
		return fmt.Errorf("ledger: a job result of type %T", src)
	}
	return nil
}

// Value writes the column: NULL for none.
func (r JobResult) Value() (driver.Value, error) {
	if r == nil {
		return nil, nil
	}
	return string(r), nil
}
