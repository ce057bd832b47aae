package dataplane

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// threeShards is a store of three ledger shards, as far as the relay's
// keys care.
type threeShards struct{ DurableStore }

func (threeShards) LedgerShards() int { return 3 }

// A batch's note goes to the inbox of each shard its rows go to, and only
// theirs: shard 0 keeps a ledger of one shard's key names, the others
// their own; a push takes the note out of every inbox it went to, and so
// does taking it back; a recheck asked for a partition's rows goes to its
// shard's relay.
func TestRelayNotesGoToTheShardsOfTheRows(t *testing.T) {
	rdb, ns := testenv.Redis(t)
	ctx := testenv.Context(t)
	c, err := New(rdb, Config{Namespace: ns, Store: threeShards{}})
	if err != nil {
		t.Fatal(err)
	}
	if c.LedgerShards() != 3 {
		t.Fatalf("LedgerShards %d, want 3", c.LedgerShards())
	}
	if k := c.relay(0); k.mark != ns+":relay" || k.inbox != ns+":{relay}:inbox" {
		t.Errorf("shard 0's keys %+v: want a ledger of one shard's", k)
	}
	if k := c.relay(2); k.mark != ns+":relay:2" || k.inbox != ns+":{relay:2}:inbox" || k.bell != ns+":{relay:2}:bell" {
		t.Errorf("shard 2's keys %+v", k)
	}
	// Partitions 1 and 4 of 6 are on shard 1.
	p1, p4 := PartitionName("t", 6, 1), PartitionName("t", 6, 4)
	note := c.writeNote(ctx, c.planNote([]NewJob{{ID: "a"}, {ID: "b", Delay: time.Second}}, p1, p4))
	if note.member == "" || len(note.shards) != 1 || note.shards[0] != 1 {
		t.Fatalf("note %+v, want one on shard 1", note)
	}
	inboxes := func() (n [3]int64) {
		for i := range 3 {
			n[i] = rdb.ZCard(ctx, c.relay(i).inbox).Val()
		}
		return n
	}
	if n := inboxes(); n != [3]int64{0, 1, 0} {
		t.Fatalf("inboxes hold %v notes, want only shard 1's one", n)
	}
	if tick, err := c.ReadRelayTick(ctx, 1, time.Now().Add(time.Minute).UnixMilli(), 0); err != nil || len(tick.Notes) != 1 {
		t.Fatalf("shard 1's tick: %+v %v, want its note", tick, err)
	}
	// A batch over partitions 0 (shard 0) and 2 (shard 2): both inboxes;
	// its push takes the note out of both in its round trip.
	p0, p2 := PartitionName("t", 6, 0), PartitionName("t", 6, 2)
	both := c.writeNote(ctx, c.planNote([]NewJob{{ID: "c"}}, p0, p2))
	if n := inboxes(); n != [3]int64{1, 1, 1} || len(both.shards) != 2 {
		t.Fatalf("inboxes %v after a note to shards %v, want 1 each", n, both.shards)
	}
	now := time.Now().UnixMilli()
	rows := []RestoreRow{{Topic: p0, ID: "c", State: StateWaiting, RunAt: now, MaxAttempts: 3, Payload: []byte("1")},
		{Topic: p2, ID: "d", State: StateWaiting, RunAt: now, MaxAttempts: 3, Payload: []byte("1")}}
	if _, err := c.Restore(ctx, rows, RestoreOptions{SeenAt: 1, note: both}); err != nil {
		t.Fatal(err)
	}
	if n := inboxes(); n != [3]int64{0, 1, 0} {
		t.Fatalf("inboxes %v after the push, want shard 1's note alone", n)
	}
	// Taking a note back (its batch wrote nothing) empties both inboxes
	// and silences their bells.
	both = c.writeNote(ctx, c.planNote([]NewJob{{ID: "e"}}, p0, p2))
	if n := inboxes(); n != [3]int64{1, 1, 1} {
		t.Fatalf("inboxes %v after a second note, want 1 each", n)
	}
	c.unnote(ctx, both)
	if n := inboxes(); n != [3]int64{0, 1, 0} {
		t.Fatalf("inboxes %v after taking the note back, want shard 1's alone", n)
	}
	if n := rdb.Exists(ctx, c.relay(0).bell, c.relay(2).bell).Val(); n != 0 {
		t.Errorf("%d bells still ring with no note in their inboxes", n)
	}
	c.AskRelayRecheck(ctx, p4)
	for i, want := range []int64{0, 2, 0} {
		if n := rdb.ZCard(ctx, c.relay(i).recheck).Val(); n != want {
			t.Errorf("shard %d: %d rechecks, want %d", i, n, want)
		}
	}
}
