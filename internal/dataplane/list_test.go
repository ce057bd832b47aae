package dataplane_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/dataplane"
	"github.com/delayq/delayq/internal/testenv"
)

func TestListPagesThroughEachState(t *testing.T) {
	forEachBackend(t, dataplane.Config{}, func(t *testing.T, e env) {
		buryN(t, e, "t", 5) // d0..d4 dead, in that order
		for i := 0; i < 3; i++ {
			mustEnqueue(t, e, "t", dataplane.NewJob{ID: fmt.Sprint("later", i), Delay: time.Duration(i+1) * time.Hour})
		}
		p, err := e.c.List(testenv.Context(t), "t", dataplane.StateDead, 1, 2)
		if err != nil || p.Total != 5 || len(p.Jobs) != 2 {
			t.Fatalf("dead page: %+v, %v", p, err)
		}
		for _, j := range p.Jobs {
			if j.State != dataplane.StateDead || j.Job.LastError != "boom" || j.Score == 0 {
				t.Fatalf("dead entry %+v %+v", j, j.Job)
			}
		}
		p, err = e.c.List(testenv.Context(t), "t", dataplane.StateWaiting, 0, 10)
		var got []string
		for _, j := range p.Jobs {
			got = append(got, j.Job.ID)
		}
		if err != nil || p.Total != 3 || !slices.Equal(got, []string{"later0", "later1", "later2"}) {
			t.Fatalf("scheduled page %v (total %d), %v", got, p.Total, err)
		}
		if _, err := e.c.List(testenv.Context(t), "t", dataplane.StateDead, 0, 0); err == nil {
			t.Fatal("limit 0 accepted")
		}
	})
}
