package dataplane

import (
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// A claim takes the coming jobs (its claim-ahead) once no due job is left,
// whether or not a job of raised priority waits: with nDue 0 (every
// handler busy) and with exactly nDue due jobs (a review found both taking
// nothing ahead once a pri key existed).
func TestClaimAheadWithRaisedPriorities(t *testing.T) {
	for _, prio := range []int{0, 1} {
		for _, c := range []struct {
			due  bool // a job due now as well
			nDue int
			want []string
		}{
			{false, 0, []string{"soon"}},
			{true, 1, []string{"due", "soon"}},
			{true, 0, nil},
		} {
			rdb, ns := testenv.Redis(t)
			q, err := New(rdb, Config{Namespace: ns})
			if err != nil {
				t.Fatal(err)
			}
			ctx := testenv.Context(t)
			if c.due {
				if _, err := q.Enqueue(ctx, "t", NewJob{ID: "due"}); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := q.Enqueue(ctx, "t", NewJob{ID: "soon", Delay: 300 * time.Millisecond, Priority: prio}); err != nil {
				t.Fatal(err)
			}
			cl, err := q.claim(ctx, "t", claimOpts{n: 5, nDue: c.nDue, lease: 10 * time.Second, ahead: time.Second, oldestEvery: 10})
			if err != nil {
				t.Fatal(err)
			}
			if got := claimedIDs(cl); !slices.Equal(got, c.want) {
				t.Errorf("priority %d, due job %v, nDue %d: claimed %v, want %v", prio, c.due, c.nDue, got, c.want)
			}
		}
	}
}
