package dataplane_test

import (
	"slices"
	"testing"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// Markers are missing until written; EnsureEpoch writes only missing ones
// and says which; a marker deleted (Redis lost it) is missing again.
func TestEpochMarkers(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		topics := []string{"a", "b", "c"}
		missing, err := e.c.EpochMissing(ctx, topics)
		if err != nil || !slices.Equal(missing, topics) {
			t.Fatalf("fresh Redis: missing %v, %v", missing, err)
		}
		written, err := e.c.EnsureEpoch(ctx, []string{"a", "b"}, "v1")
		if err != nil || !slices.Equal(written, []string{"a", "b"}) {
			t.Fatalf("first ensure wrote %v, %v", written, err)
		}
		written, err = e.c.EnsureEpoch(ctx, topics, "v2")
		if err != nil || !slices.Equal(written, []string{"c"}) {
			t.Fatalf("second ensure wrote %v, %v", written, err)
		}
		if v, _ := e.rdb.Get(ctx, e.ns+":{a}:epoch").Result(); v != "v1" {
			t.Fatalf("marker of a is %q: an existing marker was overwritten", v)
		}
		if missing, err = e.c.EpochMissing(ctx, topics); err != nil || len(missing) != 0 {
			t.Fatalf("after ensure: missing %v, %v", missing, err)
		}
		if err := e.rdb.Del(ctx, e.ns+":{b}:epoch").Err(); err != nil {
			t.Fatal(err)
		}
		if missing, err = e.c.EpochMissing(ctx, topics); err != nil || !slices.Equal(missing, []string{"b"}) {
			t.Fatalf("after losing b's marker: missing %v, %v", missing, err)
		}
		if _, err := e.c.EpochMissing(ctx, []string{"bad topic"}); err == nil {
			t.Fatal("bad topic accepted")
		}
	})
}
