package ledger

import (
	"errors"
	"strings"
	"testing"
)

// A cursor of a shard the ledger does not have says which shards it has,
// for every listing (not "history": ledger list gives it too).
func TestCheckCursorShardSaysWhichShards(t *testing.T) {
	err := checkCursorShard(&Cursor{Shard: 1}, 1)
	if !errors.Is(err, ErrBadCursor) || !strings.Contains(err.Error(), "names shard 1, and the ledger's shards are 0 to 0") ||
		strings.Contains(err.Error(), "history") {
		t.Fatalf("%v", err)
	}
	if err := checkCursorShard(&Cursor{Shard: 2}, 3); err != nil {
		t.Fatalf("shard 2 of 3: %v", err)
	}
}
