package dataplane_test

import (
	"testing"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

// The relay moves its mark only while Redis has one: a pass that read the
// mark before Redis lost its data does not write it back into the empty
// Redis, so the next pass sees the loss and reloads.
func TestMoveRelayMarkOnlyWhileThere(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		ctx := testenv.Context(t)
		if moved, err := e.c.MoveRelayMark(ctx, 0, dataplane.RelayMark{Loaded: 5, Checked: 3}); err != nil || moved {
			t.Fatalf("move without a mark: %v, %v; want not moved", moved, err)
		}
		if _, ok, err := e.c.RelayMark(ctx, 0); err != nil || ok {
			t.Fatalf("a mark after a move without one: %v, %v", ok, err)
		}
		// A reload opens the key: still no mark to a reader, and a move
		// at its end writes one.
		if err := e.c.OpenRelayMark(ctx, 0); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := e.c.RelayMark(ctx, 0); err != nil || ok {
			t.Fatalf("a mark after OpenRelayMark alone: %v, %v", ok, err)
		}
		if moved, err := e.c.MoveRelayMark(ctx, 0, dataplane.RelayMark{Loaded: 5, Checked: 3}); err != nil || !moved {
			t.Fatalf("move over a mark: %v, %v; want moved", moved, err)
		}
		if m, ok, err := e.c.RelayMark(ctx, 0); err != nil || !ok || m != (dataplane.RelayMark{Loaded: 5, Checked: 3}) {
			t.Fatalf("mark %+v, %v, %v; want {5 3}", m, ok, err)
		}
	})
}
