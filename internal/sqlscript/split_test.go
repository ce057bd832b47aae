package sqlscript

import (
	"reflect"
	"testing"
)

func TestSplit(t *testing.T) {
	got := Split(`-- a comment; with a semicolon
CREATE TABLE t (
  a INT -- the key; mid-line
);

INSERT INTO t VALUES ('x;y');
  -- indented comment
SELECT 1`)
	want := []string{
		"CREATE TABLE t (\n  a INT -- the key; mid-line\n)",
		"INSERT INTO t VALUES ('x;y')",
		"SELECT 1",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Split:\n got %q\nwant %q", got, want)
	}
	if got := Split("\n-- only comments\n\n"); got != nil {
		t.Errorf("Split of comments only: %q, want none", got)
	}
}
